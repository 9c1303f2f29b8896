// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// oldIPWatch is scenario 1's second independent watcher: for every moved Service's old ClusterIP
// it measures how long no Service held that IP with a ready endpoint — what a client that cached
// the old IP sees. Any Service of the run's namespaces counts (an old-IP bridge has another name).
// A contender without bridges never serves the old IPs again.
type oldIPWatch struct {
	mu      sync.Mutex
	nss     map[string]bool
	svcs    map[string]*corev1.Service                       // namespace/name → current
	slices  map[string]map[string]*discoveryv1.EndpointSlice // Service namespace/name → slices
	holders map[string]map[string]bool                       // IP → Services holding it
	watched map[string]bool
	downAt  map[string]time.Time
	windows []time.Duration
	stop    chan struct{}
}

func watchOldIPs(ctx context.Context, kube kubernetes.Interface, nss, ips []string) (*oldIPWatch, error) {
	w := &oldIPWatch{nss: map[string]bool{}, svcs: map[string]*corev1.Service{}, slices: map[string]map[string]*discoveryv1.EndpointSlice{},
		holders: map[string]map[string]bool{}, watched: map[string]bool{}, downAt: map[string]time.Time{}, stop: make(chan struct{})}
	for _, ns := range nss {
		w.nss[ns] = true
	}
	for _, ip := range ips {
		w.watched[ip] = true
	}
	f := informers.NewSharedInformerFactory(kube, 0)
	svcInf, sliceInf := f.Core().V1().Services().Informer(), f.Discovery().V1().EndpointSlices().Informer()
	for inf, h := range map[cache.SharedIndexInformer]func(any, bool){svcInf: w.service, sliceInf: w.slice} {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { h(o, false) }, UpdateFunc: func(_, o any) { h(o, false) },
			DeleteFunc: func(o any) {
				if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				h(o, true)
			},
		})
		if err != nil {
			return nil, err
		}
	}
	f.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.HasSynced, sliceInf.HasSynced) {
		close(w.stop)
		return nil, fmt.Errorf("old-IP watch did not sync")
	}
	return w, nil
}

func (w *oldIPWatch) service(o any, deleted bool) {
	s, ok := o.(*corev1.Service)
	if !ok || !w.nss[s.Namespace] {
		return
	}
	key := s.Namespace + "/" + s.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	affected := slices.Clone(s.Spec.ClusterIPs)
	if cur := w.svcs[key]; cur != nil {
		affected = append(affected, cur.Spec.ClusterIPs...)
		for _, ip := range cur.Spec.ClusterIPs {
			delete(w.holders[ip], key)
		}
	}
	if deleted {
		if cur := w.svcs[key]; cur != nil && cur.UID == s.UID {
			delete(w.svcs, key)
		}
	} else {
		w.svcs[key] = s
		for _, ip := range s.Spec.ClusterIPs {
			if w.holders[ip] == nil {
				w.holders[ip] = map[string]bool{}
			}
			w.holders[ip][key] = true
		}
	}
	w.check(affected)
}

func (w *oldIPWatch) slice(o any, deleted bool) {
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok || !w.nss[s.Namespace] {
		return
	}
	key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.slices[key] == nil {
		w.slices[key] = map[string]*discoveryv1.EndpointSlice{}
	}
	if deleted {
		delete(w.slices[key], s.Name)
	} else {
		w.slices[key][s.Name] = s
	}
	if cur := w.svcs[key]; cur != nil {
		w.check(cur.Spec.ClusterIPs)
	}
}

// ready: the Service key has a ready endpoint in a slice of its own incarnation (or mirrored
// from its Endpoints).
func (w *oldIPWatch) ready(key string) bool {
	svc := w.svcs[key]
	if svc == nil {
		return false
	}
	for _, es := range w.slices[key] {
		own := es.Labels[discoveryv1.LabelManagedBy] == "endpointslicemirroring-controller.k8s.io" ||
			slices.ContainsFunc(es.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == svc.UID })
		if !own {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

func (w *oldIPWatch) check(ips []string) {
	now := time.Now()
	for _, ip := range ips {
		if !w.watched[ip] {
			continue
		}
		served := false
		for key := range w.holders[ip] {
			if w.ready(key) {
				served = true
				break
			}
		}
		from, down := w.downAt[ip]
		switch {
		case down && served:
			w.windows = append(w.windows, now.Sub(from))
			delete(w.downAt, ip)
		case !down && !served:
			w.downAt[ip] = now
		}
	}
}

// settle stops the watch and returns the windows, and how many old IPs are unserved at the end
// (all of them for a contender without bridges).
func (w *oldIPWatch) settle() ([]time.Duration, int) {
	close(w.stop)
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.windows), len(w.downAt)
}

// keysIPs are the ClusterIPs of the Services keys, read before the move.
func keysIPs(ctx context.Context, kube kubernetes.Interface, nss []string) ([]string, error) {
	var ips []string
	for _, ns := range nss {
		l, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, s := range l.Items {
			if !strings.HasPrefix(s.Name, "probe-") {
				ips = append(ips, s.Spec.ClusterIPs...)
			}
		}
	}
	return ips, nil
}
