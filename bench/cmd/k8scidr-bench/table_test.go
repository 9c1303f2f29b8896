// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestOldIPColumn: the column renders every mix of old IPs served again, never served again and
// never taken down (moves not made) without indexing an empty pool (the CI panic of stop 46).
func TestOldIPColumn(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		runs []measure
		want string
	}{
		{"no old IPs", []measure{{}}, "–"},
		{"none bridged", []measure{{oldIPNever: 3, oldIPs: 3}}, "never served again"},
		{"all back", []measure{{oldIPWindows: []time.Duration{10 * ms, 30 * ms, 20 * ms}, oldIPs: 3}}, "20 / 30 / 30"},
		{"some never", []measure{{oldIPWindows: []time.Duration{10 * ms}, oldIPNever: 1, oldIPs: 2}}, "10 / 10 / 10 (1 of 2 never)"},
		{"none down", []measure{{oldIPs: 4}}, "none went down and came back (0 of 4 never served again)"},
		{"none down, some never", []measure{{oldIPNever: 1, oldIPs: 4}}, "none went down and came back (1 of 4 never served again)"},
	} {
		r := &row{runs: c.runs}
		if got := r.oldIPColumn(); got != c.want {
			t.Errorf("%s: oldIPColumn() = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestBinds: the request bound counts the full bucket's burst, and the verdict names the
// requests only when they alone exceed what the target allows.
func TestBinds(t *testing.T) {
	if got := requestBound(150); got != 0 {
		t.Errorf("requestBound(150) = %v, want 0 (within the burst of %d)", got, clientBurst)
	}
	if got := requestBound(3454); got != float64(3454-clientBurst)/clientQPS {
		t.Errorf("requestBound(3454) = %v", got)
	}
	floor := &row{runs: []measure{{wall: 18200 * time.Millisecond, requests: 2010}}}
	for _, c := range []struct {
		requests int64
		want     string
	}{
		{3454, "requests bind"}, // 32.5 s of requests against the 23.7 s that 1.3x the floor allows
		{2300, "pacing binds"},  // 21.0 s: it would fit
	} {
		k := &row{runs: []measure{{wall: 39400 * time.Millisecond, requests: c.requests}}}
		if got := binds(k, floor, 1.3); !strings.Contains(got, c.want) {
			t.Errorf("%d requests: %q, want %q", c.requests, got, c.want)
		}
	}
	// Requests that would fit, on a cluster whose processes kept the machine busy: the cluster binds.
	for _, c := range []struct {
		busy float64 // share of the machine's processors
		want string
	}{{0.95, "the cluster binds"}, {0.3, "pacing binds: its requests would fit (the cluster's processes kept 30%"}} {
		wall := 39400 * time.Millisecond
		cpu := time.Duration(c.busy * float64(wall) * float64(runtime.NumCPU()))
		k := &row{runs: []measure{{wall: wall, requests: 2300, clusterCPU: cpu}}}
		if got := binds(k, floor, 1.3); !strings.Contains(got, c.want) {
			t.Errorf("cluster %.0f%% busy: %q, want %q", c.busy*100, got, c.want)
		}
	}
}

// TestStartTarget: each provider row with a measured start gets a target line, met by its
// slowest run's start within 2 s and missed past it; rows without one (the floor) get none.
func TestStartTarget(t *testing.T) {
	var tb table
	tb.add("4. recreate 10000 Services", settingRaised, "k8scidr", measure{wall: time.Minute, start: 1300 * time.Millisecond})
	tb.add("1. recreate 1000 Services", settingDefaults, "k8scidr", measure{wall: time.Minute, start: 2500 * time.Millisecond})
	tb.add("1. recreate 1000 Services", settingDefaults, "floor (client-go)", measure{wall: time.Minute})
	var lines []string
	for _, l := range tb.targets(options{}) {
		if strings.Contains(l, "first move began") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "met: 4. recreate 10000 Services, "+settingRaised+", k8scidr: first move began 1.30 s") ||
		!strings.HasPrefix(lines[1], "MISSED: 1. recreate 1000 Services, "+settingDefaults+", k8scidr: first move began 2.50 s") {
		t.Fatalf("start targets:\n%s", strings.Join(lines, "\n"))
	}
}

// TestIsServiceWrite: a Service created, changed or deleted starts the moves; reads, dry runs,
// status and other kinds do not.
func TestIsServiceWrite(t *testing.T) {
	for _, c := range []struct {
		method, url string
		want        bool
	}{
		{http.MethodDelete, "/api/v1/namespaces/b1/services/svc0", true},
		{http.MethodPost, "/api/v1/namespaces/b1/services", true},
		{http.MethodPut, "/api/v1/namespaces/b1/services/svc0", true},
		{http.MethodPatch, "/api/v1/namespaces/b1/services/svc0", true},
		{http.MethodPost, "/api/v1/namespaces/b1/services?dryRun=All", false},
		{http.MethodPut, "/api/v1/namespaces/b1/services/svc0?dryRun=All", false},
		{http.MethodDelete, "/api/v1/namespaces/b1/services/svc0?dryRun=All", false},
		{http.MethodPatch, "/api/v1/namespaces/b1/services/svc0/status", false},
		{http.MethodGet, "/api/v1/namespaces/b1/services/svc0", false},
		{http.MethodGet, "/api/v1/namespaces/b1/services", false},
		{http.MethodDelete, "/api/v1/namespaces/b1/services", false},
		{http.MethodPut, "/api/v1/namespaces/b1/services/svc0/status", false},
		{http.MethodPost, "/api/v1/namespaces/kube-system/configmaps", false},
		{http.MethodDelete, "/apis/discovery.k8s.io/v1/namespaces/b1/endpointslices/x", false},
	} {
		if got := isServiceWrite(httptest.NewRequest(c.method, c.url, nil)); got != c.want {
			t.Errorf("isServiceWrite(%s %s) = %v, want %v", c.method, c.url, got, c.want)
		}
	}
}

// TestWireTable: the wire section pools each kind over rounds (requests and failures summed,
// Services counted once, the longest window of any round with its Service), leaves out kinds
// that sent nothing, and is absent from a table without a wire run.
func TestWireTable(t *testing.T) {
	if got := (&table{rows: []*row{{who: "floor (client-go)", runs: []measure{{}}}}}).wireTable(); got != "" {
		t.Errorf("a table without wire runs has a wire section:\n%s", got)
	}
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	window := func(d time.Duration, n int) testcluster.Window {
		return testcluster.Window{From: at, To: at.Add(d), Failures: n, Reasons: []string{"http 100.64.0.9: connect timeout"}}
	}
	fail := func(svc string) testcluster.Failure { return testcluster.Failure{Service: svc, At: at} }
	run := func(kept *testcluster.KindReport) measure {
		return measure{wire: &wireRun{interval: 3 * time.Second, report: &testcluster.WireReport{Kinds: map[testcluster.ClientKind]*testcluster.KindReport{
			testcluster.ClientOldResolver: {Requests: 500},
			testcluster.ClientKeptIP:      kept,
		}}}}
	}
	tb := &table{rows: []*row{{who: "k8scidr", runs: []measure{
		run(&testcluster.KindReport{Requests: 500, Failures: []testcluster.Failure{fail("a/s1"), fail("a/s1")},
			Windows: map[string][]testcluster.Window{"a/s1": {window(1500*time.Millisecond, 2)}}}),
		run(&testcluster.KindReport{Requests: 400, Failures: []testcluster.Failure{fail("a/s1"), fail("a/s2"), fail("a/s2")},
			Windows: map[string][]testcluster.Window{"a/s1": {window(0, 1)}, "a/s2": {window(4*time.Second, 2)}}}),
	}}}}
	got := tb.wireTable()
	for _, want := range []string{
		"| k8scidr | old-resolver | 3000 | 1000 | 0 | 0 | 0 (–) |",
		"| k8scidr | kept-ip | 3000 | 900 | 5 | 2 | 4000 (a/s2, 2 failures: http 100.64.0.9: connect timeout) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the wire section lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| service-host |") || strings.Contains(got, "| node-port |") {
		t.Errorf("the wire section shows kinds that did not run:\n%s", got)
	}
}
