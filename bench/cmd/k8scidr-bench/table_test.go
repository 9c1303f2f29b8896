package main

import (
	"strings"
	"testing"
	"time"
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
}
