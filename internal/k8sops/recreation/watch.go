// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Watch plumbing for the executor: informers on Services and EndpointSlices, waits on them,
// and small helpers over what they hold.
package recreation

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// objectWatch lists and watches one named object.
func objectWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name string) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return watchFn(ctx, o)
		},
	}
}

// waitDeleted watches until no object with uid is left.
func waitDeleted(ctx context.Context, lw *cache.ListWatch, obj runtime.Object, uid types.UID) error {
	_, err := watchtools.UntilWithSync(ctx, lw, obj, func(store cache.Store) (bool, error) {
		return !slices.ContainsFunc(store.List(), func(o any) bool {
			m, ok := o.(metav1.Object)
			return ok && m.GetUID() == uid
		}), nil
	}, func(ev watch.Event) (bool, error) {
		o, ok := ev.Object.(metav1.Object)
		return ok && ev.Type == watch.Deleted && o.GetUID() == uid, nil
	})
	return err
}

// Watches are the EndpointSlice and admission-guard watches of an apply's run, started before
// its snapshot is read (StartWatches) so that they list and sync while the snapshot lists: at
// 10,000 Services each takes about a second, and the first move waits for both. Handed to the
// run in ExecOptions.Watches; the caller stops them once the run is over.
type Watches struct {
	ready  chan struct{} // closed once both are up, or the slices' failed
	slices *sliceWatch
	err    error // the EndpointSlice watch's
	guards *guardWatch
	stop   func()
}

// StartWatches starts the run's EndpointSlice and admission-guard watches on ctx and returns at
// once; log says when the guards fall back to relisting.
func StartWatches(ctx context.Context, c *k8sops.Client, log func(string, map[string]any)) *Watches {
	w := &Watches{ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	var stopGuards func()
	go func() {
		defer close(w.ready)
		var g errgroup.Group
		g.Go(func() (err error) { w.slices, err = startSliceWatch(ctx, c); return err })
		g.Go(func() error { w.guards, stopGuards = startGuardWatch(ctx, c, logTo(log)); return nil })
		w.err = g.Wait()
	}()
	w.stop = func() {
		cancel() // ends a wait for a watch that cannot sync
		<-w.ready
		if stopGuards != nil {
			stopGuards()
		}
		if w.slices != nil {
			w.slices.stop()
		}
	}
	return w
}

// Stop ends the watches, whether up, still starting or failed.
func (w *Watches) Stop() { w.stop() }

// logTo is log, or a discard when nil.
func logTo(log func(string, map[string]any)) func(string, map[string]any) {
	if log == nil {
		return func(string, map[string]any) {}
	}
	return log
}

// startWatches starts the run's watches at once and waits for them: the EndpointSlices and the
// admission guards when it moves or restores (or waits for those of ExecOptions.Watches), the
// Endpoints when it carries selector-less Endpoints over. stop ends those it started; an error
// is the EndpointSlice watch's (the others fall back to reads).
func (x *executor) startWatches(ctx context.Context, moving, endpoints bool, seed *corev1.EndpointsList) (stop func(), err error) {
	var g errgroup.Group // not WithContext: the watches live on ctx after the wait
	var stopSlices, stopGuards, stopEndpoints func()
	switch early := x.o.Watches; {
	case moving && early != nil:
		g.Go(func() error {
			select {
			case <-early.ready:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if early.err != nil {
				return early.err
			}
			x.useSlices(early.slices)
			x.guards.use(early.guards)
			return nil
		})
	case moving:
		g.Go(func() error {
			sw, err := startSliceWatch(ctx, x.c)
			if err == nil {
				x.useSlices(sw)
				stopSlices = sw.stop
			}
			return err
		})
		g.Go(func() error { stopGuards = x.guards.watch(ctx, x.c, x.log); return nil })
	}
	if endpoints {
		g.Go(func() error { stopEndpoints = x.watchEndpoints(ctx, seed); return nil })
	}
	err = g.Wait()
	return func() {
		for _, f := range []func(){stopEndpoints, stopGuards, stopSlices} {
			if f != nil {
				f()
			}
		}
	}, err
}

// sliceWatch is one EndpointSlice watch for a whole run, indexed by Service ("ns/name");
// changed fires on every event.
type sliceWatch struct {
	index   cache.Indexer
	changed *broadcast
	stop    func()
}

func (x *executor) useSlices(sw *sliceWatch) { x.sliceIndex, x.changed = sw.index, sw.changed }

// startSliceWatch starts an EndpointSlice watch and waits for it to sync.
func startSliceWatch(ctx context.Context, c *k8sops.Client) (*sliceWatch, error) {
	api := c.Kube.DiscoveryV1().EndpointSlices("")
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = discoveryv1.LabelServiceName
			return api.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = discoveryv1.LabelServiceName
			return api.Watch(ctx, o)
		},
	}, c.Kube) // a fake clientset cannot stream the list
	inf := cache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{
		"service": func(o any) ([]string, error) {
			s, ok := o.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil, nil
			}
			return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
		},
	})
	// The run reads no slice's managedFields: at 10,000 Services they would be megabytes held.
	_ = inf.SetTransform(func(o any) (any, error) {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			s.ManagedFields = nil
		}
		return o, nil
	})
	sw := &sliceWatch{index: inf.GetIndexer(), changed: newBroadcast()}
	notify := func(any) { sw.changed.fire() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify,
		UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify}); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	go inf.Run(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(stop)
		return nil, fmt.Errorf("watching EndpointSlices: %w", context.Cause(ctx))
	}
	sw.stop = func() { close(stop) }
	return sw, nil
}

// watchedSlices are the EndpointSlices the run's watch holds for a Service ("ns/name") now:
// what its delete takes along, journaled just before it.
func (x *executor) watchedSlices(key string) []discoveryv1.EndpointSlice {
	items, _ := x.sliceIndex.ByIndex("service", key)
	out := make([]discoveryv1.EndpointSlice, 0, len(items))
	for _, o := range items {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, *s.DeepCopy())
		}
	}
	return out
}

// waitSlice waits until managedBy has written an EndpointSlice with a ready endpoint for the
// new Service. It paces the run to kube-controller-manager; on timeout it notes and goes on.
func (x *executor) waitSlice(parent context.Context, key string, owner types.UID, managedBy string) bool {
	ctx, cancel := context.WithTimeout(parent, x.o.SliceWait)
	defer cancel()
	for {
		ch := x.changed.wait()
		items, _ := x.sliceIndex.ByIndex("service", key)
		if slices.ContainsFunc(items, func(o any) bool {
			s, ok := o.(*discoveryv1.EndpointSlice)
			return ok && s.Labels[discoveryv1.LabelManagedBy] == managedBy && ownedBy(s.OwnerReferences, owner) && readyEndpoints([]discoveryv1.EndpointSlice{*s}) > 0
		}) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if parent.Err() != nil {
				return false // the apply was interrupted: nothing to report of kube-controller-manager
			}
			x.note("%s was recreated, but no EndpointSlice with a ready endpoint appeared within %s (by %s): check kube-controller-manager.",
				key, x.o.SliceWait, managedBy)
			return false
		}
	}
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

func readyEndpoints(list []discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range list {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

func endpointsAddresses(ep *corev1.Endpoints) int {
	n := 0
	for _, s := range ep.Subsets {
		n += len(s.Addresses)
	}
	return n
}

func ipStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// broadcast wakes every waiter on each fire.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// watchEndpoints starts one Endpoints watch for the whole run, so that what a move reads of a
// selector-less Service's Endpoints (before its delete, before the restore, once mirrored, and
// at the end) costs no request. Only hand-made Endpoints are kept whole: those of Services
// without a selector, or unknown to the snapshot (bridges, Services made since); the endpoints
// controller's own, the bulk, are kept as their name alone. A watch that cannot start or sync
// within 10 seconds, or fails later (a role without the watch verb, a watch the apiserver ended
// with an error), is stopped and the run reads the API instead: never an error.
//
// It starts from the snapshot's list of them (seed) where there is one, watching from its
// resourceVersion: at 10,000 Services a second list was a second of the apply's start.
func (x *executor) watchEndpoints(ctx context.Context, seed *corev1.EndpointsList) (stop func()) {
	api := x.c.Kube.CoreV1().Endpoints("")
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
		WatchFuncWithContext: api.Watch,
	}, x.c.Kube)
	if seed != nil {
		var seeded atomic.Bool
		lw = listedFirst{&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				if seeded.CompareAndSwap(false, true) {
					return seed, nil
				}
				return api.List(ctx, o) // a relist, should the watch be lost
			},
			WatchFuncWithContext: api.Watch,
		}}
	}
	inf := cache.NewSharedInformer(lw, &corev1.Endpoints{}, 0)
	w := &endpointsWatch{runWatch: newRunWatch(), store: inf.GetStore()}
	_ = inf.SetWatchErrorHandler(w.fail)
	_ = inf.SetTransform(func(o any) (any, error) {
		if ep, ok := o.(*corev1.Endpoints); ok && x.endpointsStripped(ep.Namespace+"/"+ep.Name) {
			stripped := strippedEndpoints(ep)
			return &stripped, nil
		}
		return o, nil
	})
	if !w.start(ctx, inf) {
		x.log("Endpoints are read one by one: watching them failed (the role needs watch on endpoints)", nil)
		return func() {}
	}
	x.endpointsWatch = w
	return w.stop
}

// listedFirst is a ListerWatcher the reflector lists with, never streaming the list instead
// (client-go's WatchList), so that its first List can hand over a list already made.
type listedFirst struct{ *cache.ListWatch }

func (listedFirst) IsWatchListSemanticsUnSupported() bool { return true }

// strippedEndpoints is what the run keeps of the endpoints controller's Endpoints: the name.
func strippedEndpoints(ep *corev1.Endpoints) corev1.Endpoints {
	return corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Namespace: ep.Namespace, UID: ep.UID,
		ResourceVersion: ep.ResourceVersion}}
}

// endpointsWatch is the run's Endpoints informer (watchEndpoints).
type endpointsWatch struct {
	runWatch
	store cache.Store
}

// runWatch runs informers for the length of a run. Any list or watch error (a role without the
// watch verb, a watch the apiserver ended with an error) marks it failed and stops them all:
// what they hold may then be stale for good, and their users read the API instead.
type runWatch struct {
	failed   *atomic.Bool
	done     chan struct{} // closed (once) to stop the informers
	stopOnce *sync.Once
}

func newRunWatch() runWatch {
	return runWatch{failed: new(atomic.Bool), done: make(chan struct{}), stopOnce: new(sync.Once)}
}

func (w runWatch) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// fail is the informers' watch error handler.
func (w runWatch) fail(*cache.Reflector, error) {
	w.failed.Store(true)
	w.stop()
}

// start runs the informers (nil ones left out) and waits up to 10 seconds for them to sync;
// false, with them stopped, when they did not or one failed.
func (w runWatch) start(ctx context.Context, informers ...cache.SharedInformer) bool {
	var synced []cache.InformerSynced
	for _, inf := range informers {
		if inf != nil {
			go inf.Run(w.done)
			synced = append(synced, inf.HasSynced)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() { // a failure stops the wait as well
		select {
		case <-w.done:
			cancel()
		case <-sctx.Done():
		}
	}()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) || w.failed.Load() {
		w.stop()
		return false
	}
	return true
}

// watchedEndpoints returns the Endpoints key (namespace/name) as the run's watch holds them:
// watched is false when no watch runs or it failed (read them from the API), ep nil when it
// holds none. The watch may lag the API by moments: callers that act on "none" write with a
// create, which fails on Endpoints that exist.
func (x *executor) watchedEndpoints(key string) (ep *corev1.Endpoints, watched bool) {
	w := x.endpointsWatch
	if w == nil || w.failed.Load() || x.endpointsStripped(key) {
		return nil, false
	}
	o, ok, _ := w.store.GetByKey(key)
	if !ok {
		return nil, true
	}
	ep, _ = o.(*corev1.Endpoints)
	return ep.DeepCopy(), true
}

// endpointsStripped reports whether the Endpoints watch keeps only the name of key's Endpoints:
// its Service had a selector when the run read it (one that lost it since is read from the API).
func (x *executor) endpointsStripped(key string) bool {
	svc := x.services[key]
	return svc != nil && len(svc.Spec.Selector) > 0
}
