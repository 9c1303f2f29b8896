// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// APIServerProbe checks, every interval and independently of the provider's code, that an IP
// is held by a Service in default whose EndpointSlices give exactly the apiserver's current
// endpoints (those of default/kubernetes's slices): what an in-cluster client with
// KUBERNETES_SERVICE_HOST = that IP needs. A poll that fails (the apiserver restarting) or
// finds the apiserver without endpoints judges nothing.
type APIServerProbe struct {
	mu       sync.Mutex
	ip       string
	polls    int
	ok       int
	down     time.Time // start of the current gap
	gaps     []Outage
	lastSeen string // the Service holding the IP at the last poll
	stop     context.CancelFunc
	done     chan struct{}
}

// ProbeAPIServerIP starts polling ip every interval.
func (c *Cluster) ProbeAPIServerIP(ip string, interval time.Duration) (*APIServerProbe, error) {
	kube, err := kubernetes.NewForConfig(c.RESTConfig) // its own client: the tests' rate limits do not delay it
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &APIServerProbe{ip: ip, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			p.poll(ctx, kube)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p, nil
}

func (p *APIServerProbe) poll(ctx context.Context, kube kubernetes.Interface) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	svcs, err := kube.CoreV1().Services("default").List(pctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	eps, err := kube.DiscoveryV1().EndpointSlices("default").List(pctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var holder *corev1.Service
	for i := range svcs.Items {
		if slices.Contains(svcs.Items[i].Spec.ClusterIPs, p.ip) {
			holder = &svcs.Items[i]
		}
	}
	// The apiserver's own slices: its reconciler writes them whether or not the Service exists.
	want := endpointsOf(eps.Items, "kubernetes", nil)
	if len(want) == 0 {
		return // the apiserver has no endpoints just now (restarting): nothing to compare with
	}
	up := holder != nil && slices.Equal(endpointsOf(eps.Items, holder.Name, holder), want)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	if holder != nil {
		p.lastSeen = holder.Name
	}
	switch {
	case up:
		p.ok++
		if !p.down.IsZero() {
			p.gaps = append(p.gaps, Outage{From: p.down, To: now})
			p.down = time.Time{}
		}
	case p.down.IsZero():
		p.down = now
	}
}

// endpointsOf are the ready "ip:port" endpoints of Service name's slices (owned by svc, when a
// Service owns them), sorted.
func endpointsOf(list []discoveryv1.EndpointSlice, name string, svc *corev1.Service) []string {
	var out []string
	for i := range list {
		es := &list[i]
		if es.Labels[discoveryv1.LabelServiceName] != name || svc != nil && !servesService(es, svc) {
			continue
		}
		for _, e := range es.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				for _, port := range es.Ports {
					if addr, err := netip.ParseAddr(a); err == nil && port.Port != nil {
						out = append(out, netip.AddrPortFrom(addr, uint16(*port.Port)).String())
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Stop ends the polling.
func (p *APIServerProbe) Stop() {
	p.stop()
	<-p.done
}

// Report is the number of judged polls, how many found the IP served, and the gaps (one still
// open has To zero).
func (p *APIServerProbe) Report() (polls, ok int, gaps []Outage, holder string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gaps = slices.Clone(p.gaps)
	if !p.down.IsZero() {
		gaps = append(gaps, Outage{From: p.down})
	}
	return p.polls, p.ok, gaps, p.lastSeen
}

// Longest is the longest gap (an open one counted up to now).
func (p *APIServerProbe) Longest() time.Duration {
	_, _, gaps, _ := p.Report()
	var longest time.Duration
	for _, g := range gaps {
		longest = max(longest, g.Duration())
	}
	return longest
}
