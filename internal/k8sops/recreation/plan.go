// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Planning k8scidr_service_recreation: which Services move, to which IPs, in which order, and
// which are skipped and why. Pure over a Snapshot, so plan and apply compute the same thing.
package recreation

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Defaults of k8scidr_service_recreation.
const (
	DefaultDNSBridgeName = "kube-dns-legacy"
	DefaultParallelism   = 10
	// DefaultJournalNamespace holds the journal alone: its ConfigMaps have generated names, so
	// only a namespace of their own lets a role grant their writes without granting writes to
	// every ConfigMap of kube-system (aws-auth, the Corefile) or of the cluster.
	DefaultJournalNamespace = "k8scidr-journal"
)

// lbCleanupFinalizer is the only finalizer Kubernetes itself puts on Services.
const lbCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// RecreationOptions are the inputs of k8scidr_service_recreation.
type RecreationOptions struct {
	TargetCIDRs          []string
	Namespaces           []string
	ExcludeNamespaces    []string
	Selector             string
	Exclude              []string
	IncludeLoadBalancers bool
	IncludeOwned         bool
	// IncludePinned are the Services ("ns/name") moved although a tool that applies its fields
	// again owns their clusterIP (k8sops.ClusterIPPinners): the user removed it from that tool's
	// source, which an Update's ownership does not show. The rest of those stay (Pinned).
	IncludePinned []string
	// First lists "ns/name" moved and verified before the rest; nil means the cluster DNS
	// Service where it exists. A listed Service that does not exist is an error.
	First        []string
	IPAssignment string
	// DNSService names the cluster DNS Service ("namespace/name"); "" finds it (FindClusterDNS).
	DNSService string
	// DNSBridge says the DNS bridge is on: the cluster DNS Service's old IPs stay (the bridge
	// takes them when it moves) and so does an existing bridge. Off, the bridge goes in the
	// same apply, and its keep-range with it.
	DNSBridge bool
}

// Snapshot is what planning reads from the cluster: one list per kind.
type Snapshot struct {
	Services []corev1.Service
	// Endpoints are the hand-made Endpoints of selector-less Services, by "ns/name".
	Endpoints map[string]corev1.Endpoints
	// Pinners are the tools that apply a Service's clusterIP again (k8sops.ClusterIPPinners), by
	// "ns/name", read from the managedFields a plan's snapshot does not keep.
	Pinners map[string][]string
	// Held are the addresses allocated now: IPAddress objects.
	Held []netip.Addr
	// Ranges are the ServiceCIDRs.
	Ranges []k8sops.ServiceCIDR
	// Journal holds the entries an interrupted apply left.
	Journal []JournalEntry
	// NodeLocalDNS reports a NodeLocal DNSCache DaemonSet, which binds kube-dns's IP on nodes.
	NodeLocalDNS bool
	// KubeletClusterDNS is clusterDNS of kubeadm's kube-system/kubelet-config, nil without it;
	// KubeletConfigUnread says why it could not be read.
	KubeletClusterDNS   []string
	KubeletConfigUnread string
	// Namespaces are the namespaces with their phase; nil when not read (then none counts as
	// gone or Terminating).
	Namespaces map[string]corev1.NamespacePhase
	// endpointsSeed is every Endpoints as an apply's snapshot listed them, the endpoints
	// controller's as their name alone, with the list's resourceVersion: the run's Endpoints
	// watch starts from it instead of listing them all again. nil: the watch lists.
	endpointsSeed *corev1.EndpointsList
}

// namespaceGoing says why a namespace can hold no new Service, or "": it is being deleted, or gone.
func (s Snapshot) namespaceGoing(ns string) string {
	if s.Namespaces == nil {
		return ""
	}
	switch phase, ok := s.Namespaces[ns]; {
	case !ok:
		return fmt.Sprintf("its namespace %s is gone", ns)
	case phase == corev1.NamespaceTerminating:
		return fmt.Sprintf("its namespace %s is being deleted", ns)
	}
	return ""
}

// dnsHints are what the snapshot knows of the cluster DNS Service, with the one the user named.
func (s Snapshot) dnsHints(named string) ClusterDNSHints {
	return ClusterDNSHints{Named: named, KubeletClusterDNS: s.KubeletClusterDNS, KubeletConfigUnread: s.KubeletConfigUnread}
}

// Move is one Service to recreate: the object planned from (UID, type) and its whole
// spec.clusterIPs before and after, in order; an IP already inside the target stays.
type Move struct {
	Key            string
	UID            string
	Type           string
	OldIPs, NewIPs []string
}

// Restore is a journal entry an interrupted apply left: a missing Service is recreated at
// NewIPs before anything else moves; an existing one (NewIPs are then its IPs) gets back what
// its move took along. Either way its journal object is removed once settled.
type Restore struct {
	Key     string
	NewIPs  []string
	Journal string // the journal object holding it
}

// RecreationPlan is what the moves data source reports: the Services to move, in order (First
// of them first), the journal entries to restore, and what is skipped and why.
type RecreationPlan struct {
	Restore []Restore
	Moves   []Move
	// First are the keys of Moves moved and verified before the rest, in order.
	First   []string
	Skipped map[string]string
	// Refused are the Services, among Skipped, whose recreation admission would refuse
	// (PlanAdmission), with what it answered: they stay in the old range.
	Refused map[string]string
	// Pinned are the Services, among Skipped, whose clusterIP a tool applies again (moved, the
	// tool's next sync would fail or put them back at the old IP), with the tools.
	Pinned map[string]string
	// DNSService is the cluster DNS Service ("" when the cluster has none); DNSIPs its
	// ClusterIPs once the plan is carried out; DNSMovedAt the time it got its current IPs (its
	// creation, or its hand-over: k8sops.MovedAt), zero when it does not exist.
	DNSService string
	DNSIPs     []string
	DNSMovedAt time.Time
	// Warnings hold what may be fixed by another resource in the same apply (a ServiceCIDR
	// created with this one): warnings at plan, errors at apply.
	Warnings []k8sops.Finding
	// Notes are plain warnings (addon managers, NodeLocal DNSCache).
	Notes []string
	// WayBack are the warnings of ip_assignment = "previous": the bridges taken over, and the
	// Services that cannot go back to the IPs they had.
	WayBack []string
	// OldIPBridges are the old-IP bridges in the cluster (of any recreation).
	OldIPBridges []OldIPBridge
	// Staying are the IPs outside the target that stay: skipped LoadBalancers, the DNS bridge and,
	// with the DNS bridge on, the cluster DNS Service's old IPs, which its bridge takes.
	// KeepCovering are the ranges that keep them valid once the old range goes.
	Staying      []netip.Addr
	KeepCovering []netip.Prefix
	// Errors are plan-time errors.
	Errors []k8sops.Finding
	// Dropped are journal entries that are not restored, by key, with the reason: their
	// namespace is being deleted or gone. The next apply removes them.
	Dropped map[string]string
}

// PlanRecreation computes the plan from a snapshot. It never reads the cluster.
func PlanRecreation(snap Snapshot, o RecreationOptions) RecreationPlan {
	p := RecreationPlan{Skipped: map[string]string{}, Dropped: map[string]string{}}
	targets, ok := p.checkTargets(o)
	if !ok {
		return p
	}
	sel := labels.Everything()
	if o.Selector != "" {
		s, err := labels.Parse(o.Selector)
		if err != nil {
			p.Errors = append(p.Errors, k8sops.Finding{Path: k8sops.At("selector"), Summary: "Invalid Label Selector", Detail: err.Error()})
			return p
		}
		sel = s
	}
	byKey := map[string]*corev1.Service{}
	for i := range snap.Services {
		byKey[k8sops.SvcKey(&snap.Services[i])] = &snap.Services[i]
	}
	dns := FindClusterDNS(snap.Services, snap.Journal, snap.dnsHints(o.DNSService))
	if len(dns.Errors) > 0 {
		p.Errors = append(p.Errors, dns.Errors...)
		return p
	}
	p.Notes = append(p.Notes, dns.Notes...)
	first := o.First
	if first == nil {
		if _, ok := byKey[dns.Key]; ok {
			first = []string{dns.Key}
		}
	}
	for i, k := range first {
		if _, ok := byKey[k]; !ok {
			p.Errors = append(p.Errors, k8sops.Finding{Path: k8sops.At("first").Index(i), Summary: "Service In first Does Not Exist",
				Detail: fmt.Sprintf("%q is not a Service in the cluster. List existing Services as namespace/name, or remove it.", k)})
		}
	}
	cands := p.candidates(snap, o, targets, sel)
	rank := func(key string) int {
		if i := slices.Index(first, key); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if ra, rb := rank(k8sops.SvcKey(a.svc)), rank(k8sops.SvcKey(b.svc)); ra != rb {
			return ra - rb
		}
		if c := a.oldIPs[0].Compare(b.oldIPs[0]); c != 0 {
			return c
		}
		return strings.Compare(k8sops.SvcKey(a.svc), k8sops.SvcKey(b.svc))
	})

	held := slices.Clone(snap.Held)
	var reqs []k8sops.PlacementRequest
	p.planRestore(snap, byKey, targets, dns.Key, &held, &reqs)
	mode := o.IPAssignment
	var placed []k8sops.Placement
	if mode == k8sops.Previous {
		placed = p.previousIPs(snap, cands, targets, &held)
		mode = k8sops.PreserveOffset // for the addresses with no previous IP to go back to
	}
	for _, c := range cands {
		for _, ip := range c.oldIPs {
			back := slices.ContainsFunc(placed, func(pl k8sops.Placement) bool { return pl.Key == k8sops.SvcKey(c.svc) && pl.Old == ip })
			if _, ok := k8sops.TargetFor(targets, ip); ok && !k8sops.InAny(targets, ip) && !back {
				reqs = append(reqs, k8sops.PlacementRequest{Key: k8sops.SvcKey(c.svc), Old: ip})
			}
		}
	}
	rest, err := k8sops.AssignIPs(mode, targets, rangePrefixes(snap.Ranges), reqs, held)
	if err != nil {
		p.Errors = append(p.Errors, k8sops.Finding{Path: k8sops.At("target_cidrs"), Summary: "Target Ranges Cannot Hold the Services",
			Detail: err.Error() + ". Use larger target_cidrs, or narrow the scope."})
		return p
	}
	placed = append(placed, rest...)
	newIP := map[string]map[netip.Addr]netip.Addr{}
	for _, pl := range placed {
		if newIP[pl.Key] == nil {
			newIP[pl.Key] = map[netip.Addr]netip.Addr{}
		}
		newIP[pl.Key][pl.Old] = pl.New
	}
	for i := range p.Restore {
		r := &p.Restore[i]
		for j, s := range r.NewIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				if n, ok := newIP["restore "+r.Key][ip]; ok {
					r.NewIPs[j] = n.String()
				}
			}
		}
	}
	for _, c := range cands {
		m := Move{Key: k8sops.SvcKey(c.svc), UID: string(c.svc.UID), Type: serviceType(c.svc)}
		for _, ip := range c.oldIPs {
			m.OldIPs = append(m.OldIPs, ip.String())
			if n, ok := newIP[m.Key][ip]; ok {
				ip = n
			}
			m.NewIPs = append(m.NewIPs, ip.String())
		}
		if rank(m.Key) < len(first) {
			p.First = append(p.First, m.Key)
		}
		p.Moves = append(p.Moves, m)
	}
	p.Errors = append(p.Errors, tooLargeToJournal(snap, byKey, p.Moves)...)
	p.planDNS(snap, byKey, dns.Key)
	if i := slices.IndexFunc(p.Moves, func(m Move) bool { return m.Key == p.DNSService }); i >= 0 && o.DNSBridge {
		// The bridge keeps the IPs that move; a family without a target stays in its own range.
		for _, ip := range outsideAll(targets, p.Moves[i].OldIPs) {
			if _, moves := k8sops.TargetFor(targets, ip); moves {
				p.Staying = append(p.Staying, ip)
			}
		}
	}
	p.OldIPBridges = OldIPBridgesIn(snap.Services, "")
	slices.SortFunc(p.Staying, netip.Addr.Compare)
	if cover, err := k8sops.CoveringSet(p.Staying); err == nil {
		p.KeepCovering = cover
	}
	return p
}

// previousIPs places the candidates' addresses back on the IPs their Services had before they
// last moved (PreviousClusterIPsAnnotation), where that IP is in the target and free, or held
// by a bridge standing in for that Service (the move deletes it right before the create). The
// addresses it cannot place so are reported in WayBack and left to the caller; those it places
// join held.
func (p *RecreationPlan) previousIPs(snap Snapshot, cands []candidate, targets []netip.Prefix, held *[]netip.Addr) []k8sops.Placement {
	var out []k8sops.Placement
	var unrecorded, blocked, takeovers []string
	bridges := standIns(snap.Services)
	for _, c := range cands {
		key := k8sops.SvcKey(c.svc)
		prev := parseAddrs(strings.Split(c.svc.Annotations[k8sops.PreviousClusterIPsAnnotation], ","))
		for _, ip := range c.oldIPs {
			if _, ok := k8sops.TargetFor(targets, ip); !ok || k8sops.InAny(targets, ip) {
				continue
			}
			i := slices.IndexFunc(prev, func(a netip.Addr) bool { return a.Is4() == ip.Is4() && k8sops.InAny(targets, a) })
			if i < 0 {
				unrecorded = append(unrecorded, fmt.Sprintf("%s (%s)", key, ip))
				continue
			}
			back := prev[i]
			bridge := bridgeHolding(bridges, key, back)
			if _, bad := unusableTargetIP(targets, back); bad || (slices.Contains(*held, back) && bridge == nil) {
				blocked = append(blocked, fmt.Sprintf("%s (%s)", key, back))
				continue
			}
			if bridge != nil {
				takeovers = append(takeovers, fmt.Sprintf("%s on %s (bridge %s)", key, back, k8sops.SvcKey(bridge)))
			}
			*held = append(*held, back)
			out = append(out, k8sops.Placement{Key: key, Old: ip, New: back})
		}
	}
	if len(takeovers) > 0 {
		p.WayBack = append(p.WayBack, fmt.Sprintf("Going back to IPs their own bridges hold now (%d): %s. Each move deletes "+
			"its bridge right before it creates the Service there.", len(takeovers), k8sops.FirstOf(takeovers)))
	}
	if len(unrecorded) > 0 {
		p.WayBack = append(p.WayBack, fmt.Sprintf("No earlier IP inside %v recorded (annotation %s), so placed as "+
			"preserve_offset places them (%d): %s.", targets, k8sops.PreviousClusterIPsAnnotation, len(unrecorded),
			k8sops.FirstOf(unrecorded)))
	}
	if len(blocked) > 0 {
		p.WayBack = append(p.WayBack, fmt.Sprintf("Not going back: the earlier IP is held by another Service now, or no "+
			"Service may have it, so placed as preserve_offset places them (%d): %s.", len(blocked), k8sops.FirstOf(blocked)))
	}
	return out
}

// bridgeHolding is the bridge among bridges (standIns) standing in for Service key
// (k8sops.StandsInFor) that holds ip, nil when none does.
func bridgeHolding(bridges []*corev1.Service, key string, ip netip.Addr) *corev1.Service {
	for _, b := range bridges {
		if k8sops.StandsInFor(b, key) && slices.Contains(k8sops.ClusterIPs(b), ip) {
			return b
		}
	}
	return nil
}

// standIns are the Services that may stand in for another (DNS and old-IP bridges): a few among
// thousands, collected once rather than looked for among all the Services for each planned IP.
func standIns(services []corev1.Service) []*corev1.Service {
	var out []*corev1.Service
	for i := range services {
		if b := &services[i]; b.Labels[k8sops.DNSBridgeLabel] == "true" || b.Labels[k8sops.OldIPBridgeLabel] == "true" {
			out = append(out, b)
		}
	}
	return out
}

type candidate struct {
	svc    *corev1.Service
	oldIPs []netip.Addr
}

// candidates are the Services that move, unordered; the others are recorded as skipped or staying.
func (p *RecreationPlan) candidates(snap Snapshot, o RecreationOptions, targets []netip.Prefix, sel labels.Selector) []candidate {
	var cands []candidate
	for i := range snap.Services {
		svc := &snap.Services[i]
		ips := k8sops.ClusterIPs(svc)
		outside := slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return k8sops.InAny(targets, ip) })
		// An IP moves when the target has a range of its family and it is not inside it yet.
		movable := slices.ContainsFunc(outside, func(ip netip.Addr) bool { _, ok := k8sops.TargetFor(targets, ip); return ok })
		if k8sops.IsBridge(svc) { // never moved, and not a Service the user asked about
			// The apiserver bridge's IPs are kept by k8scidr_apiserver_service's own keep-range.
			// Old-IP bridges get none: a keep-range is Ready, and new Services would get IPs in
			// the old range there; theirs hold the retired old range (Terminating) until they go.
			if (o.DNSBridge || svc.Labels[k8sops.DNSBridgeLabel] != "true") && svc.Labels[k8sops.APIServerBridgeLabel] == "" &&
				svc.Labels[k8sops.OldIPBridgeLabel] != "true" {
				p.Staying = append(p.Staying, outside...)
			}
			continue
		}
		reason := skipReason(svc, ips, o, sel)
		if going := snap.namespaceGoing(svc.Namespace); reason == "" && going != "" {
			reason = going
		}
		if !movable && (reason == "" || reason == skipOutOfScope) {
			continue // in the target already, or of a family the migration does not move
		}
		if reason == "" {
			reason = p.pinned(svc, snap.Pinners[k8sops.SvcKey(svc)], o)
		}
		if reason != "" {
			p.Skipped[k8sops.SvcKey(svc)] = reason
			if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
				p.Staying = append(p.Staying, outside...)
			}
			continue
		}
		cands = append(cands, candidate{svc, ips})
	}
	return cands
}

// pinned says why svc, which would move, stays because pinners, tools that apply its clusterIP
// again, own it (recorded in Pinned too), "" when none does or the user listed it in
// IncludePinned. Moved, its tool's next sync fails (clusterIP is immutable) or, where it
// replaces on conflict, puts the Service back at its old IP.
func (p *RecreationPlan) pinned(svc *corev1.Service, pinners []string, o RecreationOptions) string {
	key := k8sops.SvcKey(svc)
	if svc.Labels[k8sops.KopsAddonLabel] != "" || svc.Labels[k8sops.AddonModeLabel] == k8sops.AddonReconciled {
		return "" // an addon's template: the plan's notes say what to change there (planDNS)
	}
	if len(pinners) == 0 || slices.Contains(o.IncludePinned, key) {
		return ""
	}
	why := fmt.Sprintf("clusterIP pinned: %s sets spec.clusterIP and applies it again, so after the move its next sync "+
		"would fail (clusterIP is immutable) or put the Service back at its old IP. Remove clusterIP from what it applies, "+
		"then list the Service in include_pinned", strings.Join(pinners, ", "))
	if p.Pinned == nil {
		p.Pinned = map[string]string{}
	}
	p.Pinned[key] = "spec.clusterIP set by " + strings.Join(pinners, ", ")
	return why
}

// planDNS reports the cluster DNS Service: its IPs after the plan, when it got its current
// ones, and what outside the API pins its IP.
func (p *RecreationPlan) planDNS(snap Snapshot, byKey map[string]*corev1.Service, key string) {
	if key == "" {
		return
	}
	dns := byKey[key]
	restored := slices.ContainsFunc(p.Restore, func(r Restore) bool { return r.Key == key })
	if dns == nil && !restored {
		return
	}
	p.DNSService = key
	i := slices.IndexFunc(p.Moves, func(m Move) bool { return m.Key == key })
	switch {
	case i >= 0:
		p.DNSIPs = p.Moves[i].NewIPs
	case dns != nil:
		p.DNSIPs = ipStrings(k8sops.ClusterIPs(dns))
	default:
		p.DNSIPs = p.Restore[slices.IndexFunc(p.Restore, func(r Restore) bool { return r.Key == key })].NewIPs
	}
	if dns != nil {
		p.DNSMovedAt = k8sops.MovedAt(dns)
	}
	if i < 0 && !restored {
		return
	}
	if dns == nil {
		dns = journaledDNS(snap.Journal, key)
	}
	if _, pinned := dns.Labels[k8sops.KopsAddonLabel]; pinned {
		p.Notes = append(p.Notes, key+" is managed by a kOps addon whose template pins its clusterIP: set the kOps "+
			"cluster spec's kubeDNS.serverIP to the new IP before the addon manager next applies, or it recreates the old IP.")
	} else if dns.Labels[k8sops.AddonModeLabel] == k8sops.AddonReconciled {
		p.Notes = append(p.Notes, key+" is reconciled by the addon manager: change the clusterIP in its addon manifest too.")
	}
	if snap.NodeLocalDNS {
		p.Notes = append(p.Notes, "NodeLocal DNSCache runs in this cluster and forwards to "+key+"'s IP: update its "+
			"configuration (the __PILLAR__ upstream / kube-dns IP) to the new IP.")
	}
}

// outsideAll are the addresses of ips in none of targets.
func outsideAll(targets []netip.Prefix, ips []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil && !k8sops.InAny(targets, ip) {
			out = append(out, ip)
		}
	}
	return out
}

// serviceType is a Service's type as the API defaults it.
func serviceType(svc *corev1.Service) string {
	if svc.Spec.Type == "" {
		return string(corev1.ServiceTypeClusterIP)
	}
	return string(svc.Spec.Type)
}

// checkTargets validates target_cidrs and ip_assignment.
func (p *RecreationPlan) checkTargets(o RecreationOptions) ([]netip.Prefix, bool) {
	if len(o.TargetCIDRs) == 0 {
		p.Errors = append(p.Errors, k8sops.Finding{Path: k8sops.At("target_cidrs"), Summary: "No Target Range",
			Detail: "Set target_cidrs to the new Service range(s), e.g. k8scidr_service_cidr.new.cidrs."})
		return nil, false
	}
	p.Errors = append(p.Errors, k8sops.ValidateServiceCIDRs(k8sops.At("target_cidrs"), o.TargetCIDRs)...)
	if o.IPAssignment != k8sops.PreserveOffset && o.IPAssignment != k8sops.NextFree && o.IPAssignment != k8sops.Previous {
		p.Errors = append(p.Errors, k8sops.Finding{Path: k8sops.At("ip_assignment"), Summary: "Unknown IP Assignment",
			Detail: fmt.Sprintf("%q: use %s, %s or %s.", o.IPAssignment, k8sops.PreserveOffset, k8sops.NextFree, k8sops.Previous)})
	}
	if len(p.Errors) > 0 {
		return nil, false
	}
	// A target no Ready ServiceCIDR serves yet is not warned of here: the configuration usually
	// creates it in the same run, which this plan, read before any resource, cannot see. The
	// recreation's plan, which counts the ranges the run creates, warns of what none serves.
	return k8sops.ParsePrefixes(o.TargetCIDRs), true
}

// servedByReady reports whether a Ready ServiceCIDR contains the whole prefix.
func servedByReady(ranges []k8sops.ServiceCIDR, t netip.Prefix) bool {
	for _, r := range ranges {
		if !r.Ready || r.Terminating {
			continue
		}
		for _, c := range k8sops.ParsePrefixes(r.CIDRs) {
			if c.Bits() <= t.Bits() && c.Contains(t.Addr()) {
				return true
			}
		}
	}
	return false
}

const skipOutOfScope = "out of scope"

// skipReason says why a Service is not moved, or "" when it is.
func skipReason(svc *corev1.Service, ips []netip.Addr, o RecreationOptions, sel labels.Selector) string {
	key := k8sops.SvcKey(svc)
	switch {
	case len(o.Namespaces) > 0 && !slices.Contains(o.Namespaces, svc.Namespace),
		slices.Contains(o.ExcludeNamespaces, svc.Namespace),
		slices.Contains(o.Exclude, key),
		!sel.Matches(labels.Set(svc.Labels)):
		return skipOutOfScope
	case handingOver(svc):
		return "mid-move: an interrupted apply's hand-over, which the restore finishes"
	case svc.Labels[HandOverLabel] != "":
		return "made by a move's hand-over (" + svc.Labels[HandOverLabel] + "), removed by it"
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "ExternalName: has no ClusterIP"
	case len(ips) == 0:
		return "headless: has no ClusterIP"
	case svc.DeletionTimestamp != nil:
		return "being deleted"
	case key == "default/kubernetes":
		return "owned by the apiserver: k8scidr_apiserver_service moves it once kube-apiserver serves the new range"
	case svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !o.IncludeLoadBalancers:
		return "LoadBalancer: recreating it replaces the cloud load balancer and its address; set include_load_balancers to move it, or keep its IP in a k8scidr_service_cidr"
	}
	if ref := metav1.GetControllerOf(svc); ref != nil && !o.IncludeOwned {
		return fmt.Sprintf("owned by %s %s, which would recreate it; set include_owned to move it", ref.Kind, ref.Name)
	}
	for _, f := range svc.Finalizers {
		if f != lbCleanupFinalizer {
			return fmt.Sprintf("carries finalizer %s, whose controller acts on deletion", f)
		}
	}
	return ""
}

// recreationCopy is the Service to create in place of svc: the whole object but the deny-list
// (server-set metadata, system finalizers, status), with spec.clusterIP(s) set to ips.
func recreationCopy(svc *corev1.Service, ips []string) *corev1.Service {
	out := svc.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{}
	clearServerFields(&out.ObjectMeta)
	out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool { return f == lbCleanupFinalizer })
	delete(out.Annotations, k8sops.MovedAtAnnotation) // a recreated Service's creation is its move
	out.Status = corev1.ServiceStatus{}
	out.Spec.ClusterIPs = slices.Clone(ips)
	out.Spec.ClusterIP = ips[0]
	return out
}

// movedCopy is recreationCopy of svc at ips that remembers the IPs svc has now
// (PreviousClusterIPsAnnotation), for a way back with ip_assignment = "previous".
func movedCopy(svc *corev1.Service, ips []string) *corev1.Service {
	out := recreationCopy(svc, ips)
	if prev := svc.Spec.ClusterIPs; len(prev) > 0 && !slices.Equal(prev, ips) {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k8sops.PreviousClusterIPsAnnotation] = strings.Join(prev, ",")
	}
	return out
}

func rangePrefixes(ranges []k8sops.ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range ranges {
		out = append(out, k8sops.ParsePrefixes(r.CIDRs)...)
	}
	return out
}
