// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Hand-made Endpoints and owned EndpointSlices: what deleting a Service takes along, put back
// for the new Service without overwriting a newer copy.
package recreation

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// restoreDependents recreates what deleting the Service took along: its hand-made Endpoints
// (deleted by the endpoints controller) and the EndpointSlices it owned (rewritten to the new
// owner UID).
func (x *executor) restoreDependents(ctx context.Context, e JournalEntry, svc *corev1.Service) error {
	for _, s := range e.Slices {
		s := s.DeepCopy()
		clearServerFields(&s.ObjectMeta)
		for i := range s.OwnerReferences {
			if s.OwnerReferences[i].Kind == "Service" && s.OwnerReferences[i].Name == svc.Name {
				s.OwnerReferences[i].UID = svc.UID
			}
		}
		err := k8sops.RetryWrite(ctx, func(bool) error {
			_, err := x.c.Kube.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: x.c.FieldManager})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: restoring EndpointSlice %s: %w", e.Key, s.Name, err)
		}
	}
	if e.Endpoints == nil {
		return nil
	}
	ep, err := x.putEndpoints(ctx, e, svc.UID, true)
	if err != nil {
		return err
	}
	// The endpoints controller deletes a Service's Endpoints when its Service cache lacks the
	// Service; creating the new Service right after the delete usually closes that gap before
	// it looks. A sync that looked in the gap can still delete what we wrote. The mirroring
	// controller shares that cache: once it has mirrored the Endpoints, the new Service is in
	// it and no new such sync starts; check once more, and once more at the end of the run.
	// The watch usually holds what was just written by then; when it does not, the API is read.
	if e.Endpoints.Labels[discoveryv1.LabelSkipMirror] != "true" && endpointsAddresses(e.Endpoints) > 0 {
		x.waitSlice(ctx, e.Key, ep.UID, mirrorControllerName)
		if !x.endpointsHeld(e.Endpoints.Namespace+"/"+e.Endpoints.Name, ep.UID) {
			if _, err = x.putEndpoints(ctx, e, svc.UID, false); err != nil {
				return err
			}
		}
	}
	x.mu.Lock()
	x.restoredEndpoints = append(x.restoredEndpoints, restoredEndpoints{e, svc.UID, time.Now()})
	x.mu.Unlock()
	return nil
}

// endpointsQuiet is how long restored Endpoints must stay in place after being written.
const endpointsQuiet = 3 * time.Second

type restoredEndpoints struct {
	e   JournalEntry
	uid types.UID // of the new Service
	at  time.Time // last written
}

// settleEndpoints re-checks every restored Endpoints object once endpointsQuiet has passed
// since it was written, until none goes missing: a sync of the endpoints controller that
// looked at its cache while the Service was gone may delete them late (its client is
// rate-limited). Endpoints restored early in a run are quiet by its end, so only the last
// ones make the run wait.
func (x *executor) settleEndpoints(ctx context.Context) error {
	todo := x.restoredEndpoints
	for round := 0; len(todo) > 0; round++ {
		if round == 20 {
			return fmt.Errorf("restored Endpoints keep being deleted; the journal keeps them for the next apply")
		}
		slices.SortFunc(todo, func(a, b restoredEndpoints) int { return a.at.Compare(b.at) })
		var again []restoredEndpoints
		for _, r := range todo {
			select {
			case <-time.After(time.Until(r.at.Add(endpointsQuiet))):
			case <-ctx.Done():
				return fmt.Errorf("re-checking restored Endpoints: %w", ctx.Err())
			}
			var err error
			if !x.endpointsHeld(r.e.Endpoints.Namespace+"/"+r.e.Endpoints.Name, "") {
				_, err = x.c.Kube.CoreV1().Endpoints(r.e.Endpoints.Namespace).Get(ctx, r.e.Endpoints.Name, metav1.GetOptions{})
			}
			if apierrors.IsNotFound(err) {
				if _, err = x.putEndpoints(ctx, r.e, r.uid, true); err == nil {
					again = append(again, restoredEndpoints{r.e, r.uid, time.Now()})
				}
			}
			if err != nil {
				return err
			}
		}
		if len(again) > 0 {
			x.log("re-created Endpoints deleted late by the endpoints controller", map[string]any{"count": len(again)})
		}
		todo = again
	}
	return nil
}

// putEndpoints creates the journaled Endpoints of the Service uid, with their owner references
// to the Service rewritten to uid (the garbage collector would delete them for the old one),
// and gives their fields back to the managers that owned them.
// Endpoints that exist with other addresses, ports or labels were written by another client
// after the delete, and are newer than the journal: they are kept, and only owner references
// to the old Service are rewritten. With byWatch, Endpoints the run's watch does not hold are
// created without a read first.
func (x *executor) putEndpoints(ctx context.Context, e JournalEntry, uid types.UID, byWatch bool) (*corev1.Endpoints, error) {
	api := x.c.Kube.CoreV1().Endpoints(e.Endpoints.Namespace)
	want := e.Endpoints.DeepCopy()
	clearServerFields(&want.ObjectMeta)
	owners := func(refs []metav1.OwnerReference) []metav1.OwnerReference {
		refs = slices.Clone(refs)
		for i := range refs {
			if refs[i].Kind == "Service" && refs[i].APIVersion == "v1" && refs[i].Name == e.Service.Name {
				refs[i].UID = uid
			}
		}
		return refs
	}
	want.OwnerReferences = owners(want.OwnerReferences)
	var cur *corev1.Endpoints
	kept, created := false, false
	// Read, then write what differs; a write that raced another (or our own lost attempt) reads
	// again. None in the run's watch: create at once, and read only if they exist after all.
	key := e.Endpoints.Namespace + "/" + e.Endpoints.Name
	err := k8sops.RetryWrite(ctx, func(again bool) error {
		var err error
		if w, watched := x.watchedEndpoints(key); byWatch && !again && watched && w == nil {
			err = apierrors.NewNotFound(corev1.Resource("endpoints"), want.Name)
		} else {
			cur, err = api.Get(ctx, want.Name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			cur, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: endpointsCreator(e.Endpoints.ManagedFields, x.c.FieldManager)})
			created = err == nil
		case err != nil:
		case !endpointsEqual(cur, want):
			kept = true
			if refs := owners(cur.OwnerReferences); !equality.Semantic.DeepEqual(refs, cur.OwnerReferences) {
				next := cur.DeepCopy()
				next.OwnerReferences = refs
				cur, err = api.Update(ctx, next, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
			}
		case !equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences):
			next := cur.DeepCopy()
			next.OwnerReferences = want.OwnerReferences
			cur, err = api.Update(ctx, next, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
		}
		return err
	}, apierrors.IsAlreadyExists, apierrors.IsConflict)
	if err != nil {
		return nil, fmt.Errorf("%s: restoring its Endpoints: %w", e.Key, err)
	}
	if created {
		x.restoreEndpointsOwners(ctx, e.Key, cur, e.Endpoints.ManagedFields)
	}
	if kept {
		x.noteOnce("kept-endpoints "+e.Key, "%s: its Endpoints were written by another client after the delete and differ from the "+
			"journaled copy; they are kept as they are.", e.Key)
	}
	return cur, nil
}

// endpointsHeld reports whether the run's watch holds key's Endpoints (with uid, unless "");
// false when no watch runs, and the caller reads the API.
func (x *executor) endpointsHeld(key string, uid types.UID) bool {
	ep, watched := x.watchedEndpoints(key)
	return watched && ep != nil && (uid == "" || ep.UID == uid)
}

func endpointsEqual(a, b *corev1.Endpoints) bool {
	return equality.Semantic.DeepEqual(a.Subsets, b.Subsets) && equality.Semantic.DeepEqual(a.Labels, b.Labels)
}

func clearServerFields(m *metav1.ObjectMeta) {
	m.ResourceVersion, m.UID, m.Generation = "", "", 0
	m.CreationTimestamp = metav1.Time{}
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
	m.ManagedFields = nil
}
