// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Executing a Service recreation plan: journal, delete, create, verify — in bounded batches,
// paced by the EndpointSlices kube-controller-manager writes for the new Services.
package recreation

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
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
	// HoldAfterDelete is fault injection for crash tests, nil otherwise: every move calls it
	// between delete and create, so a kill lands while Services are gone. HoldBeforeDelete is
	// called between a move's journal write and its delete, so a test can change the Service
	// meanwhile. Each gets the apply's context and the Service's key, and returns when the test
	// lets the move go on, or when ctx ends (the apply is interrupted).
	HoldAfterDelete  func(ctx context.Context, key string)
	HoldBeforeDelete func(ctx context.Context, key string)
	// HoldAfterAdmission, fault injection too, holds a move between admission's answer (the
	// dry run) and the delete: where another client's change must be asked about again.
	HoldAfterAdmission func(ctx context.Context, key string)
	// Lease is the journal's, taken (HoldJournal) before the snapshot was read; nil takes it
	// here, for a snapshot that no other apply can have written into since.
	Lease *JournalLease
	// ProgressEvery is how often progress Events are posted on the journal's Lease; default
	// DefaultProgressEvery.
	ProgressEvery time.Duration
	// HandOver is what the hand-over must know of the cluster's data path; zero values take
	// the defaults.
	HandOver HandOverOptions
	// Watches are the run's EndpointSlice and admission-guard watches, started before the
	// snapshot (StartWatches); nil: the run starts its own.
	Watches *Watches
}

// RecreationResult is what an apply did.
type RecreationResult struct {
	Recreated     []Move
	Restored      []string
	BridgeCreated string
	// BridgesRemoved are the DNS bridges this apply removed (namespace/name).
	BridgesRemoved []string
	// OldIPBridgesCreated and OldIPBridgesRemoved are the old-IP bridges this apply made (or
	// found made by an interrupted apply it finished) and removed (namespace/name).
	OldIPBridgesCreated []OldIPBridge
	OldIPBridgesRemoved []string
	// DNSMovedAt is when the DNS Service was recreated at its new IPs; zero when it was not.
	DNSMovedAt time.Time
	// Summary is the last progress line of a run that finished after at least one progress
	// Event: moved of total, rate, time; "" for a shorter run.
	Summary string
	// Notes are things the user should know: a verification that timed out, an IP that had
	// to change because another client took the planned one mid-apply.
	Notes []string
	// NotMoved are the moves that stopped holding during the apply (another client deleted,
	// replaced or changed the Service), with the reason. Their journal entries are dropped.
	NotMoved map[string]string
}

// FollowUps is what the user must do after this apply that the Kubernetes API cannot do for
// them: the kubelets' clusterDNS and the pods' resolvers when the DNS Service moved, and the
// apiserver's own range (KEP-1880) once anything moved.
func (r RecreationResult) FollowUps(steps RecreationSteps) []string {
	var todo []string
	for _, m := range r.Recreated {
		if m.Key != steps.DNSService {
			continue
		}
		bridge := ""
		if r.BridgeCreated != "" {
			bridge = " " + r.BridgeCreated
		}
		got := strings.Join(m.NewIPs, ",")
		if i := slices.IndexFunc(steps.Moves, func(p Move) bool { return p.Key == m.Key }); i >= 0 && !slices.Equal(steps.Moves[i].NewIPs, m.NewIPs) {
			got += fmt.Sprintf(" (not the planned %s, which another client took during the apply: this resource's dns_service_ips "+
				"has the IPs it got)", strings.Join(steps.Moves[i].NewIPs, ","))
		}
		todo = append(todo, fmt.Sprintf("Set kubelet clusterDNS (kOps: kubeDNS.serverIP) to %s's new IP %s and roll the nodes "+
			"(kOps accepts it only with serviceClusterIPRange in the same edit: provider::k8scidr::kops_networking's service_range step); "+
			"until then the DNS bridge%s answers on %s.", m.Key, got, bridge, strings.Join(m.OldIPs, ",")),
			"Running pods keep the old DNS server until restarted: feed dns_moved_at to k8scidr_workload_restarts.started_before.")
	}
	if len(r.Recreated) > 0 {
		todo = append(todo, "default/kubernetes moves with k8scidr_apiserver_service once every kube-apiserver runs with the new --service-cluster-ip-range.")
	}
	return todo
}

// ExecuteRecreation carries out the steps PrepareRecreation made from snap.
func ExecuteRecreation(ctx context.Context, c *k8sops.Client, snap Snapshot, plan RecreationSteps, o ExecOptions) (res RecreationResult, err error) {
	if o.Parallelism < 1 {
		o.Parallelism = DefaultParallelism
	}
	if o.SliceWait == 0 {
		o.SliceWait = 2 * time.Minute
	}
	o.HandOver.ClusterDomain = cmp.Or(o.HandOver.ClusterDomain, DefaultClusterDomain)
	o.HandOver.ProxySync = cmp.Or(o.HandOver.ProxySync, DefaultProxySync)
	o.HandOver.DNSTTL = cmp.Or(o.HandOver.DNSTTL, DefaultDNSTTL)
	x := &executor{c: c, o: o, services: map[string]*corev1.Service{}, ranges: snap.Ranges,
		endpoints: snap.Endpoints, bridge: plan.Bridge, oldIPBridges: plan.OldIPBridges, takeOver: plan.TakeOver, dnsKey: plan.DNSService,
		targets: plan.Targets, planned: map[netip.Addr]bool{}, first: map[string]bool{}, requests: make(chan struct{}, o.Parallelism)}
	for _, m := range plan.Moves[:plan.First] {
		x.first[m.Key] = true
	}
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
		x.services[k8sops.SvcKey(&snap.Services[i])] = &snap.Services[i]
	}
	if x.lease = o.Lease; x.lease == nil {
		if x.lease, err = HoldJournal(ctx, c, o.Journal, LeaseOptions{Log: o.Log}); err != nil {
			return x.res, err
		}
		defer x.lease.Release() // after everything below, the deferred clean-up of a failed run included
	}
	ctx = x.lease.Context()
	if total := len(plan.Moves) + len(plan.Restore); total > 0 {
		done := x.reportProgress(ctx, total, o.ProgressEvery)
		defer func() { res.Summary = done(err) }() // before release: the Lease is the Events' object
	}
	defer func() {
		if err != nil {
			x.dropNotMoved(ctx)
			// Interrupted or timed out too: the copies the run made for Services and bridges the
			// controllers serve by now, or within the grace period, go; the rest, still needed,
			// stay for the next apply to sweep.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
			defer cancel()
			x.sweepCopies(sctx, interruptGrace*4/5)
		}
	}()
	// The run's watches list and sync side by side: at 10,000 Services the EndpointSlices and the
	// Endpoints are each a list of 10,000 objects, and the first move waits for all of them.
	stops, err := x.startWatches(ctx, len(plan.Moves) > 0 || len(plan.Restore) > 0,
		slices.ContainsFunc(plan.Moves, func(m Move) bool { _, ok := x.endpoints[m.Key]; return ok }) ||
			slices.ContainsFunc(snap.Journal, func(e JournalEntry) bool { return e.Endpoints != nil }), snap.endpointsSeed)
	defer stops()
	if err != nil {
		return x.res, err
	}
	x.syncBridgeEndpoints(ctx, snap)
	if err := x.sweepHandOvers(ctx, snap.Services); err != nil {
		return x.res, err
	}
	restoreLater, err := x.settleJournal(ctx, snap.Journal, plan.Restore, plan.Settled)
	if err != nil {
		return x.res, err
	}
	if err := x.measureBridgeRoom(ctx, plan.Moves); err != nil {
		_ = restoreLater(ctx) // what an interrupted apply deleted is not left deleted for it
		return x.res, err
	}
	// The first Services are moved and verified before the rest; the DNS bridge follows kube-dns.
	var moveErr error
	for _, part := range [][]Move{plan.Moves[:plan.First], plan.Moves[plan.First:]} {
		if moveErr = x.moveAll(ctx, part); moveErr != nil {
			break
		}
	}
	// After a failed move too: what an interrupted apply deleted is not left deleted for a
	// failure elsewhere. Its only error is an ended ctx, which a failed move reports already.
	if err := restoreLater(ctx); moveErr != nil || err != nil {
		return x.res, cmp.Or(moveErr, err)
	}
	if err := x.settleEndpoints(ctx); err != nil {
		return x.res, err
	}
	x.retireBridgeMirror(ctx)
	if err := x.retireTransients(ctx); err != nil {
		return x.res, err
	}
	x.sweepCopies(ctx, sweepWait) // this run's and any an earlier, failed or killed, run left
	if err := x.deleteJournal(ctx, x.heldJournals); err != nil {
		return x.res, err
	}
	if x.res.BridgesRemoved, err = x.removeServices(ctx, plan.RemoveBridges, "the DNS bridge"); err != nil {
		return x.res, err
	}
	x.res.OldIPBridgesRemoved, err = x.removeServices(ctx, plan.RemoveOldIPBridges, "the old-IP bridge")
	return x.res, err
}

type executor struct {
	c         *k8sops.Client
	o         ExecOptions
	lease     *JournalLease // checked before each delete of a Service or a journal entry
	services  map[string]*corev1.Service
	endpoints map[string]corev1.Endpoints
	dnsKey    string          // the cluster DNS Service, whose move brings the bridge
	first     map[string]bool // moved and verified before the rest: a refusal stops the apply
	// targets and planned bound the replacement of a planned IP another client took mid-apply:
	// inside the target, and never another Service's planned IP.
	targets []netip.Prefix
	planned map[netip.Addr]bool
	// claimed are the addresses nextFree gave out in this run (escorts' own, replacements of
	// planned IPs another client took), so that no two get the same one.
	claimed   map[netip.Addr]bool
	claimedMu sync.Mutex

	sliceIndex cache.Indexer
	changed    *broadcast
	// endpointsWatch holds the Endpoints during a run that moves or restores selector-less
	// Services (watchEndpoints); nil otherwise, or when watching them failed to start.
	endpointsWatch *endpointsWatch
	guards         admissionGuards // who may refuse a copy, asked before each delete

	// restoredEndpoints are re-checked once quiet; heldJournals hold them until then.
	restoredEndpoints []restoredEndpoints
	heldJournals      []string

	// bridge is the DNS bridge to create the moment kube-dns's old IP is free; bridgeMirror is
	// the EndpointSlice that gives it kube-dns's endpoints until the controller writes its own.
	bridge       *corev1.Service
	bridgeUID    types.UID
	bridgeMirror []string
	// oldIPBridges are the old-IP bridges to create, by move key.
	oldIPBridges map[string]*corev1.Service
	// takeOver are the bridges whose IPs a Service goes back to, by its key (RecreationSteps.TakeOver).
	takeOver map[string][]*corev1.Service
	// escorts are the escorts of the moves by delete and create, by key (handOvers plans them).
	escorts map[string]*corev1.Service

	// room is what the namespaces' quotas leave for the bridges the run keeps (reserveBridges).
	room *bridgeRoom
	// quotaHeld is the room in each namespace's services quota that the run has promised and
	// that its quota's usage may not show yet (holdQuota).
	quotaHeld map[string]int
	// transients are the hand-over bridges that are not kept, removed at their time.
	transients map[types.UID]transientBridge
	// externalIPsAsked: whether admission admits external IPs where no visible guard may
	// refuse them was asked (externalIPsRefusal), and what it said.
	// ranges are the ServiceCIDRs as the run's snapshot read them.
	ranges []k8sops.ServiceCIDR
	// resumes are the hand-overs a cut-off apply left, queued by the restore.
	resumes []*handOver
	// requests bounds the hand-overs' requests in flight across the run (Parallelism).
	requests chan struct{}

	externalIPsMu      sync.Mutex
	externalIPsAsked   bool
	externalIPsRefused string

	// finishedLate are the moves finished after the apply was interrupted (afterCancel), cutOff
	// those past their delete that the grace period did not let finish.
	finishedLate, cutOff []string
	noted                map[string]bool // noteOnce
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

// deleteJournal removes the journal objects names once every entry is settled, while the lease
// is trusted.
func (x *executor) deleteJournal(ctx context.Context, names []string) error {
	if err := x.lease.Check(); err != nil {
		return err
	}
	return deleteJournal(ctx, x.c, x.o.Journal.Namespace, names)
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
	err := x.lease.Check()
	if err == nil {
		err = dropEntries(dctx, x.c, x.o.Journal.Namespace, held, drop)
	}
	if err != nil {
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
