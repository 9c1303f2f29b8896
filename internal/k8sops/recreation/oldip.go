// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Old-IP bridges during a run: created the moment a move frees its IPs, serving at once from
// copies of the Service's endpoints, kept in step for selector-less Services, and removed when
// the plan says so.
package recreation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// oldIPBridgeRun is the old-IP bridge of one move, created beside the new Service.
type oldIPBridgeRun struct {
	svc    *corev1.Service
	copies []string // EndpointSlice copies serving it until a controller writes its own (not adopted ones)
	err    error
}

// startOldIPBridge creates e's old-IP bridge in the background, while the move creates the new
// Service; wait returns it. from are the Service's ready EndpointSlices before the delete.
func (x *executor) startOldIPBridge(ctx context.Context, e JournalEntry, from []discoveryv1.EndpointSlice) (wait func() oldIPBridgeRun) {
	if e.Bridge == nil {
		return func() oldIPBridgeRun { return oldIPBridgeRun{} }
	}
	done := make(chan oldIPBridgeRun, 1)
	go func() { done <- x.ensureOldIPBridge(ctx, e, from) }()
	return func() oldIPBridgeRun { return <-done }
}

// ensureOldIPBridge creates e's old-IP bridge (or finds it) and makes it serve at once: copies
// of from, and for a selector-less Service a copy of its hand-made Endpoints, which the
// mirroring controller then serves.
func (x *executor) ensureOldIPBridge(ctx context.Context, e JournalEntry, from []discoveryv1.EndpointSlice) oldIPBridgeRun {
	b := e.Bridge
	created, found, err := x.createOnFreedIPs(ctx, b)
	if err == nil && created.Labels[k8sops.OldIPBridgeLabel] != "true" {
		err = fmt.Errorf("the name %s/%s is taken by a Service that is not its bridge", b.Namespace, b.Name)
	}
	if err != nil {
		return oldIPBridgeRun{err: fmt.Errorf("%s moved, but its old-IP bridge on %v was not created: %w. Clients that cached "+
			"the old IP cannot reach it: run terraform apply again (the journal keeps the move until the bridge exists)",
			e.Key, b.Spec.ClusterIPs, err)}
	}
	run := oldIPBridgeRun{svc: created}
	if e.Endpoints != nil && len(e.Service.Spec.Selector) == 0 {
		if err := x.putBridgeEndpoints(ctx, e.Endpoints, created.Name); err != nil {
			run.err = fmt.Errorf("%s: its old-IP bridge %s/%s exists, but copying its Endpoints to it failed: %w", e.Key, b.Namespace, b.Name, err)
			return run
		}
	}
	// A bridge an interrupted apply made is served already, unless it was cut off before the
	// copies and no controller has written a slice since.
	served := found && len(x.currentSlices(k8sops.SvcKey(created))) > 0
	from = slices.DeleteFunc(slices.Clone(from), func(s discoveryv1.EndpointSlice) bool {
		return served || !slices.Contains(created.Spec.IPFamilies, corev1.IPFamily(s.AddressType))
	})
	if run.copies, err = x.copySlices(ctx, from, created); err != nil {
		x.note("%s: the old-IP bridge %s/%s was created, but copying the endpoints to it failed (%v): it answers once "+
			"kube-controller-manager writes its EndpointSlice.", e.Key, b.Namespace, b.Name, err)
	}
	x.mu.Lock()
	x.res.OldIPBridgesCreated = append(x.res.OldIPBridgesCreated, OldIPBridge{Name: created.Name, For: e.Key,
		IPs: created.Spec.ClusterIPs, Created: created.CreationTimestamp.UTC()})
	x.mu.Unlock()
	return run
}

// putBridgeEndpoints makes the bridge's Endpoints a copy of ep (the Service's hand-made ones).
func (x *executor) putBridgeEndpoints(ctx context.Context, ep *corev1.Endpoints, bridge string) error {
	api := x.c.Kube.CoreV1().Endpoints(ep.Namespace)
	want := bridgeEndpoints(ep, bridge)
	return k8sops.RetryWrite(ctx, func(again bool) error {
		// As the run's watch holds them, if it does, unless an attempt failed: a create of
		// Endpoints that exist, or an update of a stale copy, fails and reads the API again.
		cur, watched := x.watchedEndpoints(ep.Namespace + "/" + bridge)
		var err error
		switch {
		case !watched || again:
			cur, err = api.Get(ctx, bridge, metav1.GetOptions{})
		case cur == nil:
			err = apierrors.NewNotFound(corev1.Resource("endpoints"), bridge)
		}
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: x.c.FieldManager})
		case err == nil && !bridgeEndpointsEqual(cur, want):
			next := cur.DeepCopy()
			next.Subsets, next.Labels = want.Subsets, want.Labels
			_, err = api.Update(ctx, next, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
		}
		return err
	}, apierrors.IsAlreadyExists, apierrors.IsConflict)
}

// waitOldIPBridge waits until kube-controller-manager serves the bridge with its own
// EndpointSlice, and then deletes the copies it did not adopt. The copies of its own slices it
// adopts (sliceCopy): a bridge costs it no write, and the run waits only for the rest, copies
// of slices another client made for the Service.
func (x *executor) waitOldIPBridge(ctx context.Context, run oldIPBridgeRun) {
	if run.svc == nil || len(run.svc.Spec.Selector) == 0 || len(run.copies) == 0 {
		return
	}
	if x.waitSlice(ctx, k8sops.SvcKey(run.svc), run.svc.UID, sliceControllerName) {
		x.deleteSlices(ctx, run.svc.Namespace, run.copies)
	}
}

// bridgeEndpointsEqual reports whether a bridge's Endpoints are as want, labels included: a
// bridge an earlier version made carries its Service's labels, which pruning tools act on.
func bridgeEndpointsEqual(have, want *corev1.Endpoints) bool {
	return equality.Semantic.DeepEqual(have.Subsets, want.Subsets) && maps.Equal(have.Labels, want.Labels)
}

// syncBridgeEndpoints keeps the Endpoints of this journal group's old-IP bridges of
// selector-less Services equal to their Services' hand-made Endpoints, as read at the start of
// the run: an address added to the Service since the bridge was made reaches its old IP too.
func (x *executor) syncBridgeEndpoints(ctx context.Context, snap Snapshot) {
	for _, b := range OldIPBridgesIn(snap.Services, x.o.Journal.group()) {
		want, ok := snap.Endpoints[b.For]
		if !ok {
			continue // the Service has a selector, or is gone
		}
		if have, ok := snap.Endpoints[b.Key()]; ok && bridgeEndpointsEqual(&have, bridgeEndpoints(&want, b.Name)) {
			continue
		}
		if err := x.putBridgeEndpoints(ctx, &want, b.Name); err != nil {
			x.note("The Endpoints of the old-IP bridge %s could not be brought in step with %s's (%v): the next apply tries again.", b.Key(), b.For, err)
			continue
		}
		x.log("brought an old-IP bridge's Endpoints in step", map[string]any{"bridge": b.Key(), "service": b.For})
	}
}

// removeServices deletes the bridges (namespace/name) the plan removes, what says which kind, and
// returns those gone. The Endpoints copied to the bridges of selector-less Services go with
// them: the endpoints controller deletes a deleted Service's Endpoints.
func (x *executor) removeServices(ctx context.Context, keys []string, what string) ([]string, error) {
	var gone []string
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		err := k8sops.RetryWrite(ctx, func(bool) error {
			return x.c.Kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return gone, fmt.Errorf("removing %s %s: %w", what, key, err)
		}
		gone = append(gone, key)
	}
	if len(keys) > 0 {
		x.log("removed bridges", map[string]any{"kind": what, "count": len(keys)})
	}
	return gone, nil
}

// bridgeMissing reports whether the old-IP bridge a journal entry's move creates is due and
// not there.
func bridgeMissing(e JournalEntry, byKey map[string]*corev1.Service) bool {
	return bridgeDue(e, byKey[e.Key]) && byKey[e.Bridge.Namespace+"/"+e.Bridge.Name] == nil
}

// bridgeDue reports whether a journal entry's move has freed the IPs of its old-IP bridge: its
// Service svc is gone, or holds none of them. A Service an interrupted apply did not reach yet
// still holds them, and its bridge comes with its move.
func bridgeDue(e JournalEntry, svc *corev1.Service) bool {
	if e.Bridge == nil {
		return false
	}
	return svc == nil || !slices.ContainsFunc(e.Bridge.Spec.ClusterIPs, func(ip string) bool { return slices.Contains(svc.Spec.ClusterIPs, ip) })
}
