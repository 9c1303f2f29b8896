// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

var debug = os.Getenv("BENCH_DEBUG") != ""

// outageWatch is the independent watcher of scenario 1: for every tracked Service it measures
// the time from seeing its DELETE to both a new Service of that name and an EndpointSlice for
// it with a ready endpoint (one not owned by a deleted incarnation) being present — when
// kube-proxy could route it again.
type outageWatch struct {
	mu      sync.Mutex
	tracked map[string]bool
	svcs    map[string]*corev1.Service
	slices  map[string]map[string]*discoveryv1.EndpointSlice
	deleted map[string][]types.UID
	downAt  map[string]time.Time
	windows []time.Duration
	upAt    []time.Time // when each window ended
	stop    chan struct{}
}

func watchOutages(ctx context.Context, kube kubernetes.Interface, tracked []string) (*outageWatch, error) {
	w := &outageWatch{tracked: map[string]bool{}, svcs: map[string]*corev1.Service{},
		slices: map[string]map[string]*discoveryv1.EndpointSlice{}, deleted: map[string][]types.UID{},
		downAt: map[string]time.Time{}, stop: make(chan struct{})}
	for _, k := range tracked {
		w.tracked[k] = true
	}
	f := informers.NewSharedInformerFactory(kube, 0)
	svcInf := f.Core().V1().Services().Informer()
	sliceInf := f.Discovery().V1().EndpointSlices().Informer()
	_, err := svcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.service(o, false) },
		UpdateFunc: func(_, o any) { w.service(o, false) },
		DeleteFunc: func(o any) { w.service(o, true) },
	})
	if err != nil {
		return nil, err
	}
	_, err = sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.slice(o, false) },
		UpdateFunc: func(_, o any) { w.slice(o, false) },
		DeleteFunc: func(o any) { w.slice(o, true) },
	})
	if err != nil {
		return nil, err
	}
	f.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.HasSynced, sliceInf.HasSynced) {
		close(w.stop)
		return nil, fmt.Errorf("outage watch did not sync")
	}
	return w, nil
}

func (w *outageWatch) service(o any, deleted bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	s, ok := o.(*corev1.Service)
	if !ok {
		return
	}
	key := s.Namespace + "/" + s.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.tracked[key] {
		return
	}
	if deleted {
		if cur := w.svcs[key]; cur != nil && cur.UID == s.UID {
			delete(w.svcs, key)
		}
		w.deleted[key] = append(w.deleted[key], s.UID)
		if _, down := w.downAt[key]; !down {
			w.downAt[key] = time.Now()
		}
		return
	}
	w.svcs[key] = s
	w.check(key)
}

func (w *outageWatch) slice(o any, deleted bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.tracked[key] {
		return
	}
	if w.slices[key] == nil {
		w.slices[key] = map[string]*discoveryv1.EndpointSlice{}
	}
	if deleted {
		delete(w.slices[key], s.Name)
	} else {
		w.slices[key][s.Name] = s
	}
	w.check(key)
}

// routable: the Service exists and a slice not owned by a deleted incarnation has a ready endpoint.
func (w *outageWatch) routable(key string) bool {
	s := w.svcs[key]
	if s == nil || slices.Contains(w.deleted[key], s.UID) {
		return false
	}
	for _, es := range w.slices[key] {
		if slices.ContainsFunc(es.OwnerReferences, func(r metav1.OwnerReference) bool { return slices.Contains(w.deleted[key], r.UID) }) {
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

func (w *outageWatch) check(key string) {
	from, down := w.downAt[key]
	if down && w.routable(key) {
		w.windows = append(w.windows, time.Since(from))
		w.upAt = append(w.upAt, time.Now())
		if debug && time.Since(from) > 250*time.Millisecond {
			logf("slow: %s %v", key, time.Since(from).Round(time.Millisecond))
		}
		delete(w.downAt, key)
	}
}

// ready counts tracked Services routable now (setup waits for all).
func (w *outageWatch) ready() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k := range w.tracked {
		if w.routable(k) {
			n++
		}
	}
	return n
}

// settle waits until no tracked Service is down or timeout passes, then stops the watch and
// returns the windows and the Services still down (lost: gone, or without endpoints).
func (w *outageWatch) settle(ctx context.Context, timeout time.Duration) ([]time.Duration, []string) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		w.mu.Lock()
		n := len(w.downAt)
		w.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(w.stop)
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost []string
	for k := range w.tracked {
		if _, down := w.downAt[k]; down || w.svcs[k] == nil {
			lost = append(lost, k)
		}
	}
	slices.Sort(lost)
	return slices.Clone(w.windows), lost
}

// recoveredAt are the times tracked Services became routable again, in order (after settle).
func (w *outageWatch) recoveredAt() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.upAt)
}
