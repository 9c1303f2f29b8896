// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Waiting for a disabled pool to drain: one watch of the IPAM blocks and one of the pods, the
// allocations classified again on each change, instead of listing every block and every pod
// each few seconds (at 5,000 pods that is megabytes a poll).
package calico

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// drainSettle coalesces bursts of events: the allocations are classified again at most this often.
const drainSettle = 50 * time.Millisecond

// waitDrained waits until no live pod holds an address of pool and returns the allocations
// left then (leaked, tunnel, other); when ctx ends first, the allocations as last seen and the
// context's error. An error with ctx alive is one of the watches refused (e.g. RBAC).
func (a *CalicoAPI) waitDrained(ctx context.Context, c *k8sops.Client, pool netip.Prefix) (allocs []Allocation, drained bool, err error) {
	if a.IPAMGroup == "" {
		return nil, true, nil // no IPAM objects served: nothing can hold an address
	}
	// A refused watch would make the informers retry until the timeout: ask once first.
	for what, open := range map[string]func(context.Context, metav1.ListOptions) (watch.Interface, error){
		"IPAMBlocks": a.Blocks.Watch, "pods": c.Kube.CoreV1().Pods("").Watch} {
		w, err := open(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1), ResourceVersion: "0"})
		if err != nil {
			return nil, false, fmt.Errorf("watching %s to see the pool drain: %w", what, err)
		}
		w.Stop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}
	blockGVR := k8sops.MustGV(a.IPAMGroup).WithResource("ipamblocks")
	blocks := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, 0).ForResource(blockGVR).Informer()
	pods := informers.NewSharedInformerFactory(c.Kube, 0).Core().V1().Pods().Informer()
	// Only what classifying needs is kept of each pod.
	if err := pods.SetTransform(podIPsOnly); err != nil {
		return nil, false, err
	}
	for _, inf := range []cache.SharedIndexInformer{blocks, pods} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, false, err
		}
		go inf.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), blocks.HasSynced, pods.HasSynced) {
		return nil, false, fmt.Errorf("watching IPAM blocks and pods: %w", context.Cause(ctx))
	}
	for {
		allocs = AllocationsIn(pool, storedBlocks(blocks.GetStore()))
		allocs = Classify(allocs, ownersIPs(pods.GetStore(), allocs))
		if len(ByClass(allocs, AllocLivePod)) == 0 {
			return allocs, true, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return allocs, false, ctx.Err()
		}
		select { // let a burst of events land before classifying again
		case <-time.After(drainSettle):
		case <-ctx.Done():
			return allocs, false, ctx.Err()
		}
	}
}

// podIPsOnly strips a pod to what PodIPs reads: name, namespace, Calico's annotations, status IPs.
func podIPsOnly(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	out := &corev1.Pod{}
	out.Name, out.Namespace, out.ResourceVersion = p.Name, p.Namespace, p.ResourceVersion
	for _, k := range []string{AnnotationPodIPs, AnnotationPodIP} {
		if v, ok := p.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Status.PodIPs = p.Status.PodIPs
	return out, nil
}

func storedBlocks(s cache.Store) []Block {
	var out []Block
	for _, o := range s.List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			if b, ok := blockFrom(u); ok {
				out = append(out, b)
			}
		}
	}
	return out
}

// ownersIPs are the addresses of the pods allocs name, from the pod store.
func ownersIPs(s cache.Store, allocs []Allocation) PodIPs {
	out := PodIPs{}
	for _, al := range allocs {
		key := al.Namespace + "/" + al.Pod
		if _, seen := out[key]; seen || al.Pod == "" {
			continue
		}
		if o, exists, _ := s.GetByKey(key); exists {
			if p, ok := o.(*corev1.Pod); ok {
				out[key] = podIPs(p)
			}
		}
	}
	return out
}
