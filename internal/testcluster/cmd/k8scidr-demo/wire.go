// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// wireWatch prints what the wire's clients saw, stage by stage. A nil one (no network
// namespace of the demo's own) prints nothing.
type wireWatch struct {
	w    *testcluster.Wire
	ca   []byte
	svcs []string
	cl   *testcluster.Clients
	who  string
	mark time.Time                      // where what the next line reports begins
	sent map[testcluster.ClientKind]int // the requests sent until mark
}

// startWireWatch starts the wire (kube-proxy in nftables mode, CoreDNS with kOps' Corefile)
// and the clients of the pods started before the migration: every kind, at each of svcs and at
// kube-apiserver through default/kubernetes.
func startWireWatch(ctx context.Context, c *testcluster.Cluster, svcs []string) (*wireWatch, error) {
	w, err := c.StartWire(ctx, testcluster.WireOptions{Mode: testcluster.ProxyNFTables, Corefile: testcluster.CorefileKOps})
	if err != nil {
		return nil, err
	}
	fmt.Printf("The wire: a real kube-proxy (nftables) and CoreDNS (kOps' Corefile) in the demo's own network namespace. "+
		"From now on a client of each kind sends to each of the %d Services of the web pods, and to kube-apiserver through "+
		"default/kubernetes, every 100 ms: %s.\n", len(svcs), kindsText)
	ww := &wireWatch{w: w, ca: c.CACert, svcs: svcs}
	return ww, ww.start(ctx, "pods started before the migration")
}

const kindsText = "old-resolver (resolv.conf on kube-dns's old IP), new-resolver (a pod started since kube-dns moved), " +
	"kept-ip (resolved once at start), service-host (<SVC>_SERVICE_HOST), api-old-host and api-new-host " +
	"(an in-cluster API client on KUBERNETES_SERVICE_HOST from before and after default/kubernetes moved), " +
	"node-port (a load balancer in front of the nodes, at each NodePort and LoadBalancer Service)"

func (ww *wireWatch) start(ctx context.Context, who string) error {
	cl, err := ww.w.StartClients(ctx, testcluster.ClientOptions{Services: ww.svcs, APIServerCA: ww.ca})
	if err != nil {
		return err
	}
	ww.cl, ww.who, ww.mark, ww.sent = cl, who, time.Now(), map[testcluster.ClientKind]int{}
	return nil
}

// between reports failures since the last report (the steps outside the API), if any.
func (ww *wireWatch) between() {
	if ww == nil {
		return
	}
	if line, failed := ww.line(ww.cl.Report()); failed > 0 {
		fmt.Printf("On the wire between the stages (the steps outside the API; this cluster has one kube-apiserver, "+
			"which its clients cannot reach while it restarts), clients of %s, failed/sent: %s\n", ww.who, line)
	}
}

// stage reports what the clients saw during stage n.
func (ww *wireWatch) stage(n int) {
	if ww == nil {
		return
	}
	line, _ := ww.line(ww.cl.Report())
	fmt.Printf("On the wire during stage %d, clients of %s, failed/sent: %s\n", n, ww.who, line)
}

// apiBack waits until the in-cluster API clients reach kube-apiserver again after its restart
// (one instance here: its clients see the restart, which is not the migration's).
func (ww *wireWatch) apiBack(ctx context.Context) error {
	if ww == nil {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return ww.cl.Reach(ctx, testcluster.ClientAPIOld, "", "100.64.0.1") == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the in-cluster API clients do not reach kube-apiserver at 100.64.0.1 after its restart: %w", err)
	}
	return nil
}

// restart replaces the clients by those of the pods running now.
func (ww *wireWatch) restart(ctx context.Context) error {
	if ww == nil {
		return nil
	}
	ww.cl.Stop()
	return ww.start(ctx, "pods started after stage 3")
}

func (ww *wireWatch) stop() {
	if ww != nil {
		ww.cl.Stop()
	}
}

// line is each kind's failures and requests since mark, with the first failure of each kind
// that failed; it moves mark to now.
func (ww *wireWatch) line(r *testcluster.WireReport) (string, int) {
	now, total := time.Now(), 0
	var parts []string
	for _, k := range append(append(slices.Clone(testcluster.ClientKinds), testcluster.APIClientKinds...), testcluster.ClientNodePort) {
		kr := r.Kinds[k]
		if kr == nil {
			continue
		}
		sent := kr.Requests - ww.sent[k]
		ww.sent[k] = kr.Requests
		var failed []testcluster.Failure
		for _, f := range kr.Failures {
			if !f.At.Before(ww.mark) && f.At.Before(now) {
				failed = append(failed, f)
			}
		}
		total += len(failed)
		part := fmt.Sprintf("%s %d/%d", k, len(failed), sent)
		if len(failed) > 0 {
			part += fmt.Sprintf(" (first at %s: %s)", failed[0].Service, failed[0].Reason)
		}
		parts = append(parts, part)
	}
	ww.mark = now
	return strings.Join(parts, ", "), total
}
