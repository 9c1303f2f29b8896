// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The journal an interrupted apply left: planning what to restore (pure, over a Snapshot), then
// restoring the Services it holds and removing the entries that are settled.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// settleJournal carries out the planned restores: each journaled Service that is gone is
// recreated at its planned IPs, the Endpoints and owned slices of each are made to exist, and
// journal objects whose every entry is restored or settled already are removed. Other entries
// (the plan did not show them) are left for the next plan, and so are their journal objects.
//
// Restores into a namespace whose ResourceQuota shows no room for them are left to after, which
// the caller runs once the moves are done: a quota's usage counts a create admitted but never
// stored (the killed apply's in-flight create) until kube-controller-manager recounts, and the
// moves' deletes there bring the recount; without them create waits for it (awaitQuotaRecount).
func (x *executor) settleJournal(ctx context.Context, journal []JournalEntry, restore []Restore, settledAlready map[string]bool) (after func(context.Context) error, err error) {
	planned := map[string][]string{} // journal object and key → planned IPs
	for _, r := range restore {
		planned[r.Journal+" "+r.Key] = r.NewIPs
	}
	plannedKey := map[string]bool{}
	for _, r := range restore {
		plannedKey[r.Key] = true
	}
	later := x.quotaBound(ctx, restore)
	settled := map[string]bool{}
	var deferred []JournalEntry
	for _, e := range journal {
		ips, ok := planned[e.Object+" "+e.Key]
		// An older entry of a Service whose newer one is restored is settled with it.
		done := ok || settledAlready[e.Object+" "+e.Key] || plannedKey[e.Key]
		if _, seen := settled[e.Object]; !seen || !done {
			settled[e.Object] = done
		}
		switch {
		case !ok:
		case later[e.Service.Namespace]:
			deferred = append(deferred, e)
		default:
			if err := x.settleEntry(ctx, e, ips, settled); err != nil {
				return nil, err
			}
		}
	}
	if err := x.resumeHandOvers(ctx, settled); err != nil {
		return nil, err
	}
	// The moves' hand-overs leave the deferred restores their room.
	hold := map[string]int{}
	for _, e := range deferred {
		hold[e.Service.Namespace]++
	}
	x.holdQuota(hold, 1)
	return func(ctx context.Context) error {
		x.holdQuota(hold, -1)
		for _, e := range deferred {
			if err := x.settleEntry(ctx, e, planned[e.Object+" "+e.Key], settled); err != nil {
				return err
			}
		}
		if err := x.resumeHandOvers(ctx, settled); err != nil {
			return err
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
	}, nil
}

// settleEntry restores one entry. No entry may fail every later apply: one that cannot be
// restored stays, with a warning, and the next plan shows it again. Only an ended ctx is an error.
func (x *executor) settleEntry(ctx context.Context, e JournalEntry, ips []string, settled map[string]bool) error {
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
	return nil
}

// quotaBound are the namespaces whose ResourceQuota, as last counted, has no room for the
// restores of Services that are gone there (one list of ResourceQuotas, only when there are).
func (x *executor) quotaBound(ctx context.Context, restore []Restore) map[string]bool {
	need := map[string]int{}
	for _, r := range restore {
		if x.services[r.Key] == nil {
			ns, _, _ := strings.Cut(r.Key, "/")
			need[ns]++
		}
	}
	short, err := ServiceQuotaShortfalls(ctx, x.c, need)
	if err != nil {
		x.log("restoring without knowing the quotas", map[string]any{"error": err.Error()})
	}
	out := map[string]bool{}
	for _, s := range short {
		out[s.Namespace] = true
	}
	return out
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
	api := x.c.Kube.CoreV1().Services(e.Service.Namespace)
	cur, err := api.Get(ctx, e.Service.Name, metav1.GetOptions{})
	if err == nil && deletingOld(cur, e) {
		// Held by a finalizer: its IPs and name are free only once it is gone.
		if err := waitDeleted(ctx, objectWatch(api.List, api.Watch, cur.Name), &corev1.Service{}, cur.UID); err != nil {
			return fmt.Errorf("restoring %s: waiting for the deletion of the old Service to finish (finalizers %v): %w", e.Key, cur.Finalizers, err)
		}
		cur, err = nil, apierrors.NewNotFound(corev1.Resource("services"), e.Service.Name)
	}
	if err == nil && handingOver(cur) {
		return x.queueResume(e, cur) // finished with the others by resumeHandOvers
	}
	switch {
	case apierrors.IsNotFound(err):
		// The Service first, then the bridge: a refused bridge must not keep the cluster DNS
		// Service deleted. The entry then stays, and the next apply creates the bridge.
		cur, err = x.createTakingOver(ctx, recreationCopy(&e.Service, ips), e.Key, creator(e.Owners, x.c.FieldManager))
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
	if bridgeDue(e, cur) {
		if ob := x.ensureOldIPBridge(ctx, e, x.currentSlices(e.Key)); ob.err != nil {
			return ob.err
		}
	}
	if e.Key == x.dnsKey {
		return x.ensureBridge(ctx, x.currentSlices(e.Key))
	}
	return nil
}

// handOverHelperLeft reports whether the carrier or the bridge that is not kept of e's
// hand-over, or the escort of its move by delete and create, still exists: a run cut off after
// the Service took its new IPs (while it waited for a sync or for the cached DNS answers to
// expire) left it, and only a run removes it.
func handOverHelperLeft(e JournalEntry, byKey map[string]*corev1.Service) bool {
	ns, name := e.Service.Namespace, e.Service.Name
	return byKey[ns+"/"+carrierName(ns, name, e.OldIPs)] != nil || byKey[ns+"/"+transientName(ns, name, e.OldIPs)] != nil ||
		byKey[ns+"/"+escortName(ns, name, e.OldIPs)] != nil
}

// planRestore turns the journal an interrupted apply left into Restores: a Service that is gone
// keeps its journaled target IP when still free and asks for a new placement otherwise; one
// that exists but lacks what its move took along, or whose hand-over left a helper, is settled
// at the IPs it has. Entries that are settled already need nothing: any apply removes them.
func (p *RecreationPlan) planRestore(snap Snapshot, byKey map[string]*corev1.Service, targets []netip.Prefix, dnsKey string,
	held *[]netip.Addr, reqs *[]k8sops.PlacementRequest) {
	newest := newestEntries(snap.Journal)
	bridges := standIns(snap.Services)
	for _, e := range snap.Journal {
		if newest[e.Key].Object != e.Object {
			continue // settled with the newer
		}
		// Restoring into a namespace being deleted fails on every apply, and would resurrect
		// what its owner is deleting.
		if going := snap.namespaceGoing(e.Service.Namespace); going != "" {
			p.Dropped[e.Key] = going
			continue
		}
		svc, exists := byKey[e.Key]
		if exists && deletingOld(svc, e) {
			exists = false // the Service the move deleted, held by a finalizer: restored once gone
		}
		if exists && handingOver(svc) {
			// Cut off mid-hand-over: its restore goes on from there, to the journaled IPs, which
			// no other move may be planned onto (its carrier may have let them go already).
			p.Restore = append(p.Restore, Restore{Key: e.Key, Journal: e.Object, NewIPs: slices.Clone(e.Service.Spec.ClusterIPs)})
			*held = append(*held, parseAddrs(e.Service.Spec.ClusterIPs)...)
			continue
		}
		if exists {
			// The cluster DNS Service moved, but its bridge was not created (refused, or the run
			// stopped): the entry holds its old IPs, and restoring it creates the bridge. A bridge
			// of an earlier migration, on other IPs, does not count.
			dnsBridgeDue := e.Key == dnsKey && dnsBridgeMissing(snap.Services, MovingIPs(e.OldIPs, ipStrings(k8sops.ClusterIPs(svc))))
			if dnsBridgeDue || bridgeMissing(e, byKey) || !journalSettled(e, svc, snap.Endpoints) || handOverHelperLeft(e, byKey) {
				p.Restore = append(p.Restore, Restore{Key: e.Key, Journal: e.Object, NewIPs: ipStrings(k8sops.ClusterIPs(svc))})
			}
			continue
		}
		r := Restore{Key: e.Key, Journal: e.Object, NewIPs: slices.Clone(e.Service.Spec.ClusterIPs)}
		for _, s := range r.NewIPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			// An IP held by the Service's own bridge is free for it: an interrupted way back
			// (ip_assignment = "previous") deleted the Service, not yet the bridge.
			taken := slices.Contains(*held, ip) && bridgeHolding(bridges, e.Key, ip) == nil
			if taken || !k8sops.ReadyHolds(snap.Ranges, ip) {
				if _, ok := k8sops.TargetFor(targets, ip); ok {
					*reqs = append(*reqs, k8sops.PlacementRequest{Key: "restore " + e.Key, Old: ip})
				}
				continue
			}
			*held = append(*held, ip)
		}
		p.Restore = append(p.Restore, r)
	}
	slices.SortFunc(p.Restore, func(a, b Restore) int { return strings.Compare(a.Key, b.Key) })
}

// dnsBridgeMissing reports whether ips, old IPs of the cluster DNS Service, need a DNS bridge
// that no DNS bridge among services is.
func dnsBridgeMissing(services []corev1.Service, ips []string) bool {
	return len(ips) > 0 && !slices.ContainsFunc(services, func(s corev1.Service) bool {
		return s.Labels[k8sops.DNSBridgeLabel] == "true" && holdsAll(&s, ips)
	})
}

// journalSettled reports whether a journal entry needs nothing more: its Service exists and is
// not being deleted, with the hand-made Endpoints it had. Entries with owned EndpointSlices
// always get their slices checked (they are rare, and a plan does not list slices).
func journalSettled(e JournalEntry, svc *corev1.Service, endpoints map[string]corev1.Endpoints) bool {
	if svc == nil || svc.DeletionTimestamp != nil || len(e.Slices) > 0 || handingOver(svc) {
		return false
	}
	_, ok := endpoints[e.Key]
	return e.Endpoints == nil || ok
}

// deletingOld reports whether svc is the Service a journaled move deleted, still there because a
// finalizer (a cloud load balancer's cleanup) holds it: being deleted, at the entry's old IPs.
// Once the finalizer completes it is gone, so the entry is restored, not settled. A copy at the
// new IPs that another client deletes is theirs to delete (never resurrected).
func deletingOld(svc *corev1.Service, e JournalEntry) bool {
	return svc.DeletionTimestamp != nil && len(e.OldIPs) > 0 && slices.Equal(ipStrings(k8sops.ClusterIPs(svc)), e.OldIPs)
}

// UnrestoredJournal names, sorted, the Services whose entries in journal (as ReadJournal read
// it) need a restore that the planned recreation p does not list: an apply of p would leave
// them, and a Service an interrupted apply deleted would stay deleted. Only when the journal
// holds entries p does not restore does it read what planRestore judges those by (their
// Services, Endpoints, old-IP bridges and namespaces, and the DNS bridge): for a plan the data
// source made it reads nothing.
func UnrestoredJournal(ctx context.Context, c *k8sops.Client, journal []JournalEntry, p PlannedRecreation) ([]string, error) {
	snap := Snapshot{Journal: journal}
	restoring := map[string]bool{}
	for _, r := range p.Restore {
		restoring[r.Key] = true
	}
	services, namespaces := map[string]bool{}, map[string]bool{}
	for _, e := range snap.Journal {
		if restoring[e.Key] {
			continue
		}
		services[e.Key] = true
		ns, _, _ := strings.Cut(e.Key, "/")
		namespaces[ns] = true
		if e.Bridge != nil {
			services[e.Bridge.Namespace+"/"+e.Bridge.Name] = true
		}
	}
	if len(services) == 0 {
		return nil, nil
	}
	var err error
	if snap.Services, err = getServices(ctx, c, slices.Collect(maps.Keys(services))...); err != nil {
		return nil, err
	}
	if err := addDNSBridges(ctx, c, &snap); err != nil {
		return nil, err
	}
	if err := readEndpoints(ctx, c, &snap); err != nil {
		return nil, err
	}
	// Listed, as TakeSnapshot does: the roles of examples/rbac may list namespaces, not get them.
	snap.Namespaces = map[string]corev1.NamespacePhase{}
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Namespaces().List), func(n *corev1.Namespace) error {
		if namespaces[n.Name] {
			snap.Namespaces[n.Name] = n.Status.Phase
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	byKey := map[string]*corev1.Service{}
	for i := range snap.Services {
		byKey[k8sops.SvcKey(&snap.Services[i])] = &snap.Services[i]
	}
	judged := RecreationPlan{Dropped: map[string]string{}}
	judged.planRestore(snap, byKey, k8sops.ParsePrefixes(p.TargetCIDRs), p.DNSService, &[]netip.Addr{}, &[]k8sops.PlacementRequest{})
	var out []string
	for _, r := range judged.Restore {
		if !restoring[r.Key] {
			out = append(out, r.Key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
