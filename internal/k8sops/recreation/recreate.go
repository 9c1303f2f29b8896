// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The delete and create: how a Service the hand-over cannot take (handOverBlocker) moves, read
// top to bottom in move, one small method of recreating per step (the hand-over's steps are in
// handover.go; which Service goes which way, and how many at once, in moveAll):
//
//	guard    the Service still holds its move, and admission takes its copy: asked before the
//	         delete, never after it (when not: not moved, and reported)
//	escort   E serves its old and new IPs, and times the delete (escort.go)
//	keep     the endpoints the new Service, the DNS bridge or an old-IP bridge are served by
//	         until their own EndpointSlices exist
//	delete   with the journaled UID and resourceVersion as preconditions (a change made since is
//	         journaled first); from here the move finishes even when the apply is interrupted,
//	         within interruptGrace
//	gone     the delete finished (a Service with finalizers)
//	create   the DNS bridge or an old-IP bridge takes the freed IPs; the copy takes the new ones
//	restore  its EndpointSlices, Endpoints and owners, as the journal holds them
//	verify   the EndpointSlice controller serves the new Service, and an old-IP bridge
//	dismiss  E goes a sync after the create (escort.go)
//
// A move cut off after its delete leaves its journal entry, and the next apply creates the
// Service from it.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// recreating is one Service's move by delete and create, as far as its steps have gone.
type recreating struct {
	x   *executor
	e   JournalEntry    // its journal entry, as last journaled
	old *corev1.Service // the Service as it was acted on
	esc *escorted       // its escort, nil without one
	// served: a ready endpoint before the delete, so the new Service must get one too.
	served bool
	// The endpoints kept for the DNS bridge, an old-IP bridge and a selector-less Service.
	dnsSlices, bridgeSlices, mirrored []discoveryv1.EndpointSlice
	created                           *corev1.Service
	deleted, createdAt                time.Time
	bridge                            oldIPBridgeRun // the old-IP bridge made at the create
}

// move recreates one journaled Service by the steps above. It returns the window from the
// delete to the verification.
func (x *executor) move(ctx context.Context, e JournalEntry) (_ time.Duration, err error) {
	r := &recreating{x: x, e: e, old: x.services[e.Key]}
	if x.o.HoldBeforeDelete != nil {
		x.o.HoldBeforeDelete(ctx, e.Key)
	}
	if moves, err := r.guard(ctx); !moves || err != nil {
		return 0, err
	}
	if x.o.HoldAfterAdmission != nil {
		x.o.HoldAfterAdmission(ctx, e.Key)
	}
	r.esc = x.escort(ctx, r.e)
	r.keep()
	if ctx.Err() != nil { // left before the delete: the escort goes at once
		gctx, done := afterCancel(ctx, interruptGrace)
		defer done()
		x.dismiss(gctx, e.Key, r.esc, time.Time{})
		return 0, context.Cause(ctx)
	}
	fctx, finished := afterCancel(ctx, interruptGrace)
	defer finished()
	defer func() { x.dismiss(fctx, e.Key, r.esc, r.createdAt) }() // at once when nothing was created
	if deleted, err := r.delete(fctx); !deleted || err != nil {
		return 0, err
	}
	defer func() {
		if err != nil && ctx.Err() != nil { // the grace period ran out between the delete and the end
			x.mu.Lock()
			x.cutOff = append(x.cutOff, e.Key)
			x.mu.Unlock()
		}
	}()
	if x.o.HoldAfterDelete != nil {
		x.o.HoldAfterDelete(ctx, e.Key)
	}
	if err := r.gone(fctx); err != nil {
		return 0, err
	}
	if err := r.create(fctx); err != nil {
		return 0, err
	}
	if err := r.restore(fctx); err != nil {
		return 0, err
	}
	r.record(ctx)
	r.verify(ctx)
	// A bridge not made fails the move: its journal entry stays, and the next apply makes it.
	return time.Since(r.deleted), r.bridge.err
}

// guard says whether the move still goes ahead: its Endpoints and slices journaled as they
// are now, and admission taking the copy. A Service moved first that admission refuses fails
// the run; any other is reported as not moved.
func (r *recreating) guard(ctx context.Context) (bool, error) {
	x := r.x
	var err error
	if r.e, err = x.refreshDependents(ctx, r.old, r.e); err != nil {
		return false, err
	}
	switch reason, err := x.admitted(ctx, r.old, r.e); {
	case err != nil:
		return false, fmt.Errorf("%s: %w", r.e.Key, err)
	case reason != "" && x.first[r.e.Key]:
		return false, fmt.Errorf("%s, moved first: %s. The Services after it were not moved", r.e.Key, reason)
	case reason != "":
		x.notMoved(r.e.Key, reason)
		return false, nil
	}
	return true, nil
}

// keep notes the endpoints served before the delete that the steps after it need.
func (r *recreating) keep() {
	x, key := r.x, r.e.Key
	r.served = len(x.currentSlices(key)) > 0
	if key == x.dnsKey && x.bridge != nil {
		r.dnsSlices = x.currentSlices(key) // the endpoints the bridge serves until its own slice exists
	}
	if r.e.Bridge != nil {
		r.bridgeSlices = x.currentSlices(key) // the same for an old-IP bridge
	}
	if r.e.Endpoints != nil && len(r.old.Spec.Selector) == 0 {
		// Served by the new Service until they are mirrored again.
		r.mirrored = slices.DeleteFunc(x.currentSlices(key), func(s discoveryv1.EndpointSlice) bool {
			return s.Labels[discoveryv1.LabelManagedBy] != mirrorControllerName
		})
	}
}

// delete deletes the Service as journaled (deleteCurrent). It says whether it did: a Service
// another client deleted, replaced or changed so that its move no longer holds is reported as
// not moved.
func (r *recreating) delete(ctx context.Context) (bool, error) {
	x := r.x
	var err error
	r.old, r.e, err = x.deleteCurrent(ctx, r.old, r.e)
	var changed changedAway
	switch {
	case errors.As(err, &changed):
		x.notMoved(r.e.Key, changed.reason)
		return false, nil
	case apierrors.IsNotFound(err):
		x.notMoved(r.e.Key, "deleted by another client during the apply")
		return false, nil
	case apierrors.IsConflict(err):
		x.notMoved(r.e.Key, "replaced by another client during the apply (its UID changed); left as it is")
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: deleting: %w", r.e.Key, err)
	}
	r.deleted = time.Now()
	return true, nil
}

// gone waits until the delete has finished: without finalizers a successful delete has
// removed the object; with them, it is watched.
func (r *recreating) gone(ctx context.Context) error {
	if len(r.old.Finalizers) == 0 {
		return nil
	}
	api := r.x.c.Kube.CoreV1().Services(r.old.Namespace)
	if err := waitDeleted(ctx, objectWatch(api.List, api.Watch, r.old.Name), &corev1.Service{}, r.old.UID); err != nil {
		return fmt.Errorf("%s: waiting for the deletion to finish (finalizers %v): %w", r.e.Key, r.old.Finalizers, err)
	}
	return nil
}

// create has the freed IPs taken: kube-dns's old IP, which every pod's resolv.conf names, by
// the DNS bridge first; other old IPs by an old-IP bridge while the Service is created again
// on its new IPs.
func (r *recreating) create(ctx context.Context) error {
	x, e := r.x, r.e
	var bridgeErr error
	if e.Key == x.dnsKey && x.bridge != nil {
		bridgeErr = x.ensureBridge(ctx, r.dnsSlices)
	}
	oldIPBridge := x.startOldIPBridge(ctx, e, r.bridgeSlices)
	created, err := x.createTakingOver(ctx, recreationCopy(&e.Service, e.Service.Spec.ClusterIPs), e.Key, creator(e.Owners, x.c.FieldManager))
	r.createdAt = time.Now()
	r.bridge = oldIPBridge()
	if err != nil {
		return errors.Join(bridgeErr, r.bridge.err, err)
	}
	r.created = created
	return bridgeErr
}

// restore gives the new Service what the delete took along: its EndpointSlices, Endpoints and
// owners.
func (r *recreating) restore(ctx context.Context) error {
	x, e, created := r.x, r.e, r.created
	// The garbage collector would delete the old Service's slices some time after it, maybe
	// after their restored copies (same names) were refused as existing: gone now, they are
	// restored for the new Service. Only once the Service is deleted (a move that no longer
	// holds keeps them), and after the create: the name is unanswered from the delete to the
	// create, which nothing else delays.
	for _, s := range e.Slices {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			return x.c.Kube.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: deleting its EndpointSlice %s: %w", e.Key, s.Name, err)
		}
	}
	copies, err := x.copySlices(ctx, r.mirrored, created)
	if err != nil {
		x.note("%s: copying its EndpointSlices for the new Service failed (%v); it is served once they are mirrored again.", e.Key, err)
	}
	if err := x.restoreDependents(ctx, e, created); err != nil {
		return err
	}
	x.restoreOwners(ctx, created, e.Owners)
	// restoreDependents waited for the mirrored slices; without them the copies stay until the
	// sweep at the end of the run.
	if len(copies) > 0 && slices.ContainsFunc(x.currentSlices(e.Key), func(s discoveryv1.EndpointSlice) bool {
		return s.Labels[discoveryv1.LabelManagedBy] == mirrorControllerName
	}) {
		x.deleteSlices(ctx, created.Namespace, copies)
	}
	return nil
}

// record adds the move to the run's result.
func (r *recreating) record(ctx context.Context) {
	x, e, created := r.x, r.e, r.created
	x.mu.Lock()
	defer x.mu.Unlock()
	x.res.Recreated = append(x.res.Recreated, Move{Key: e.Key, UID: string(created.UID), Type: serviceType(created), OldIPs: e.OldIPs, NewIPs: created.Spec.ClusterIPs})
	if e.Key == x.dnsKey {
		x.res.DNSMovedAt = created.CreationTimestamp.UTC()
	}
	if ctx.Err() != nil {
		x.finishedLate = append(x.finishedLate, e.Key)
	}
}

// verify waits, for a Service with a selector that was served before the delete, until the
// EndpointSlice controller serves the new one, and then for an old-IP bridge's own slice.
func (r *recreating) verify(ctx context.Context) {
	x := r.x
	if len(r.old.Spec.Selector) == 0 || !r.served {
		return
	}
	came := x.waitSlice(ctx, r.e.Key, r.created.UID, sliceControllerName)
	if ctx.Err() == nil {
		x.sliceOutcome(r.e.Key, r.created.UID, came)
	}
	x.waitOldIPBridge(ctx, r.bridge)
}

// changedAway is a Service another client changed mid-apply so that its move no longer holds.
type changedAway struct{ reason string }

func (c changedAway) Error() string { return c.reason }

// deleteCurrent deletes the Service as it is journaled: with its resourceVersion as a
// precondition, so that a change another client made since (a label, an annotation, a port)
// is not lost (actOnCurrent).
func (x *executor) deleteCurrent(ctx context.Context, old *corev1.Service, e JournalEntry) (*corev1.Service, JournalEntry, error) {
	api := x.c.Kube.CoreV1().Services(old.Namespace)
	return x.actOnCurrent(ctx, old, e, func(old *corev1.Service) error {
		rv, uid := old.ResourceVersion, old.UID
		pre := metav1.Preconditions{UID: &uid}
		if rv != "" {
			pre.ResourceVersion = &rv
		}
		return k8sops.RetryWrite(ctx, func(again bool) error {
			err := api.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &pre})
			if again && apierrors.IsNotFound(err) {
				return nil // the earlier attempt deleted it
			}
			return err
		})
	})
}

// actOnCurrent does act (a delete, or an update from the object it is given) to the Service as
// it is journaled, act failing with a conflict when the Service changed since. On a conflict it
// reads the Service again, journals that copy, and tries again; the Service and journal entry
// returned are the ones acted on.
func (x *executor) actOnCurrent(ctx context.Context, old *corev1.Service, e JournalEntry, act func(*corev1.Service) error) (*corev1.Service, JournalEntry, error) {
	api := x.c.Kube.CoreV1().Services(old.Namespace)
	uid := old.UID
	for attempt := 0; ; attempt++ {
		// The delete or release of a Service whose journal entry another apply may have settled
		// once it took the lease over is never sent.
		if err := x.lease.Check(); err != nil {
			return old, e, fmt.Errorf("%s: %w", e.Key, err)
		}
		err := act(old)
		if !apierrors.IsConflict(err) {
			return old, e, err
		}
		fresh, getErr := api.Get(ctx, old.Name, metav1.GetOptions{})
		switch {
		case getErr != nil:
			return old, e, getErr
		case fresh.UID != uid:
			return old, e, err // replaced: reported as such
		case attempt >= 5:
			return old, e, fmt.Errorf("%s: changed by another client on every attempt to move it; left as it is: %w", e.Key, err)
		}
		m := Move{Key: e.Key, UID: string(uid), Type: serviceType(old), OldIPs: e.OldIPs, NewIPs: e.Service.Spec.ClusterIPs}
		if reason := moveHolds(fresh, m, x.targets, nil); reason != "" {
			return old, e, changedAway{reason + " (changed by another client during the apply); left as it is"}
		}
		next := e
		next.Owners = formerOwners(fresh.ManagedFields)
		next.Service = *movedCopy(fresh, e.Service.Spec.ClusterIPs)
		// The change may be one admission refuses the copy for (a label a policy needs removed):
		// asked again, before the act, as for the copy first journaled.
		switch reason, err := x.admitted(ctx, fresh, next); {
		case err != nil:
			return old, e, fmt.Errorf("%s: %w", e.Key, err)
		case reason != "":
			return old, e, changedAway{reason + " (after another client changed it during the apply); left as it is"}
		}
		if err := x.rejournal(ctx, next, "re-journaled a Service changed during the apply"); err != nil {
			return old, e, err
		}
		// Its Endpoints or owned slices may have changed with it (journaled again if so).
		next, err = x.refreshDependents(ctx, fresh, next)
		if err != nil {
			return old, e, err
		}
		old, e = fresh, next
	}
}
