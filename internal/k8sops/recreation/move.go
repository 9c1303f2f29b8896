// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Scheduling the moves: journaled in chunks ahead of their deletes, each Service by hand-over
// (handover.go) or by delete and create (recreate.go), at most Parallelism at once.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// journalChunk is how many moves one journal write records (one object, split further only
// past the ConfigMap size limit). It is written before the first of them is deleted and
// removed once all of them are verified.
const journalChunk = 50

// moveAll moves Services with at most Parallelism in flight, fewer while kube-controller-manager
// is slow to write their EndpointSlices (adaptiveLimit). Moves are journaled in chunks ahead of
// their deletes. After a failed move no new move starts; the ones in flight finish.
func (x *executor) moveAll(ctx context.Context, moves []Move) error {
	lim := newAdaptiveLimit(x.o.Parallelism, x.o.WindowTarget, x.c.QPS)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		kept    []string // journals kept because a move of theirs failed
		done    int
		started = time.Now()
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(errs) > 0
	}
	for start := 0; start < len(moves) && !failed(); start += journalChunk {
		chunk := moves[start:min(start+journalChunk, len(moves))]
		entries := make([]JournalEntry, 0, len(chunk))
		for _, m := range chunk {
			e := x.entry(m)
			if e.Endpoints != nil || len(e.Slices) > 0 {
				// Grown since the plan (which refuses it): left where it is, never deleted unjournaled.
				if size := entrySize(e); size > journalMaxBytes {
					x.notMoved(m.Key, tooLargeText(m.Key, size, endpointAddresses(ptr.Deref(e.Endpoints, corev1.Endpoints{}))))
					continue
				}
			}
			if why := x.reserveBridges(m.Key); why != "" {
				if x.first[m.Key] {
					fail(fmt.Errorf("%s, moved first: %s. The Services after it were not moved", m.Key, why))
					break
				}
				x.notMoved(m.Key, why)
				continue
			}
			entries = append(entries, e)
		}
		if failed() {
			break // a first move's bridge does not fit: nothing of this chunk was journaled
		}
		if len(entries) == 0 {
			continue
		}
		names, err := writeJournal(ctx, x.c, x.o.Journal, entries)
		if err != nil {
			fail(err) // nothing of this chunk was deleted
			break
		}
		var chunkWG sync.WaitGroup
		chunkErrs := make([]error, len(entries))
		// The Services that can be handed over move together, step by step (handOverAll);
		// the rest by delete and create, each on its own.
		handOvers, releaseQuota, err := x.handOvers(ctx, entries)
		if err != nil {
			fail(err)
			break
		}
		if len(handOvers) > 0 {
			chunkWG.Add(1)
			wg.Go(func() {
				defer chunkWG.Done()
				hs := slices.Collect(maps.Values(handOvers))
				x.handOverAll(ctx, hs, failed)
				for i, h := range handOvers {
					if h.err != nil {
						chunkErrs[i] = h.err // its journal entry stays
						if !errors.Is(h.err, errLeftMidway) {
							fail(h.err)
						}
					}
				}
			})
		}
		for i := range entries {
			if handOvers[i] != nil {
				continue
			}
			if failed() {
				break // the rest of the chunk stays untouched; the next plan drops its entries
			}
			if err := lim.acquire(ctx); err != nil {
				chunkErrs[i] = err
				fail(err)
				break
			}
			if failed() { // a move that ended while this one waited for its slot failed or stalled
				lim.cancel()
				break
			}
			chunkWG.Add(1)
			wg.Go(func() {
				defer chunkWG.Done()
				window, err := x.move(ctx, entries[i])
				if err != nil {
					chunkErrs[i] = err
					fail(err)
				}
				if err := x.stalled(); err != nil {
					fail(err) // the move itself is done: its journal entry goes with the chunk's
				}
				// Released only now: a move waiting for the slot must see the failure above.
				lim.release(window, err == nil)
			})
		}
		wg.Go(func() {
			chunkWG.Wait()
			releaseQuota()
			if errors.Join(chunkErrs...) != nil {
				// The journal stays for the failed moves; not for the Services another client
				// deleted or replaced meanwhile, which the next apply must not bring back. Done
				// also when the apply was interrupted, within the grace period.
				if drop := x.droppedOf(entries); len(drop) > 0 {
					dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
					if err := x.lease.Check(); err != nil {
						fail(err)
					} else if err := dropEntries(dctx, x.c, x.o.Journal.Namespace, names, drop); err != nil {
						fail(err)
					}
					cancel()
				}
				mu.Lock()
				kept = append(kept, names...)
				mu.Unlock()
				return
			}
			// Held until the run's end: restored Endpoints are settled then, and a hand-over's
			// bridge that is not kept is removed then (retireTransients). A run cut off before
			// leaves the entries, and the next plan restores those whose helpers are still there.
			if len(handOvers) > 0 || slices.ContainsFunc(entries, func(e JournalEntry) bool { return e.Endpoints != nil }) {
				x.mu.Lock()
				x.heldJournals = append(x.heldJournals, names...)
				x.mu.Unlock()
			} else if err := x.deleteJournal(ctx, names); err != nil {
				fail(err)
				return
			}
			mu.Lock()
			done += len(entries)
			n := done
			mu.Unlock()
			x.log("moved Services", map[string]any{"done": n, "total": len(moves), "in_flight_limit": lim.current(),
				"elapsed_ms": time.Since(started).Milliseconds()})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if errors.Is(err, errStalled) {
			errs[i] = x.stallReport() // now that the moves in flight have ended
		}
	}
	if ctx.Err() != nil {
		x.mu.Lock()
		late := slices.Sorted(slices.Values(x.finishedLate))
		cut := slices.Sorted(slices.Values(x.cutOff))
		x.mu.Unlock()
		finished := "no move was between its delete and its create"
		if len(late) > 0 {
			finished = fmt.Sprintf("the %d moves already past their delete were finished (%s)", len(late), strings.Join(late, ", "))
		}
		if len(cut) > 0 {
			slices.Sort(kept)
			finished += fmt.Sprintf("; %d moves past their delete were cut off when the %s grace period ran out (%s): "+
				"they are in the journal (ConfigMaps %s in %s), and the next apply restores them first",
				len(cut), interruptGrace, strings.Join(cut, ", "), strings.Join(kept, ", "), x.o.Journal)
		}
		err := fmt.Errorf("interrupted (%v): no new move was started, and %s. The next apply moves the rest",
			context.Cause(ctx), finished)
		if other := slices.DeleteFunc(slices.Clone(errs), func(e error) bool {
			return errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded)
		}); len(other) > 0 {
			err = fmt.Errorf("%w; failed: %w (what a failed move deleted is in the journal, ConfigMaps %s in %s, and the next "+
				"apply restores it)", err, errors.Join(other...), strings.Join(kept, ", "), x.o.Journal)
		}
		return err
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		if len(kept) == 0 {
			return err
		}
		slices.Sort(kept)
		return fmt.Errorf("%w. What was deleted is in the journal (ConfigMaps %s in %s): the next plan shows it "+
			"under restore and the next apply recreates it", err, strings.Join(kept, ", "), x.o.Journal)
	}
	return nil
}

// handOvers are the hand-overs among the moves of entries, by index; the rest move by delete
// and create, and why is logged. Admission is asked last, of those left.
//
// In a namespace with a services quota, room is what decides. Every move may hold one Service
// more than the quota's usage shows while it runs (a delete and create's create comes before
// the recount of its delete; a carrier before the Service is released), and a hand-over one
// more (its bridge). The run's moves in flight and the restores left to after the moves hold
// their room already (holdQuota): a hand-over takes only what is left after them, so that
// neither a move's create nor a restore finds the quota filled by the run's own helpers. As
// many as fit are handed over; the chunk's room is held until its moves are done (release).
func (x *executor) handOvers(ctx context.Context, entries []JournalEntry) (out map[int]*handOver, release func(), err error) {
	out = map[int]*handOver{}
	moves, wanted := map[string]int{}, map[string]int{}
	byDeleteAndCreate := func(key, why string) {
		x.log("moving by delete and create", map[string]any{"service": key, "why": why})
	}
	for i, e := range entries {
		moves[e.Service.Namespace]++
		svc := x.services[e.Key]
		if why := x.handOverBlocker(svc, e); why != "" {
			byDeleteAndCreate(e.Key, why)
			continue
		}
		out[i] = x.newHandOver(e, svc)
		wanted[svc.Namespace]++
	}
	// A move by delete and create that keeps a bridge holds one Service more (its bridge) until
	// the chunk's end, by when admission counts the bridge in the quota's usage; its escort one
	// more while it moves.
	bridged, escorts := map[string]int{}, map[int]*corev1.Service{}
	for i, e := range entries {
		if out[i] == nil {
			for _, b := range x.keptBridges(e.Key) {
				bridged[b.Namespace]++
			}
			if esc := x.escortOf(x.services[e.Key], e); esc != nil {
				escorts[i] = esc
				wanted[esc.Namespace]++
			}
		}
	}
	held, need := x.heldQuota(), map[string]int{}
	for ns, n := range bridged {
		held[ns] += n
	}
	for ns, n := range wanted {
		need[ns] = held[ns] + moves[ns] + n
	}
	short, err := ServiceQuotaShortfalls(ctx, x.c, need)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the ResourceQuotas of the Services to hand over: %w", err)
	}
	for _, q := range short {
		room := int(q.Free()) - held[q.Namespace] - moves[q.Namespace]
		for _, i := range slices.Sorted(maps.Keys(out)) {
			if entries[i].Service.Namespace != q.Namespace {
				continue
			}
			if room > 0 {
				room--
				continue
			}
			delete(out, i)
			byDeleteAndCreate(entries[i].Key, fmt.Sprintf("the ResourceQuota %s has no room for its carrier and bridge "+
				"beside the moves and restores of this apply in %s", q.Quota, q.Namespace))
		}
		for _, i := range slices.Sorted(maps.Keys(escorts)) {
			if entries[i].Service.Namespace != q.Namespace {
				continue
			}
			if room > 0 {
				room--
				continue
			}
			delete(escorts, i)
			x.log("moving without an escort", map[string]any{"service": entries[i].Key, "why": "the ResourceQuota " + q.Quota + " has no room for it"})
		}
	}
	for i, h := range out {
		why, err := x.handOverRefusal(ctx, h)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: asking whether it can be handed over: %w", h.e.Key, err)
		}
		if why != "" {
			delete(out, i)
			byDeleteAndCreate(h.e.Key, why)
		}
	}
	for i, esc := range escorts {
		why, err := x.helperRefusal(ctx, esc, ipStrings(k8sops.ClusterIPs(x.services[entries[i].Key])))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: asking whether its escort is admitted: %w", entries[i].Key, err)
		}
		if why != "" {
			delete(escorts, i)
			x.log("moving without an escort", map[string]any{"service": entries[i].Key, "why": why})
		}
	}
	hold := moves
	for _, h := range out {
		hold[h.svc.Namespace]++
	}
	x.mu.Lock()
	if x.escorts == nil {
		x.escorts = map[string]*corev1.Service{}
	}
	for i, esc := range escorts {
		hold[esc.Namespace]++
		x.escorts[entries[i].Key] = esc
	}
	x.mu.Unlock()
	for ns, n := range bridged {
		hold[ns] += n
	}
	x.holdQuota(hold, 1)
	return out, func() { x.holdQuota(hold, -1) }, nil
}

// holdQuota adds (sign 1) or gives back (-1) room held in namespaces' services quotas.
func (x *executor) holdQuota(n map[string]int, sign int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.quotaHeld == nil {
		x.quotaHeld = map[string]int{}
	}
	for ns, k := range n {
		x.quotaHeld[ns] += sign * k
	}
}

// heldQuota is the room held now, by namespace.
func (x *executor) heldQuota() map[string]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.quotaHeld)
}

// entry is the journal entry for a move: the object to create and what its deletion takes along.
func (x *executor) entry(m Move) JournalEntry {
	svc := x.services[m.Key]
	e := JournalEntry{Key: m.Key, OldIPs: m.OldIPs, Service: *movedCopy(svc, m.NewIPs), Owners: svc.ManagedFields, Written: time.Now().UTC()}
	if b := x.oldIPBridges[m.Key]; b != nil {
		e.Bridge = b.DeepCopy()
	}
	if ep, ok := x.endpoints[m.Key]; ok {
		e.Endpoints = &ep
	}
	e.Slices = ownedSlices(x.watchedSlices(m.Key), svc.UID)
	return e
}

// ownedSlices are the hand-made EndpointSlices among list that the Service uid owns (the
// garbage collector deletes them with it); the controllers' own are written again.
func ownedSlices(list []discoveryv1.EndpointSlice, uid types.UID) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, s := range list {
		if ownedBy(s.OwnerReferences, uid) && s.Labels[discoveryv1.LabelManagedBy] != sliceControllerName && s.Labels[discoveryv1.LabelManagedBy] != mirrorControllerName {
			out = append(out, s)
		}
	}
	return out
}

// refreshDependents reads again, right before the delete, what the delete takes along: the
// hand-made Endpoints of a selector-less Service and its owned EndpointSlices (from
// the watches). The Service's resourceVersion does not cover them, and a long apply journaled
// them minutes ago; a copy another client changed since is journaled again, so that the
// restore writes what was there at the delete.
func (x *executor) refreshDependents(ctx context.Context, svc *corev1.Service, e JournalEntry) (JournalEntry, error) {
	next := e
	if len(svc.Spec.Selector) == 0 {
		// Read from the API, not the run's watch: this is the last look before the delete, and
		// a change the watch has yet to deliver would be lost with the Endpoints the endpoints
		// controller deletes with the Service (a journaled copy restored in their place). One
		// request per selector-less Service, the few whose Endpoints are hand-made.
		start := time.Now() // client-go retries a failed read itself (retryHints)
		ep, err := x.c.Kube.CoreV1().Endpoints(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			next.Endpoints = nil
		case err != nil:
			return e, fmt.Errorf("%s: reading its Endpoints: %w (gave up after %s of retries)", e.Key, err, time.Since(start).Round(time.Second))
		default:
			next.Endpoints = ep // managedFields included: their owners get their fields back (restoreEndpointsOwners)
		}
	}
	next.Slices = ownedSlices(x.watchedSlices(e.Key), svc.UID)
	version := func(e JournalEntry) []string {
		var v []string
		if e.Endpoints != nil {
			v = append(v, "endpoints "+e.Endpoints.ResourceVersion)
		}
		for _, s := range e.Slices {
			v = append(v, s.Name+" "+s.ResourceVersion)
		}
		slices.Sort(v)
		return v
	}
	if slices.Equal(version(e), version(next)) {
		return e, nil
	}
	return next, x.rejournal(ctx, next, "re-journaled the Endpoints or EndpointSlices of a Service changed during the apply")
}

// rejournal writes next, a newer copy of a journaled entry, to a journal object of its own; of
// two entries for one Service the newer is restored.
func (x *executor) rejournal(ctx context.Context, next JournalEntry, why string) error {
	next.Written = time.Now().UTC()
	names, err := writeJournal(ctx, x.c, x.o.Journal, []JournalEntry{next})
	if err != nil {
		return fmt.Errorf("%s: journaling its copy changed during the apply: %w", next.Key, err)
	}
	x.mu.Lock()
	x.heldJournals = append(x.heldJournals, names...) // removed with the rest once the run is done
	x.mu.Unlock()
	x.log(why, map[string]any{"service": next.Key})
	return nil
}

const (
	sliceControllerName  = "endpointslice-controller.k8s.io"
	mirrorControllerName = "endpointslicemirroring-controller.k8s.io"
)
