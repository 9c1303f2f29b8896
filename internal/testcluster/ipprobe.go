// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// IPProbe is a resolver check at the API level: it answers whether traffic to a Service IP
// would reach a backend, from what kube-proxy reads — a Service holding the IP (as a ClusterIP,
// or as an external IP, which kube-proxy serves alike: the hand-over's carrier and bridge), and an
// EndpointSlice labelled with that Service's name (any manager, as kube-proxy merges them)
// with a ready endpoint. It watches Services and EndpointSlices in one namespace and records,
// per IP, when it first routed and every interval after that in which it did not.
type IPProbe struct {
	mu      sync.Mutex
	ips     []string
	first   map[string]time.Time
	down    map[string]time.Time // start of the current outage
	outages map[string][]Outage
	svcs    cache.Store
	slices  cache.Store
	stop    chan struct{}
}

// Outage is an interval in which an IP that had routed did not; To is zero while it lasts.
type Outage struct {
	From, To time.Time
}

// Duration is the outage's length, up to now while it lasts.
func (o Outage) Duration() time.Duration {
	if o.To.IsZero() {
		return time.Since(o.From)
	}
	return o.To.Sub(o.From)
}

// ProbeServiceIPs starts an IPProbe for ips in namespace.
func (c *Cluster) ProbeServiceIPs(ctx context.Context, namespace string, ips ...string) (*IPProbe, error) {
	p := &IPProbe{ips: ips, first: map[string]time.Time{}, down: map[string]time.Time{},
		outages: map[string][]Outage{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(namespace))
	svcInf := f.Core().V1().Services().Informer()
	sliceInf := f.Discovery().V1().EndpointSlices().Informer()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.evaluate() },
		UpdateFunc: func(any, any) { p.evaluate() },
		DeleteFunc: func(any) { p.evaluate() },
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf, sliceInf} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
	}
	p.svcs, p.slices = svcInf.GetStore(), sliceInf.GetStore()
	f.Start(p.stop)
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.HasSynced, sliceInf.HasSynced) {
		close(p.stop)
		return nil, fmt.Errorf("probing Service IPs: caches did not sync: %w", context.Cause(ctx))
	}
	p.evaluate()
	return p, nil
}

// Stop ends the watches.
func (p *IPProbe) Stop() { close(p.stop) }

// Routes says whether ip routes now.
func (p *IPProbe) Routes(ip string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.routes(ip)
}

// Report is when ip first routed (zero if never) and its outages since.
func (p *IPProbe) Report(ip string) (time.Time, []Outage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.outages[ip])
	if from, ok := p.down[ip]; ok {
		out = append(out, Outage{From: from})
	}
	return p.first[ip], out
}

// RoutesAt says whether ip routed at time at: it had first routed by then, and no outage
// (an open one included) covers it.
func (p *IPProbe) RoutesAt(ip string, at time.Time) bool {
	first, outages := p.Report(ip)
	if first.IsZero() || first.After(at) {
		return false
	}
	return !slices.ContainsFunc(outages, func(o Outage) bool { return !o.From.After(at) && (o.To.IsZero() || o.To.After(at)) })
}

// Longest is the longest outage of ip that began in [from, to), and how many there were.
func (p *IPProbe) Longest(ip string, from, to time.Time) (time.Duration, int) {
	_, outages := p.Report(ip)
	var longest time.Duration
	n := 0
	for _, o := range outages {
		if o.From.Before(from) || !o.From.Before(to) {
			continue
		}
		n++
		longest = max(longest, o.Duration())
	}
	return longest, n
}

func (p *IPProbe) evaluate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for _, ip := range p.ips {
		up := p.routes(ip)
		from, isDown := p.down[ip]
		switch {
		case up && p.first[ip].IsZero():
			p.first[ip] = now
		case up && isDown:
			p.outages[ip] = append(p.outages[ip], Outage{From: from, To: now})
			delete(p.down, ip)
		case !up && !isDown && !p.first[ip].IsZero():
			p.down[ip] = now
		}
	}
}

func (p *IPProbe) routes(ip string) bool {
	for _, o := range p.svcs.List() {
		s, ok := o.(*corev1.Service)
		if !ok || s.Spec.Type == corev1.ServiceTypeExternalName ||
			!slices.Contains(s.Spec.ClusterIPs, ip) && s.Spec.ClusterIP != ip && !slices.Contains(s.Spec.ExternalIPs, ip) {
			continue
		}
		for _, o := range p.slices.List() {
			es, ok := o.(*discoveryv1.EndpointSlice)
			if !ok || !servesService(es, s) {
				continue
			}
			for _, ep := range es.Endpoints {
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					return true
				}
			}
		}
	}
	return false
}

// servesService says whether es is one of s's slices: its namespace and service-name label, as
// kube-proxy matches them, and, when a Service owns it, s itself. A slice the garbage collector
// has not yet deleted with the Service's previous object would otherwise count as serving the
// new one, and hide the gap a move leaves. Slices mirrored from Endpoints are owned by those.
func servesService(es *discoveryv1.EndpointSlice, s *corev1.Service) bool {
	if es.Namespace != s.Namespace || es.Labels[discoveryv1.LabelServiceName] != s.Name {
		return false
	}
	for _, ref := range es.OwnerReferences {
		if ref.Kind == "Service" && ref.UID != s.UID {
			return false
		}
	}
	return true
}
