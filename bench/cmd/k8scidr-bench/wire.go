// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The wire scenario (7): scenario 1's move of o.services Services by each contender, with the
// wire's clients (testcluster.StartClients) sending to every Service with a selector throughout,
// through a real kube-proxy (nftables) and CoreDNS (kOps' Corefile) in the bench's own network
// namespace: what clients see, beside what the API shows. kube-dns does not move here, so the
// kinds are old-resolver (names through the DNS IP), kept-ip and service-host (the IP resolved
// or read at start) and node-port.
const (
	wireScenario = "7. on the wire: recreate %d Services"
	// wireDNSIP is kube-dns's IP, in the cluster's Service range (target), which no run moves.
	wireDNSIP = "172.24.0.10"
	// wireRate is about how many requests a second all clients send together, which a 2-core
	// machine running the cluster too can answer: each client reaches its Service once per
	// (clients / wireRate) seconds.
	wireRate = 1000
)

// wireRun is what the clients of one run saw.
type wireRun struct {
	report   *testcluster.WireReport
	interval time.Duration
}

// wireScenarioRun moves o.services Services with each contender under the wire's clients.
// It needs its own network namespace (root; the bench re-runs itself in one): elsewhere it
// says so and measures nothing.
func (b *bench) wireScenarioRun(ctx context.Context) error {
	scenario := fmt.Sprintf(wireScenario, b.o.services)
	if !b.isolated {
		b.table.skipped = append(b.table.skipped, scenario+": needs root, to run in a network namespace of the bench's own")
		return nil
	}
	w, err := b.c.StartWire(ctx, testcluster.WireOptions{Mode: testcluster.ProxyNFTables, Corefile: testcluster.CorefileKOps})
	if err != nil {
		return err
	}
	defer w.Stop()
	if _, err := w.Seed(ctx, "wire-dns", 0, wireDNSIP); err != nil {
		return err
	}
	if err := b.c.RestartControllerManager(ctx, kcmRaised...); err != nil {
		return err
	}
	b.wire = w
	defer func() { b.wire = nil }()
	return b.recreationRounds(ctx, scenario, settingRaised, []string{"k8scidr", withBridges, "floor (client-go)", replaceParallel})
}

// startWireClients starts the wire's clients of keys but the selector-less Services (every
// twentieth: their Endpoints name addresses that are not on the wire), or returns nil off the
// wire.
func (b *bench) startWireClients(ctx context.Context, keys []string) (*testcluster.Clients, time.Duration, error) {
	if b.wire == nil {
		return nil, 0, nil
	}
	var targets []string
	for i, k := range keys {
		if i%20 != 2 { // serviceSet's selector-less ones
			targets = append(targets, k)
		}
	}
	// old-resolver, kept-ip and service-host at each; node-port at every twentieth.
	interval := time.Duration(len(targets)*3+len(targets)/19) * time.Second / wireRate
	interval = max(interval, 100*time.Millisecond)
	cl, err := b.wire.StartClients(ctx, testcluster.ClientOptions{Services: targets, Interval: interval})
	return cl, interval, err
}

// wireKinds are the kinds the wire scenario's table shows, in order.
var wireKinds = []testcluster.ClientKind{testcluster.ClientOldResolver, testcluster.ClientKeptIP, testcluster.ClientServiceHost, testcluster.ClientNodePort}

// wireTable is the wire scenario's rows per client kind, pooled over rounds: requests, failed
// requests, Services with a failure, and the longest window of failures of one client at one
// Service (with where it was).
func (t *table) wireTable() string {
	var b strings.Builder
	for _, r := range t.rows {
		if !slices.ContainsFunc(r.runs, func(m measure) bool { return m.wire != nil }) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## On the wire\n\nWhat clients saw during scenario 7, through a real kube-proxy (nftables) and CoreDNS " +
				"(kOps' Corefile: ttl 30, cache 30) in the bench's own network namespace: a client of each kind at each Service " +
				"with a selector (the selector-less ones' Endpoints name no address on the wire), each sending once per interval " +
				"(about 1,000 requests a second in all), from before the move until the run settled; a window shorter than the " +
				"interval may go unseen. old-resolver resolves the name through kube-dns and connects; kept-ip connects to the IP " +
				"it resolved at start, service-host to the ClusterIP read at start (`<SVC>_SERVICE_HOST`); node-port to the node " +
				"port read at start. Pooled over rounds.\n\n")
			b.WriteString("| Contender | Client | Interval ms | Requests | Failed | Services with a failure | Longest window ms (at) |\n|---|---|---|---|---|---|---|\n")
		}
		for _, k := range wireKinds {
			requests, failed, longest, at := 0, 0, time.Duration(0), "–"
			services := map[string]bool{}
			var interval time.Duration
			for _, m := range r.runs {
				if m.wire == nil || m.wire.report.Kinds[k] == nil {
					continue
				}
				interval = m.wire.interval
				kr := m.wire.report.Kinds[k]
				requests += kr.Requests
				failed += len(kr.Failures)
				for _, f := range kr.Failures {
					services[f.Service] = true
				}
				if w, svc := kr.Longest(); w.Duration() > longest || w.Failures > 0 && at == "–" {
					longest, at = w.Duration(), fmt.Sprintf("%s, %d failures: %s", svc, w.Failures, strings.Join(w.Reasons, "; "))
				}
			}
			if requests == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s (%s) |\n", r.who, k, ms(interval), requests, failed, len(services), ms(longest), at)
		}
	}
	return b.String()
}
