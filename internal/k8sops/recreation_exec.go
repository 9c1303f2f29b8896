// Executing a Service recreation plan: journal, delete, create, verify — in bounded batches,
// paced by the EndpointSlices kube-controller-manager writes for the new Services.
package k8sops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// ExecOptions shape how a plan is carried out.
type ExecOptions struct {
	Parallelism int
	// Journal is where moves are journaled and which journal is settled: the resource's own.
	Journal Journal
	// SliceWait bounds the wait for a moved Service's EndpointSlice; past it the move is
	// reported, not failed (the Service exists with its IPs). Default 2 minutes.
	SliceWait time.Duration
	// Log receives one line per batch; nil discards.
	Log func(msg string, fields map[string]any)
	// WindowTarget is the unavailability per Service the run steers its concurrency to;
	// default DefaultWindowTarget. Parallelism stays the upper bound.
	WindowTarget time.Duration
	// DelayAfterDelete is fault injection for crash tests: it holds every move between delete
	// and create, so a kill lands while Services are gone. DelayBeforeDelete holds every move
	// between its journal write and its delete, so a test can change the Service meanwhile.
	DelayAfterDelete  time.Duration
	DelayBeforeDelete time.Duration
}

// RecreationResult is what an apply did.
type RecreationResult struct {
	Recreated     []Move
	Restored      []string
	BridgeCreated string
	BridgeRemoved string
	// DNSMovedAt is when the DNS Service was recreated at its new IPs; zero when it was not.
	DNSMovedAt time.Time
	// Notes are things the user should know: a verification that timed out, an IP that had
	// to change because another client took the planned one mid-apply.
	Notes []string
	// NotMoved are the moves that stopped holding during the apply (another client deleted,
	// replaced or changed the Service), with the reason. Their journal entries are dropped.
	NotMoved map[string]string
}

// ExecuteRecreation carries out the steps PrepareRecreation made from snap.
func ExecuteRecreation(ctx context.Context, c *Client, snap Snapshot, plan RecreationSteps, o ExecOptions) (_ RecreationResult, err error) {
	if o.Parallelism < 1 {
		o.Parallelism = DefaultParallelism
	}
	if o.SliceWait == 0 {
		o.SliceWait = 2 * time.Minute
	}
	x := &executor{c: c, o: o, services: map[string]*corev1.Service{}, slices: map[string][]discoveryv1.EndpointSlice{},
		endpoints: snap.Endpoints, bridge: plan.Bridge, dnsKey: plan.DNSService, targets: plan.Targets, planned: map[netip.Addr]bool{}}
	for _, m := range plan.Moves {
		for _, ip := range parseAddrs(m.NewIPs) {
			x.planned[ip] = true
		}
	}
	for _, r := range plan.Restore {
		for _, ip := range parseAddrs(r.NewIPs) {
			x.planned[ip] = true
		}
	}
	for i := range snap.Services {
		x.services[svcKey(&snap.Services[i])] = &snap.Services[i]
	}
	for _, s := range snap.Slices {
		key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		x.slices[key] = append(x.slices[key], s)
	}
	defer func() {
		if err != nil {
			x.dropNotMoved(ctx)
			if ctx.Err() == nil {
				x.sweepCopies(ctx, 0) // what is stale already; a failed run does not wait
			}
		}
	}()
	if len(plan.Moves) > 0 || len(plan.Restore) > 0 {
		stop, err := x.watchSlices(ctx)
		if err != nil {
			return x.res, err
		}
		defer stop()
	}
	if err := x.settleJournal(ctx, snap.Journal, plan.Restore, plan.Settled); err != nil {
		return x.res, err
	}
	// The first Services are moved and verified before the rest; the DNS bridge follows kube-dns.
	for _, part := range [][]Move{plan.Moves[:plan.First], plan.Moves[plan.First:]} {
		if err := x.moveAll(ctx, part); err != nil {
			return x.res, err
		}
	}
	if err := x.settleEndpoints(ctx); err != nil {
		return x.res, err
	}
	x.retireBridgeMirror(ctx)
	x.sweepCopies(ctx, sweepWait) // this run's and any an earlier, failed or killed, run left
	if err := deleteJournal(ctx, c, o.Journal.Namespace, x.heldJournals); err != nil {
		return x.res, err
	}
	if plan.RemoveBridge != "" {
		ns, name, _ := strings.Cut(plan.RemoveBridge, "/")
		err := retryWrite(ctx, func(bool) error {
			return c.Kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return x.res, fmt.Errorf("removing the DNS bridge %s: %w", plan.RemoveBridge, err)
		}
		x.res.BridgeRemoved = plan.RemoveBridge
	}
	return x.res, nil
}

type executor struct {
	c         *Client
	o         ExecOptions
	services  map[string]*corev1.Service
	slices    map[string][]discoveryv1.EndpointSlice
	endpoints map[string]corev1.Endpoints
	dnsKey    string // the cluster DNS Service, whose move brings the bridge
	// targets and planned bound the replacement of a planned IP another client took mid-apply:
	// inside the target, and never another Service's planned IP.
	targets []netip.Prefix
	planned map[netip.Addr]bool

	sliceIndex cache.Indexer
	changed    *broadcast

	// restoredEndpoints are re-checked once quiet; heldJournals hold them until then.
	restoredEndpoints []restoredEndpoints
	heldJournals      []string

	// bridge is the DNS bridge to create the moment kube-dns's old IP is free; bridgeMirror is
	// the EndpointSlice that gives it kube-dns's endpoints until the controller writes its own.
	bridge       *corev1.Service
	bridgeUID    types.UID
	bridgeMirror []string

	// finishedLate are the moves finished after the apply was interrupted (afterCancel), cutOff
	// those past their delete that the grace period did not let finish.
	finishedLate, cutOff []string
	noted        map[string]bool // noteOnce
	// dropped are the keys whose journal entries must not be restored (notMoved).
	dropped map[string]bool
	// noSlice are the moves whose EndpointSlice never came, noSliceInRow how many of the latest
	// in a row (stalled).
	noSlice       []movedService
	noSliceInRow  int
	stallReported bool

	mu  sync.Mutex
	res RecreationResult
}

func (x *executor) note(format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.res.Notes = append(x.res.Notes, fmt.Sprintf(format, args...))
}

// noteOnce notes once per id.
func (x *executor) noteOnce(id, format string, args ...any) {
	x.mu.Lock()
	if x.noted[id] {
		x.mu.Unlock()
		return
	}
	if x.noted == nil {
		x.noted = map[string]bool{}
	}
	x.noted[id] = true
	x.mu.Unlock()
	x.note(format, args...)
}

// notMoved records a move another client made impossible during the apply; its journal entry
// is dropped, so that no later apply brings back what that client deleted.
func (x *executor) notMoved(key, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.res.NotMoved == nil {
		x.res.NotMoved = map[string]string{}
	}
	x.res.NotMoved[key] = reason
	if x.dropped == nil {
		x.dropped = map[string]bool{}
	}
	x.dropped[key] = true
}

// dropNotMoved removes, from the journals a failed run keeps, the entries of the Services
// another client deleted or replaced during it, so that the next apply does not bring them
// back. Chunks whose own moves failed were handled by moveAll; this covers the journals held
// for endpoints and the re-journaled copies. Done also when the apply was interrupted.
func (x *executor) dropNotMoved(ctx context.Context) {
	x.mu.Lock()
	drop, held := maps.Clone(x.dropped), slices.Clone(x.heldJournals)
	x.mu.Unlock()
	if len(drop) == 0 || len(held) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
	defer cancel()
	if err := dropEntries(dctx, x.c, x.o.Journal.Namespace, held, drop); err != nil {
		x.note("%v. The entries of %s stay: the next plan shows them under restore.", err, strings.Join(slices.Sorted(maps.Keys(drop)), ", "))
	}
}

// droppedOf are the keys of entries that are dropped.
func (x *executor) droppedOf(entries []JournalEntry) map[string]bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[string]bool{}
	for _, e := range entries {
		if x.dropped[e.Key] {
			out[e.Key] = true
		}
	}
	return out
}

func (x *executor) log(msg string, f map[string]any) {
	if x.o.Log != nil {
		x.o.Log(msg, f)
	}
}

// settleJournal carries out the planned restores: each journaled Service that is gone is
// recreated at its planned IPs, the Endpoints and owned slices of each are made to exist, and
// journal objects whose every entry is restored or settled already are removed. Other entries
// (the plan did not show them) are left for the next plan, and so are their journal objects.
func (x *executor) settleJournal(ctx context.Context, journal []JournalEntry, restore []Restore, settledAlready map[string]bool) error {
	planned := map[string][]string{} // journal object and key → planned IPs
	for _, r := range restore {
		planned[r.Journal+" "+r.Key] = r.NewIPs
	}
	plannedKey := map[string]bool{}
	for _, r := range restore {
		plannedKey[r.Key] = true
	}
	settled := map[string]bool{}
	for _, e := range journal {
		ips, ok := planned[e.Object+" "+e.Key]
		// An older entry of a Service whose newer one is restored is settled with it.
		done := ok || settledAlready[e.Object+" "+e.Key] || plannedKey[e.Key]
		if _, seen := settled[e.Object]; !seen || !done {
			settled[e.Object] = done
		}
		if !ok {
			continue
		}
		// No entry may fail every later apply: one that cannot be restored stays, with a warning,
		// and the next plan shows it again.
		switch err := x.restoreEntry(ctx, e, ips); {
		case err == nil:
		case ctx.Err() != nil:
			return err
		case namespaceGoingErr(err):
			x.note("%s was not restored: its namespace is being deleted or gone; its journal entry is dropped.", e.Key)
		default:
			x.note("%s could not be restored from journal %s/%s: %v. The entry stays, and the next plan shows it under restore again.",
				e.Key, x.o.Journal.Namespace, e.Object, err)
			settled[e.Object] = false
		}
	}
	var done []string
	for obj, ok := range settled {
		if ok {
			done = append(done, obj)
		}
	}
	slices.Sort(done)
	if len(done) > 0 {
		x.log("restored interrupted Service moves", map[string]any{"restored": len(x.res.Restored), "journals": len(done)})
	}
	x.heldJournals = append(x.heldJournals, done...) // removed after settleEndpoints
	return nil
}

// namespaceGoingErr reports a create refused because the namespace is being deleted or gone.
func namespaceGoingErr(err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var status apierrors.APIStatus
	return apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Kind == "namespaces"
}

// restoreEntry recreates a journaled Service that is gone at ips, and what its deletion took along.
func (x *executor) restoreEntry(ctx context.Context, e JournalEntry, ips []string) error {
	cur, err := x.c.Kube.CoreV1().Services(e.Service.Namespace).Get(ctx, e.Service.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// The Service first, then the bridge: a refused bridge must not keep the cluster DNS
		// Service deleted. The entry then stays, and the next apply creates the bridge.
		cur, err = x.create(ctx, recreationCopy(&e.Service, ips), e.Key)
		if err != nil {
			return fmt.Errorf("restoring %s from journal %s: %w", e.Key, e.Object, err)
		}
		x.restoreOwners(ctx, cur, e.Owners)
		x.mu.Lock()
		x.res.Restored = append(x.res.Restored, e.Key)
		x.res.Recreated = append(x.res.Recreated, Move{Key: e.Key, UID: string(cur.UID), Type: serviceType(cur), OldIPs: e.OldIPs, NewIPs: cur.Spec.ClusterIPs})
		if e.Key == x.dnsKey {
			x.res.DNSMovedAt = cur.CreationTimestamp.UTC()
		}
		x.mu.Unlock()
	case err != nil:
		return fmt.Errorf("reading %s: %w", e.Key, err)
	}
	if err := x.restoreDependents(ctx, e, cur); err != nil {
		return err
	}
	if e.Key == x.dnsKey {
		return x.ensureBridge(ctx, x.currentSlices(e.Key))
	}
	return nil
}

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
		entries := make([]JournalEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = x.entry(m)
		}
		names, err := writeJournal(ctx, x.c, x.o.Journal, entries)
		if err != nil {
			fail(err) // nothing of this chunk was deleted
			break
		}
		var chunkWG sync.WaitGroup
		chunkErrs := make([]error, len(entries))
		for i := range entries {
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
			if errors.Join(chunkErrs...) != nil {
				// The journal stays for the failed moves; not for the Services another client
				// deleted or replaced meanwhile, which the next apply must not bring back. Done
				// also when the apply was interrupted, within the grace period.
				if drop := x.droppedOf(entries); len(drop) > 0 {
					dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
					if err := dropEntries(dctx, x.c, x.o.Journal.Namespace, names, drop); err != nil {
						fail(err)
					}
					cancel()
				}
				mu.Lock()
				kept = append(kept, names...)
				mu.Unlock()
				return
			}
			if slices.ContainsFunc(entries, func(e JournalEntry) bool { return e.Endpoints != nil }) {
				x.mu.Lock()
				x.heldJournals = append(x.heldJournals, names...) // until settleEndpoints
				x.mu.Unlock()
			} else if err := deleteJournal(ctx, x.c, x.o.Journal.Namespace, names); err != nil {
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

// DefaultWindowTarget is the unavailability per moved Service (delete to a ready EndpointSlice
// of the new Service) that adaptiveLimit steers to.
const DefaultWindowTarget = 150 * time.Millisecond

// adaptiveLimit bounds the moves in flight, additive increase and multiplicative decrease on
// each move's window, as TCP does on round-trip times: every move whose window stayed under
// target adds 1/limit, a window over it halves the limit (once per window, not once per late
// move). The run then goes as fast as kube-controller-manager writes EndpointSlices (its
// --kube-api-qps, 20 by default) and no faster, so no Service waits long without endpoints.
//
// The limit also never grows past what the client's rate allows to be useful: a move costs
// two requests, so qps/2 moves a second, each in flight for about the shortest window seen;
// twice that is enough. More in flight would buy no speed, only a queue that turns into
// downtime the moment the controller's burst runs out.
type adaptiveLimit struct {
	mu        sync.Mutex
	limit     float64
	max       float64
	inFlight  int
	target    time.Duration
	lastCut   time.Time
	qps       float64
	minWindow time.Duration
	wake      chan struct{}
}

func newAdaptiveLimit(most int, target time.Duration, qps float32) *adaptiveLimit {
	if target <= 0 {
		target = DefaultWindowTarget
	}
	return &adaptiveLimit{limit: float64(min(2, most)), max: float64(most), target: target, qps: float64(qps), wake: make(chan struct{})}
}

func (l *adaptiveLimit) acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.inFlight < int(l.limit) {
			l.inFlight++
			l.mu.Unlock()
			return nil
		}
		ch := l.wake
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (l *adaptiveLimit) release(window time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	switch {
	case !ok:
	case window > l.target:
		if time.Since(l.lastCut) > window {
			l.limit = max(1, l.limit/2)
			l.lastCut = time.Now()
		}
	default:
		if l.minWindow == 0 || window < l.minWindow {
			l.minWindow = window
		}
		l.limit = min(l.max, l.useful(), l.limit+1/l.limit)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// cancel gives back a slot acquired for a move that was not started.
func (l *adaptiveLimit) cancel() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	close(l.wake)
	l.wake = make(chan struct{})
}

// useful is the most moves in flight the client's rate can keep busy (no bound without one).
func (l *adaptiveLimit) useful() float64 {
	if l.qps <= 0 || l.minWindow == 0 {
		return l.max
	}
	movesPerSecond := l.qps / 2
	return max(2, math.Ceil(2*movesPerSecond*l.minWindow.Seconds()))
}

func (l *adaptiveLimit) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// entry is the journal entry for a move: the object to create and what its deletion takes along.
func (x *executor) entry(m Move) JournalEntry {
	svc := x.services[m.Key]
	e := JournalEntry{Key: m.Key, OldIPs: m.OldIPs, Service: *recreationCopy(svc, m.NewIPs), Owners: svc.ManagedFields, Written: time.Now().UTC()}
	if ep, ok := x.endpoints[m.Key]; ok {
		e.Endpoints = &ep
	}
	e.Slices = ownedSlices(x.slices[m.Key], svc.UID)
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
// hand-made Endpoints of a selector-less Service (one GET) and its owned EndpointSlices (from
// the watch). The Service's resourceVersion does not cover them, and a long apply journaled
// them minutes ago; a copy another client changed since is journaled again, so that the
// restore writes what was there at the delete.
func (x *executor) refreshDependents(ctx context.Context, svc *corev1.Service, e JournalEntry) (JournalEntry, error) {
	next := e
	if len(svc.Spec.Selector) == 0 {
		start := time.Now() // client-go retries a failed read itself (retryHints)
		ep, err := x.c.Kube.CoreV1().Endpoints(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			next.Endpoints = nil
		case err != nil:
			return e, fmt.Errorf("%s: reading its Endpoints: %w (gave up after %s of retries)", e.Key, err, time.Since(start).Round(time.Second))
		default:
			ep.ManagedFields = nil
			next.Endpoints = ep
		}
	}
	items, _ := x.sliceIndex.ByIndex("service", e.Key)
	var all []discoveryv1.EndpointSlice
	for _, o := range items {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			all = append(all, *s)
		}
	}
	next.Slices = ownedSlices(all, svc.UID)
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

// move recreates one journaled Service: delete (UID precondition), wait until gone, create
// with the planned IPs, restore what the deletion took along, verify. It returns the window
// from the delete to the verification.
func (x *executor) move(ctx context.Context, e JournalEntry) (_ time.Duration, err error) {
	old := x.services[e.Key]
	api := x.c.Kube.CoreV1().Services(old.Namespace)
	if x.o.DelayBeforeDelete > 0 {
		time.Sleep(x.o.DelayBeforeDelete)
	}
	e, err = x.refreshDependents(ctx, old, e)
	if err != nil {
		return 0, err
	}
	var dnsSlices, mirrored []discoveryv1.EndpointSlice
	if e.Key == x.dnsKey && x.bridge != nil {
		dnsSlices = x.currentSlices(e.Key) // the endpoints the bridge serves until its own slice exists
	}
	if e.Endpoints != nil && len(old.Spec.Selector) == 0 {
		// Served by the new Service until they are mirrored again.
		mirrored = slices.DeleteFunc(x.currentSlices(e.Key), func(s discoveryv1.EndpointSlice) bool {
			return s.Labels[discoveryv1.LabelManagedBy] != mirrorControllerName
		})
	}
	// Once the delete is sent the move is finished even when the apply is interrupted (Ctrl-C, a
	// timeout), within a grace period that starts at the interruption: a delete cancelled in
	// flight may have gone through, and its Service must not stay deleted. The verification at
	// the end still stops with the apply.
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	fctx, finished := afterCancel(ctx, interruptGrace)
	defer finished()
	old, e, err = x.deleteCurrent(fctx, old, e)
	var changed changedAway
	switch {
	case errors.As(err, &changed):
		x.notMoved(e.Key, changed.reason)
		return 0, nil
	case apierrors.IsNotFound(err):
		x.notMoved(e.Key, "deleted by another client during the apply")
		return 0, nil
	case apierrors.IsConflict(err):
		x.notMoved(e.Key, "replaced by another client during the apply (its UID changed); left as it is")
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("%s: deleting: %w", e.Key, err)
	}
	deleted := time.Now()
	defer func() {
		if err != nil && ctx.Err() != nil { // the grace period ran out between the delete and the end
			x.mu.Lock()
			x.cutOff = append(x.cutOff, e.Key)
			x.mu.Unlock()
		}
	}()
	if x.o.DelayAfterDelete > 0 {
		time.Sleep(x.o.DelayAfterDelete)
	}
	// The garbage collector would delete the owned slices some time after the Service, maybe
	// after their restored copies (same names) were refused as existing: gone now, they are
	// restored for the new Service. Only once the Service is deleted: a move that no longer
	// holds keeps them.
	for _, s := range e.Slices {
		err := retryWrite(fctx, func(bool) error {
			return x.c.Kube.DiscoveryV1().EndpointSlices(s.Namespace).Delete(fctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("%s: deleting its EndpointSlice %s: %w", e.Key, s.Name, err)
		}
	}
	// Without finalizers a successful delete has removed the object; with them, watch.
	if len(old.Finalizers) > 0 {
		if err := waitDeleted(fctx, objectWatch(api.List, api.Watch, old.Name), &corev1.Service{}, old.UID); err != nil {
			return 0, fmt.Errorf("%s: waiting for the deletion to finish (finalizers %v): %w", e.Key, old.Finalizers, err)
		}
	}
	// kube-dns's old IP is what every pod's resolv.conf names: the bridge takes it back first.
	var bridgeErr error
	if e.Key == x.dnsKey && x.bridge != nil {
		bridgeErr = x.ensureBridge(fctx, dnsSlices)
	}
	created, err := x.create(fctx, recreationCopy(&e.Service, e.Service.Spec.ClusterIPs), e.Key)
	if err != nil {
		return 0, errors.Join(bridgeErr, err)
	}
	if bridgeErr != nil {
		return 0, bridgeErr
	}
	copies, err := x.copySlices(fctx, mirrored, created)
	if err != nil {
		x.note("%s: copying its EndpointSlices for the new Service failed (%v); it is served once they are mirrored again.", e.Key, err)
	}
	if err := x.restoreDependents(fctx, e, created); err != nil {
		return 0, err
	}
	x.restoreOwners(fctx, created, e.Owners)
	// restoreDependents waited for the mirrored slices; without them the copies stay until the
	// sweep at the end of the run.
	if len(copies) > 0 && slices.ContainsFunc(x.currentSlices(e.Key), func(s discoveryv1.EndpointSlice) bool {
		return s.Labels[discoveryv1.LabelManagedBy] == mirrorControllerName
	}) {
		x.deleteSlices(fctx, created.Namespace, copies)
	}
	x.mu.Lock()
	x.res.Recreated = append(x.res.Recreated, Move{Key: e.Key, UID: string(created.UID), Type: serviceType(created), OldIPs: e.OldIPs, NewIPs: created.Spec.ClusterIPs})
	if e.Key == x.dnsKey {
		x.res.DNSMovedAt = created.CreationTimestamp.UTC()
	}
	if ctx.Err() != nil {
		x.finishedLate = append(x.finishedLate, e.Key)
	}
	x.mu.Unlock()
	if len(old.Spec.Selector) > 0 && readyEndpoints(x.slices[e.Key]) > 0 {
		came := x.waitSlice(ctx, e.Key, created.UID, sliceControllerName)
		if ctx.Err() == nil {
			x.sliceOutcome(e.Key, created.UID, came)
		}
	}
	return time.Since(deleted), nil
}

// stallAfter is how many moves in a row may end without their EndpointSlice before the run
// stops: kube-controller-manager is down or stuck, and every further move would add a Service
// without endpoints, one per SliceWait.
const stallAfter = 5

// sliceOutcome records whether a moved Service's EndpointSlice came; one that came resets the
// count of moves in a row without one.
func (x *executor) sliceOutcome(key string, uid types.UID, came bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if came {
		x.noSliceInRow = 0
		return
	}
	x.noSliceInRow++
	x.noSlice = append(x.noSlice, movedService{key, uid})
}

type movedService struct {
	key string
	uid types.UID
}

// stalled returns errStalled once, when stallAfter moves in a row have ended without their
// EndpointSlice; moveAll then starts no further move and reports with stallReport.
func (x *executor) stalled() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.noSliceInRow < stallAfter || x.stallReported {
		return nil
	}
	x.stallReported = true
	return errStalled
}

// stallReport says why the run stopped, naming the moved Services that still have no
// EndpointSlice with a ready endpoint, once the moves in flight have ended.
func (x *executor) stallReport() error {
	x.mu.Lock()
	moved := slices.Clone(x.noSlice)
	x.mu.Unlock()
	var without []string
	for _, m := range moved {
		items, _ := x.sliceIndex.ByIndex("service", m.key)
		if !slices.ContainsFunc(items, func(o any) bool {
			s, ok := o.(*discoveryv1.EndpointSlice)
			return ok && ownedBy(s.OwnerReferences, m.uid) && readyEndpoints([]discoveryv1.EndpointSlice{*s}) > 0
		}) {
			without = append(without, m.key)
		}
	}
	slices.Sort(without)
	return fmt.Errorf("%w: kube-controller-manager wrote no EndpointSlice for %d moved Services in a row within "+
		"endpoint_wait (%s each), so no further move was started. Moved and still without endpoints: %s. They exist at "+
		"their new IPs and are served as soon as it writes their EndpointSlices. Check that kube-controller-manager "+
		"runs and is healthy (its logs, its endpointslice controller, its --kube-api-qps), then apply again: the next "+
		"apply moves the rest", errStalled, stallAfter, x.o.SliceWait, orNone(without))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none any more"
	}
	return strings.Join(list, ", ")
}

// errStalled stops a run whose moved Services get no endpoints.
var errStalled = errors.New("stopped")

// interruptGrace is how long moves already past their delete may still take once the apply is
// interrupted: CI runners send SIGKILL about 10 s after SIGINT, and terraform needs some of it.
const interruptGrace = 5 * time.Second

// afterCancel is a context that outlives ctx by grace: it is cancelled grace after ctx is.
func afterCancel(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var timer *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, func() {
			cancel(fmt.Errorf("the apply was interrupted (%v) and the %s given to moves in flight ran out", context.Cause(ctx), grace))
		})
	})
	return out, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// changedAway is a Service another client changed mid-apply so that its move no longer holds.
type changedAway struct{ reason string }

func (c changedAway) Error() string { return c.reason }

// deleteCurrent deletes the Service as it is journaled: with its resourceVersion as a
// precondition, so that a change another client made since (a label, an annotation, a port)
// is not lost. On a conflict it reads the Service again, journals that copy, and tries again;
// the Service and journal entry returned are the ones deleted.
func (x *executor) deleteCurrent(ctx context.Context, old *corev1.Service, e JournalEntry) (*corev1.Service, JournalEntry, error) {
	api := x.c.Kube.CoreV1().Services(old.Namespace)
	uid := old.UID
	for attempt := 0; ; attempt++ {
		rv := old.ResourceVersion
		pre := metav1.Preconditions{UID: &uid}
		if rv != "" {
			pre.ResourceVersion = &rv
		}
		err := retryWrite(ctx, func(again bool) error {
			err := api.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &pre})
			if again && apierrors.IsNotFound(err) {
				return nil // the earlier attempt deleted it
			}
			return err
		})
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
			return old, e, fmt.Errorf("%s: changed by another client on every attempt to delete it; left as it is: %w", e.Key, err)
		}
		m := Move{Key: e.Key, UID: string(uid), Type: serviceType(old), OldIPs: e.OldIPs, NewIPs: e.Service.Spec.ClusterIPs}
		if reason := moveHolds(fresh, m, x.targets, nil); reason != "" {
			return old, e, changedAway{reason + " (changed by another client during the apply); left as it is"}
		}
		next := e
		next.Owners = formerOwners(fresh.ManagedFields)
		next.Service = *recreationCopy(fresh, e.Service.Spec.ClusterIPs)
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

// create creates svc; when another client took a planned IP mid-apply it takes the next free
// address of the same target range and says so, since the old Service is already gone.
func (x *executor) create(ctx context.Context, svc *corev1.Service, key string) (*corev1.Service, error) {
	api := x.c.Kube.CoreV1().Services(svc.Namespace)
	planned := slices.Clone(svc.Spec.ClusterIPs)
	for attempt := 0; ; attempt++ {
		var created *corev1.Service
		err := retryWrite(ctx, func(again bool) error {
			var err error
			created, err = api.Create(ctx, svc, metav1.CreateOptions{FieldManager: x.c.FieldManager})
			if again && (apierrors.IsAlreadyExists(err) || takenIP(err, svc.Spec.ClusterIPs) >= 0) {
				// The earlier attempt may have created it: then it has this name and these IPs.
				cur, getErr := api.Get(ctx, svc.Name, metav1.GetOptions{})
				switch {
				case getErr == nil && slices.Equal(cur.Spec.ClusterIPs, svc.Spec.ClusterIPs):
					created, err = cur, nil
				case getErr != nil && !apierrors.IsNotFound(getErr):
					err = getErr
				}
			}
			return err
		}, rangeNotLoaded)
		if err == nil {
			if !slices.Equal(created.Spec.ClusterIPs, planned) {
				x.note("%s got %v instead of the planned %v: another client took a planned IP during the apply.",
					key, created.Spec.ClusterIPs, planned)
			}
			return created, nil
		}
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%s: another client (a controller?) created it again between our delete and create; "+
				"its journaled copy is kept: compare, then delete the journal entry's Service or let the next apply settle it", key)
		}
		taken := takenIP(err, svc.Spec.ClusterIPs)
		if taken < 0 || attempt >= 16 {
			return nil, fmt.Errorf("%s: creating at %v: %w", key, svc.Spec.ClusterIPs, err)
		}
		ip, _ := netip.ParseAddr(svc.Spec.ClusterIPs[taken])
		next, ok := x.nextFree(ip)
		if !ok {
			return nil, fmt.Errorf("%s: creating at %v: %w; no further address of the target is free of planned IPs", key, planned, err)
		}
		svc.Spec.ClusterIPs[taken] = next.String()
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
}

// nextFree is the next address after ip inside ip's target range, wrapping at its end, that a
// Service can have and no move or restore of this apply is planned to take.
func (x *executor) nextFree(ip netip.Addr) (netip.Addr, bool) {
	t, ok := targetFor(x.targets, ip)
	if !ok || !t.Contains(ip) {
		return netip.Addr{}, false
	}
	for n := ip; ; {
		if n = n.Next(); !n.IsValid() || !t.Contains(n) {
			n = t.Addr() // wrap; the network address itself is unusable and skipped below
		}
		if n == ip {
			return netip.Addr{}, false
		}
		if _, bad := unusableTargetIP(x.targets, n); !bad && !x.planned[n] {
			return n, true
		}
	}
}

// rangeNotLoaded is the allocator's answer for an IP of a range it does not know (yet): right
// after kube-apiserver starts, until it has read the ServiceCIDRs, a Ready range is refused
// like this for a moment (found by TestAccRestart_midApply). The plan checked that a Ready
// ServiceCIDR serves the target, so the create is retried.
func rangeNotLoaded(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "does not match the current range")
}

// takenIP finds which of ips an "already allocated" error names, or -1. The apiserver names the
// IP in the message ("failed to allocate IP 172.24.0.10: provided IP is already allocated") on
// the field spec.clusterIPs as a whole, so the IP is parsed from there and compared as an
// address: a substring test would take 172.24.0.1 for 172.24.0.10.
func takenIP(err error, ips []string) int {
	if !apierrors.IsInvalid(err) {
		return -1
	}
	for _, m := range allocFailedRE.FindAllStringSubmatch(err.Error(), -1) {
		if !strings.Contains(m[2], "already allocated") {
			continue
		}
		named, perr := netip.ParseAddr(m[1])
		if perr != nil {
			continue
		}
		if i := slices.IndexFunc(ips, func(s string) bool { ip, err := netip.ParseAddr(s); return err == nil && ip == named }); i >= 0 {
			return i
		}
	}
	return -1
}

var allocFailedRE = regexp.MustCompile(`failed to allocate IP ([0-9A-Fa-f:.]+): ([^;\]]*)`)

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
		err := retryWrite(ctx, func(bool) error {
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
	ep, err := x.putEndpoints(ctx, e, svc.UID)
	if err != nil {
		return err
	}
	// The endpoints controller deletes a Service's Endpoints when its Service cache lacks the
	// Service; creating the new Service right after the delete usually closes that gap before
	// it looks. A sync that looked in the gap can still delete what we wrote. The mirroring
	// controller shares that cache: once it has mirrored the Endpoints, the new Service is in
	// it and no new such sync starts; check once more, and once more at the end of the run.
	if e.Endpoints.Labels[discoveryv1.LabelSkipMirror] != "true" && endpointsAddresses(e.Endpoints) > 0 {
		x.waitSlice(ctx, e.Key, ep.UID, mirrorControllerName)
	}
	if _, err = x.putEndpoints(ctx, e, svc.UID); err != nil {
		return err
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
			_, err := x.c.Kube.CoreV1().Endpoints(r.e.Endpoints.Namespace).Get(ctx, r.e.Endpoints.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				if _, err = x.putEndpoints(ctx, r.e, r.uid); err == nil {
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
// to the Service rewritten to uid (the garbage collector would delete them for the old one).
// Endpoints that exist with other addresses, ports or labels were written by another client
// after the delete, and are newer than the journal: they are kept, and only owner references
// to the old Service are rewritten.
func (x *executor) putEndpoints(ctx context.Context, e JournalEntry, uid types.UID) (*corev1.Endpoints, error) {
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
	kept := false
	// Read, then write what differs; a write that raced another (or our own lost attempt) reads again.
	err := retryWrite(ctx, func(bool) error {
		var err error
		cur, err = api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cur, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: x.c.FieldManager})
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
	if kept {
		x.noteOnce("kept-endpoints "+e.Key, "%s: its Endpoints were written by another client after the delete and differ from the "+
			"journaled copy; they are kept as they are.", e.Key)
	}
	return cur, nil
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

// ensureBridge creates the DNS bridge on kube-dns's old IPs, once per run, and when kube-dns's
// EndpointSlices are given, a copy of their endpoints for it: kube-proxy then routes the old IP
// as soon as the bridge exists, not only once kube-controller-manager has written its slice.
func (x *executor) ensureBridge(ctx context.Context, dnsSlices []discoveryv1.EndpointSlice) error {
	b := x.bridge
	if b == nil || x.bridgeUID != "" {
		return nil
	}
	api := x.c.Kube.CoreV1().Services(b.Namespace)
	var created *corev1.Service
	// The old IP is released with the delete; retry briefly should the allocator lag behind.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := retryWrite(ctx, func(bool) error {
			var err error
			created, err = api.Create(ctx, b, metav1.CreateOptions{FieldManager: x.c.FieldManager})
			if apierrors.IsAlreadyExists(err) {
				created, err = api.Get(ctx, b.Name, metav1.GetOptions{})
			}
			return err
		})
		if err != nil && takenIP(err, b.Spec.ClusterIPs) >= 0 {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("kube-dns moved, but the DNS bridge %s/%s on its old IP %v was not created: %w. Pods and kubelets "+
			"still using the old IP cannot resolve: run terraform apply again, or create it by hand", b.Namespace, b.Name, b.Spec.ClusterIPs, err)
	}
	x.bridgeUID = created.UID
	x.mu.Lock()
	x.res.BridgeCreated = b.Namespace + "/" + b.Name
	x.mu.Unlock()
	// Only the families the bridge has: of a dual-stack DNS Service whose other family stays, one.
	dnsSlices = slices.DeleteFunc(slices.Clone(dnsSlices), func(s discoveryv1.EndpointSlice) bool {
		return !slices.Contains(created.Spec.IPFamilies, corev1.IPFamily(s.AddressType))
	})
	x.bridgeMirror, err = x.copySlices(ctx, dnsSlices, created)
	if err != nil {
		x.note("The DNS bridge %s/%s was created, but copying kube-dns's endpoints to it failed (%v): it answers once "+
			"kube-controller-manager writes its EndpointSlice.", b.Namespace, b.Name, err)
	}
	return nil
}

// copyManager is the managed-by value of EndpointSlices copied for a new Service until its
// controller writes its own; the EndpointSlice controllers leave slices managed by others
// alone, and kube-proxy merges all slices of a Service.
const copyManager = "k8scidr.io"

func sliceCopy(s *discoveryv1.EndpointSlice, owner *corev1.Service, i int) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-k8scidr-%d", owner.Name, i), Namespace: owner.Namespace,
			Labels:          map[string]string{discoveryv1.LabelServiceName: owner.Name, discoveryv1.LabelManagedBy: copyManager},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: owner.Name, UID: owner.UID}},
		},
		AddressType: s.AddressType,
		Endpoints:   slices.Clone(s.Endpoints),
		Ports:       slices.Clone(s.Ports),
	}
}

// copySlices gives svc copies of its previous incarnation's EndpointSlices, so kube-proxy can
// route it before a controller has written its own; it returns the names created.
func (x *executor) copySlices(ctx context.Context, from []discoveryv1.EndpointSlice, svc *corev1.Service) ([]string, error) {
	var names []string
	for i := range from {
		c := sliceCopy(&from[i], svc, i)
		err := retryWrite(ctx, func(bool) error {
			_, err := x.c.Kube.DiscoveryV1().EndpointSlices(c.Namespace).Create(ctx, c, metav1.CreateOptions{FieldManager: x.c.FieldManager})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return names, err
		}
		names = append(names, c.Name)
	}
	return names, nil
}

// deleteSlices deletes copied EndpointSlices once they are no longer needed.
func (x *executor) deleteSlices(ctx context.Context, namespace string, names []string) {
	for _, name := range names {
		err := retryWrite(ctx, func(bool) error {
			return x.c.Kube.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			x.note("Deleting the copied EndpointSlice %s/%s failed (%v): delete it by hand.", namespace, name, err)
		}
	}
}

// currentSlices are the EndpointSlices the watch holds for a Service now.
func (x *executor) currentSlices(key string) []discoveryv1.EndpointSlice {
	items, _ := x.sliceIndex.ByIndex("service", key)
	var out []discoveryv1.EndpointSlice
	for _, o := range items {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok && readyEndpoints([]discoveryv1.EndpointSlice{*s}) > 0 {
			out = append(out, *s)
		}
	}
	return out
}

// sweepWait bounds how long a successful run waits, in all, for the EndpointSlice controllers
// to serve the Services that still have copies, so that it can delete them.
const sweepWait = 30 * time.Second

// sweepCopies deletes the EndpointSlice copies this run or an earlier one (failed, or killed,
// before retiring them) made, once they are stale: their Service is gone or was replaced, or
// the EndpointSlice controllers serve it themselves. It waits up to patience, in all, for the
// controllers to serve the Services whose copies are still needed; those left stay, with a note,
// and the next apply sweeps them.
func (x *executor) sweepCopies(ctx context.Context, patience time.Duration) {
	api := x.c.Kube.DiscoveryV1().EndpointSlices("")
	var copies []discoveryv1.EndpointSlice
	err := eachItem(ctx, listPages(func(ctx context.Context, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
		o.LabelSelector = discoveryv1.LabelManagedBy + "=" + copyManager
		return api.List(ctx, o)
	}), func(s *discoveryv1.EndpointSlice) error {
		copies = append(copies, *s)
		return nil
	})
	if err != nil {
		x.note("Listing EndpointSlice copies left by an earlier run failed (%v): they are swept by the next apply.", err)
		return
	}
	deadline := time.Now().Add(patience)
	var kept []string
	for _, cp := range copies {
		name := cp.Labels[discoveryv1.LabelServiceName]
		stale, err := x.copyStale(ctx, &cp, name)
		if left := time.Until(deadline); !stale && err == nil && left > 0 {
			err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, left, false, func(ctx context.Context) (bool, error) {
				var checkErr error
				stale, checkErr = x.copyStale(ctx, &cp, name)
				return stale, checkErr
			})
		}
		if !stale {
			if err != nil && !wait.Interrupted(err) {
				x.note("Checking the EndpointSlice copy %s/%s failed (%v): the next apply sweeps it.", cp.Namespace, cp.Name, err)
			}
			kept = append(kept, cp.Namespace+"/"+cp.Name)
			continue
		}
		x.deleteSlices(ctx, cp.Namespace, []string{cp.Name})
		x.log("swept an EndpointSlice copy", map[string]any{"slice": cp.Namespace + "/" + cp.Name})
	}
	if len(kept) > 0 && patience > 0 {
		x.note("EndpointSlice copies %s are kept: kube-controller-manager does not serve their Services yet, and they "+
			"do until it does. The next apply removes them.", strings.Join(kept, ", "))
	}
}

// copyStale reports whether the EndpointSlice copy cp of Service name is no longer needed.
func (x *executor) copyStale(ctx context.Context, cp *discoveryv1.EndpointSlice, name string) (bool, error) {
	svc, err := x.c.Kube.CoreV1().Services(cp.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	case !ownedBy(cp.OwnerReferences, svc.UID):
		return true, nil
	}
	own, err := x.c.Kube.DiscoveryV1().EndpointSlices(cp.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return false, err
	}
	// The EndpointSlice controller's slices are owned by the Service; mirrored ones by its
	// Endpoints object.
	return slices.ContainsFunc(own.Items, func(s discoveryv1.EndpointSlice) bool {
		switch s.Labels[discoveryv1.LabelManagedBy] {
		case sliceControllerName:
			return ownedBy(s.OwnerReferences, svc.UID) && readyEndpoints([]discoveryv1.EndpointSlice{s}) > 0
		case mirrorControllerName:
			return readyEndpoints([]discoveryv1.EndpointSlice{s}) > 0
		}
		return false
	}), nil
}

// retireBridgeMirror deletes the copied endpoints once the EndpointSlice controller serves the
// bridge itself: a copy would go stale as CoreDNS pods are replaced.
func (x *executor) retireBridgeMirror(ctx context.Context) {
	if len(x.bridgeMirror) == 0 {
		return
	}
	b := x.bridge
	if !x.waitSlice(ctx, b.Namespace+"/"+b.Name, x.bridgeUID, sliceControllerName) {
		x.note("The DNS bridge keeps a copy of kube-dns's endpoints (EndpointSlices %s in %s) because kube-controller-manager "+
			"wrote none for it: delete them once it does, since they do not follow CoreDNS pods.", strings.Join(x.bridgeMirror, ", "), b.Namespace)
		return
	}
	x.deleteSlices(ctx, b.Namespace, x.bridgeMirror)
}

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

// watchSlices starts one EndpointSlice watch for the whole run, indexed by Service.
func (x *executor) watchSlices(ctx context.Context) (func(), error) {
	api := x.c.Kube.DiscoveryV1().EndpointSlices("")
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = discoveryv1.LabelServiceName
			return api.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = discoveryv1.LabelServiceName
			return api.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{
		"service": func(o any) ([]string, error) {
			s, ok := o.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil, nil
			}
			return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
		},
	})
	x.changed = newBroadcast()
	notify := func(any) { x.changed.fire() }
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
	x.sliceIndex = inf.GetIndexer()
	return func() { close(stop) }, nil
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
