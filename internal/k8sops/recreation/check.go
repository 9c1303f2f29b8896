// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Checking a reviewed recreation plan before apply: static checks that catch hand edits, and
// the live re-check of every planned move, so apply does exactly what the plan showed and
// reports what no longer holds.
package recreation

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// PlannedRecreation is what k8scidr_service_recreation holds: the moves and restores a
// reviewed plan showed (from the moves data source), in the order First gives.
type PlannedRecreation struct {
	TargetCIDRs []string
	Moves       []Move
	Restore     []Restore
	// First are the keys moved and verified before the rest, in order; the cluster DNS Service
	// is normally the first of them.
	First []string
	// DNSService is the cluster DNS Service, "" for none: its move brings the DNS bridge.
	DNSService string
	// DNSBridge is whether the DNS bridge is on; DNSBridgeOffReason is the user's statement of
	// why the cluster DNS Service may move without it (required to move it with the bridge off).
	DNSBridge          bool
	DNSBridgeOffReason string
}

// BridgeOptions are the bridge settings of k8scidr_service_recreation.
type BridgeOptions struct {
	// Enabled and Name are the DNS bridge's (dns_bridge, dns_bridge_name).
	Enabled bool
	Name    string
	// OldIPs is old_ip_bridges (BridgesDNS or BridgesAll); Group the journal group the old-IP
	// bridges are labelled with.
	OldIPs string
	Group  string
	// RemoveOldIPs are the old-IP bridges (namespace/name) the plan removes.
	RemoveOldIPs []string
}

func (o BridgeOptions) name() string {
	if o.Name == "" {
		return DefaultDNSBridgeName
	}
	return o.Name
}

// ValidatePlanned finds, without reading the cluster, what would cause an outage or what no
// moves data source produces (hand edits): the cluster DNS Service moving without its bridge,
// IPs outside the target, on a target's network, broadcast or first address, IP lists that do
// not pair up, an IP planned twice, and a first move that is not a move.
func ValidatePlanned(p PlannedRecreation) []k8sops.Finding {
	out := k8sops.ValidateServiceCIDRs(k8sops.At("target_cidrs"), p.TargetCIDRs)
	if len(out) > 0 {
		return out
	}
	out = append(out, p.dnsWithoutBridge()...)
	targets := k8sops.ParsePrefixes(p.TargetCIDRs)
	claimed := map[netip.Addr]string{}
	claim := func(at k8sops.Path, key string, ip netip.Addr) {
		if other, dup := claimed[ip]; dup {
			out = append(out, k8sops.Finding{Path: at, Summary: "IP Planned Twice", Detail: fmt.Sprintf("%s is planned for both %s and %s. Use the moves "+
				"data source's values unchanged.", ip, other, key)})
			return
		}
		claimed[ip] = key
	}
	for _, m := range p.Moves {
		at := k8sops.At("moves").Key(m.Key)
		if !namespacedName(m.Key) {
			out = append(out, k8sops.Finding{Path: at, Summary: "Invalid Service Key", Detail: fmt.Sprintf("%q: use namespace/name.", m.Key)})
		}
		if len(m.OldIPs) == 0 || len(m.OldIPs) != len(m.NewIPs) {
			out = append(out, k8sops.Finding{Path: at, Summary: "IPs Do Not Pair Up",
				Detail: fmt.Sprintf("old IPs %v and new IPs %v must list the same number of IPs, one per family, in order.", m.OldIPs, m.NewIPs)})
			continue
		}
		for i := range m.NewIPs {
			oldIP, errOld := netip.ParseAddr(m.OldIPs[i])
			newIP, errNew := netip.ParseAddr(m.NewIPs[i])
			switch {
			case errOld != nil || errNew != nil:
				out = append(out, k8sops.Finding{Path: at, Summary: "Invalid IP", Detail: fmt.Sprintf("%q → %q is not a pair of IP addresses.", m.OldIPs[i], m.NewIPs[i])})
			case oldIP.Is4() != newIP.Is4():
				out = append(out, k8sops.Finding{Path: at, Summary: "IP Family Changes", Detail: fmt.Sprintf("%s → %s: a move keeps each IP's family.", oldIP, newIP)})
			case oldIP == newIP:
				// an IP that stays (already in the target, or of a family not moved)
			default:
				if f, bad := unusableTargetIP(targets, newIP); bad {
					out = append(out, k8sops.Finding{Path: at, Summary: f.Summary, Detail: f.Detail})
					continue
				}
				claim(at, m.Key, newIP)
			}
		}
	}
	for i, key := range p.First {
		if !slices.ContainsFunc(p.Moves, func(m Move) bool { return m.Key == key }) {
			out = append(out, k8sops.Finding{Path: k8sops.At("first").Index(i), Summary: "First Move Not Among the Moves",
				Detail: fmt.Sprintf("%q is to move first, but moves does not hold it: the apply would move it nowhere, and move the rest "+
					"without it first. Use the moves data source's values unchanged.", key)})
		}
	}
	for _, r := range p.Restore {
		at := k8sops.At("restore").Key(r.Key)
		for i, s := range r.NewIPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				out = append(out, k8sops.Finding{Path: at.Attr("new_ips").Index(i), Summary: "Invalid IP", Detail: fmt.Sprintf("%q is not an IP address.", s)})
				continue
			}
			if t, ok := k8sops.TargetFor(targets, ip); ok && t.Contains(ip) && !k8sops.Allocatable(t, ip) {
				out = append(out, k8sops.Finding{Path: at.Attr("new_ips").Index(i), Summary: "Unallocatable IP", Detail: fmt.Sprintf("%s is %s's network or "+
					"broadcast address, which no Service can have.", ip, t)})
				continue
			}
			claim(at.Attr("new_ips").Index(i), r.Key, ip)
		}
	}
	return out
}

// dnsWithoutBridge refuses to move (or restore at its new IP) the cluster DNS Service with
// the DNS bridge off and no stated reason: every pod's resolver and every kubelet's clusterDNS
// still name the old IP, and nothing would answer there.
func (p PlannedRecreation) dnsWithoutBridge() []k8sops.Finding {
	if p.DNSService == "" || p.DNSBridge || strings.TrimSpace(p.DNSBridgeOffReason) != "" {
		return nil
	}
	moves := slices.ContainsFunc(p.Moves, func(m Move) bool { return m.Key == p.DNSService && !slices.Equal(m.OldIPs, m.NewIPs) }) ||
		slices.ContainsFunc(p.Restore, func(r Restore) bool { return r.Key == p.DNSService })
	if !moves {
		return nil
	}
	return []k8sops.Finding{{Path: k8sops.At("dns_bridge"), Summary: "Cluster DNS Would Move Without Its Bridge", Detail: fmt.Sprintf("This plan moves %s, the "+
		"cluster DNS Service, with dns_bridge = false: every running pod's resolver and every kubelet's clusterDNS still name "+
		"its old IP, and nothing would answer there until they are all reconfigured and restarted. Leave dns_bridge on (the "+
		"default) on the k8scidr_service_moves data source: a bridge Service keeps the old IP answering until you switch it "+
		"off. If nothing resolves through the old IP (e.g. every node runs NodeLocal DNSCache on its own address), say so "+
		"in dns_bridge_off_reason.", p.DNSService)}}
}

// unusableTargetIP says why ip cannot be a moved Service's new IP: outside every target, or a
// target's network, broadcast or first address (kept for default/kubernetes).
func unusableTargetIP(targets []netip.Prefix, ip netip.Addr) (k8sops.Finding, bool) {
	t, ok := k8sops.TargetFor(targets, ip)
	switch {
	case !ok || !t.Contains(ip):
		return k8sops.Finding{Summary: "IP Outside the Target", Detail: fmt.Sprintf("%s is in none of target_cidrs %v. Use the moves "+
			"data source's values unchanged, with the same target_cidrs.", ip, targets)}, true
	case !k8sops.Allocatable(t, ip):
		return k8sops.Finding{Summary: "Unallocatable IP", Detail: fmt.Sprintf("%s is %s's network or broadcast address, which no "+
			"Service can have.", ip, t)}, true
	case ip == t.Masked().Addr().Next():
		return k8sops.Finding{Summary: "Reserved IP", Detail: fmt.Sprintf("%s is %s's first address, kept for default/kubernetes "+
			"once --service-cluster-ip-range moves.", ip, t)}, true
	}
	return k8sops.Finding{}, false
}

func namespacedName(key string) bool {
	ns, name, ok := strings.Cut(key, "/")
	return ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// RecreationSteps is a planned recreation checked against the cluster: what apply does, in
// order: Restore, then Moves[:First] (verified), the DNS bridge right after the DNS Service,
// the rest of Moves, then the bridge removal.
type RecreationSteps struct {
	Restore    []Restore
	Moves      []Move
	First      int
	DNSService string
	// Targets are target_cidrs: an IP taken mid-apply is replaced by a free one inside them.
	Targets []netip.Prefix
	Bridge  *corev1.Service
	// RemoveBridges are the DNS bridges (namespace/name) dns_bridge = false removes: every one
	// beside the DNS Service, one per migration that moved it.
	RemoveBridges []string
	// OldIPBridges are the old-IP bridges to create, by the key of the move that brings each;
	// RemoveOldIPBridges the existing ones (namespace/name) to delete.
	OldIPBridges       map[string]*corev1.Service
	RemoveOldIPBridges []string
	// TakeOver are the bridges (DNS or old-IP) holding IPs a move or restore goes back to, by
	// the key of the Service they stand in for: deleted (UID precondition) right before its
	// create, since the Service answers on those IPs again itself.
	TakeOver map[string][]*corev1.Service
	// Settled are the journal entries ("object key") that need nothing more: their objects go
	// once every entry is settled or restored.
	Settled map[string]bool
	// Unplanned are the Services with a journal entry that is neither settled nor planned for
	// restore: an apply interrupted after the plan, or a data source reading another journal.
	// They stay for the next plan.
	Unplanned []string
	// NotMoved are the planned moves and restores that no longer hold, with the reason.
	NotMoved map[string]string
}

// PrepareRecreation checks a planned recreation against snap, read at the start of the apply.
// Each move must still hold: the same object (UID, type), at the planned old IPs, its planned
// IPs free. One that does not is left out and reported in NotMoved; the errors (returned as
// findings, nothing touched yet) are what make the whole apply unsafe: a target or bridge IP
// no Ready range serves, the bridge name taken, or a first move (the DNS Service's) that no
// longer holds, since kubelets are configured with the IP the plan showed.
func PrepareRecreation(snap Snapshot, p PlannedRecreation, o BridgeOptions) (RecreationSteps, []k8sops.Finding) {
	s := RecreationSteps{NotMoved: map[string]string{}, DNSService: p.DNSService}
	byKey := map[string]*corev1.Service{}
	for i := range snap.Services {
		byKey[k8sops.SvcKey(&snap.Services[i])] = &snap.Services[i]
	}
	held := map[netip.Addr]bool{}
	for _, ip := range snap.Held {
		held[ip] = true
	}
	targets := k8sops.ParsePrefixes(p.TargetCIDRs)
	s.Targets = targets
	var errs []k8sops.Finding
	s.TakeOver = map[string][]*corev1.Service{}
	bridges := standIns(snap.Services)
	takeOver := func(key string, ips []string) map[netip.Addr]bool {
		own := map[netip.Addr]bool{}
		for _, ip := range parseAddrs(ips) {
			if b := bridgeHolding(bridges, key, ip); b != nil {
				own[ip] = true
				if !slices.Contains(s.TakeOver[key], b) {
					s.TakeOver[key] = append(s.TakeOver[key], b)
				}
			}
		}
		return own
	}
	for _, m := range p.Moves {
		own := takeOver(m.Key, m.NewIPs)
		reason := moveHolds(byKey[m.Key], m, targets, func(ip netip.Addr) bool { return held[ip] && !own[ip] })
		if going := snap.namespaceGoing(strings.SplitN(m.Key, "/", 2)[0]); reason == "" && going != "" {
			reason = going
		}
		if reason == "" {
			s.Moves = append(s.Moves, m)
			continue
		}
		delete(s.TakeOver, m.Key)
		s.NotMoved[m.Key] = reason
		if (slices.Contains(p.First, m.Key) || m.Key == p.DNSService) && reason != reasonAlreadyMoved {
			errs = append(errs, k8sops.Finding{Path: k8sops.At("moves").Key(m.Key), Summary: "Planned First Move No Longer Holds",
				Detail: fmt.Sprintf("%s: %s. It is moved first (the cluster DNS Service's new IP is what kubelets are configured with), "+
					"so nothing was moved. Run terraform plan again and review the new moves.", m.Key, reason)})
		}
	}
	s.orderMoves(p.First)
	journaled := map[string]bool{}
	s.Settled = map[string]bool{}
	newest := newestEntries(snap.Journal)
	for _, e := range snap.Journal {
		journaled[e.Object+" "+e.Key] = true
		n := newest[e.Key] // an older entry is settled when the newer is
		if (journalSettled(n, byKey[e.Key], snap.Endpoints) && !bridgeMissing(n, byKey)) || snap.namespaceGoing(e.Service.Namespace) != "" {
			s.Settled[e.Object+" "+e.Key] = true
		}
	}
	restoring := map[string]bool{}
	for _, r := range p.Restore {
		restoring[r.Key] = true
	}
	for _, e := range snap.Journal {
		if !s.Settled[e.Object+" "+e.Key] && !restoring[e.Key] && !slices.Contains(s.Unplanned, e.Key) {
			s.Unplanned = append(s.Unplanned, e.Key)
		}
	}
	slices.Sort(s.Unplanned)
	for _, r := range p.Restore {
		if !journaled[r.Journal+" "+r.Key] {
			s.NotMoved[r.Key] = "its journal entry is gone: another apply settled it"
			continue
		}
		if going := snap.namespaceGoing(strings.SplitN(r.Key, "/", 2)[0]); going != "" {
			s.NotMoved[r.Key] = going + ": its journal entry is dropped"
			continue
		}
		takeOver(r.Key, r.NewIPs)
		s.Restore = append(s.Restore, r)
	}
	errs = append(errs, recreationReadiness(snap, targets, &s, o)...)
	return s, errs
}

const reasonAlreadyMoved = "already at the planned IPs"

// moveHolds says why a planned move no longer holds for svc as it is now, or "".
func moveHolds(svc *corev1.Service, m Move, targets []netip.Prefix, taken func(netip.Addr) bool) string {
	if svc == nil {
		return "deleted since the plan"
	}
	now := ipStrings(k8sops.ClusterIPs(svc))
	switch {
	case string(svc.UID) != m.UID:
		return fmt.Sprintf("replaced since the plan (UID %s, planned from %s)", svc.UID, m.UID)
	case svc.DeletionTimestamp != nil:
		return "being deleted"
	case slices.Equal(now, m.NewIPs):
		return reasonAlreadyMoved
	case !slices.Equal(now, m.OldIPs):
		if !slices.ContainsFunc(k8sops.ClusterIPs(svc), func(ip netip.Addr) bool { return !k8sops.InAny(targets, ip) }) {
			return fmt.Sprintf("already in the target (IPs %v)", now)
		}
		return fmt.Sprintf("its IPs changed since the plan (now %v, planned from %v)", now, m.OldIPs)
	case m.Type != "" && serviceType(svc) != m.Type:
		return fmt.Sprintf("its type changed from %s to %s since the plan", m.Type, serviceType(svc))
	}
	for _, f := range svc.Finalizers {
		if f != lbCleanupFinalizer {
			return fmt.Sprintf("carries finalizer %s now, whose controller acts on deletion", f)
		}
	}
	for _, ip := range m.NewIPs {
		if a, err := netip.ParseAddr(ip); err == nil && !slices.Contains(m.OldIPs, ip) && taken != nil && taken(a) {
			return fmt.Sprintf("its planned IP %s is taken now", ip)
		}
	}
	return ""
}

// orderMoves puts the moves listed in first ahead, in that order, then the rest by old IP.
func (s *RecreationSteps) orderMoves(first []string) {
	rank := func(key string) int {
		if i := slices.Index(first, key); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortStableFunc(s.Moves, func(a, b Move) int {
		if ra, rb := rank(a.Key), rank(b.Key); ra != rb {
			return ra - rb
		}
		if c := firstIP(a.OldIPs).Compare(firstIP(b.OldIPs)); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	s.First = 0
	for _, m := range s.Moves {
		if rank(m.Key) < len(first) {
			s.First++
		}
	}
}

// firstIP is the first of a Service's IPs, invalid when there is none.
func firstIP(ips []string) netip.Addr {
	if len(ips) == 0 {
		return netip.Addr{}
	}
	ip, _ := netip.ParseAddr(ips[0])
	return ip
}

// RecreationPreflight is what PrepareRecreation refuses for the whole apply, found from a
// snapshot holding only the ServiceCIDRs, the DNS Service and the bridge (TakeBridgeSnapshot).
// The resource's plan shows these as warnings: what is missing may be created in the same apply.
func RecreationPreflight(snap Snapshot, p PlannedRecreation, o BridgeOptions) []k8sops.Finding {
	s := RecreationSteps{Moves: p.Moves, Restore: p.Restore, DNSService: p.DNSService}
	return recreationReadiness(snap, k8sops.ParsePrefixes(p.TargetCIDRs), &s, o)
}

// recreationReadiness checks that a Ready ServiceCIDR serves each target, and decides the
// bridges: the DNS bridge created when the DNS Service moves or is restored, removed when
// switched off; the old-IP bridges of the moves, and those the plan removes.
func recreationReadiness(snap Snapshot, targets []netip.Prefix, s *RecreationSteps, o BridgeOptions) []k8sops.Finding {
	var out []k8sops.Finding
	for _, t := range targets {
		if !servedByReady(snap.Ranges, t) {
			out = append(out, k8sops.Finding{Path: k8sops.At("target_cidrs"), Summary: "Target Range Not Served",
				Detail: fmt.Sprintf("No Ready ServiceCIDR covers %s, so no Service can get an IP there. Create one first "+
					"(k8scidr_service_cidr, listed in this resource's depends_on or referenced by target_cidrs).", t)})
		}
	}
	byKey := map[string]*corev1.Service{}
	for i := range snap.Services {
		byKey[k8sops.SvcKey(&snap.Services[i])] = &snap.Services[i]
	}
	out = append(out, planOldIPBridges(snap, s, o, byKey)...)
	for _, key := range o.RemoveOldIPs {
		if svc := byKey[key]; svc != nil && svc.Labels[k8sops.OldIPBridgeLabel] == "true" {
			s.RemoveOldIPBridges = append(s.RemoveOldIPBridges, key)
		}
	}
	// The DNS bridges stand beside the DNS Service: their selector must find the same pods.
	ns := "kube-system"
	if s.DNSService != "" {
		ns, _, _ = strings.Cut(s.DNSService, "/")
	}
	if existing := byKey[ns+"/"+o.name()]; existing != nil && existing.Labels[k8sops.DNSBridgeLabel] != "true" {
		return append(out, k8sops.Finding{Path: k8sops.At("dns_bridge_name"), Summary: "Name Taken",
			Detail: fmt.Sprintf("%s/%s exists and is not a DNS bridge. Choose another dns_bridge_name.", ns, o.name())})
	}
	bridges := dnsBridgesIn(snap.Services, ns)
	if !o.Enabled {
		for _, b := range bridges {
			s.RemoveBridges = append(s.RemoveBridges, k8sops.SvcKey(b))
		}
		return out
	}
	if s.DNSService == "" {
		return out
	}
	var dns *corev1.Service
	var moving []string // the DNS Service's IPs that move: the bridge keeps those, no others
	if i := slices.IndexFunc(s.Moves, func(m Move) bool { return m.Key == s.DNSService }); i >= 0 {
		dns, moving = byKey[s.DNSService], MovingIPs(s.Moves[i].OldIPs, s.Moves[i].NewIPs)
	} else if slices.ContainsFunc(s.Restore, func(r Restore) bool { return r.Key == s.DNSService }) {
		// An apply stopped between deleting the DNS Service and creating the bridge, or the bridge
		// was refused: the journal holds the DNS Service with its old IPs, and the bridge is
		// created (before the DNS Service, when that is missing too).
		if dns = journaledDNS(snap.Journal, s.DNSService); dns != nil {
			newIPs := journaledNewIPs(snap.Journal, s.DNSService)
			if cur := byKey[s.DNSService]; cur != nil {
				newIPs = ipStrings(k8sops.ClusterIPs(cur))
			}
			moving = slices.DeleteFunc(slices.Clone(dns.Spec.ClusterIPs), func(ip string) bool { return slices.Contains(newIPs, ip) })
		}
	}
	// A bridge per old IP: one an earlier apply of this move made is found; one of an earlier
	// migration, on the IPs the DNS Service had before these, does not keep these.
	if dns == nil || !dnsBridgeMissing(snap.Services, moving) {
		return out
	}
	for _, ip := range parseAddrs(moving) {
		if !k8sops.ReadyHolds(snap.Ranges, ip) {
			out = append(out, k8sops.Finding{Path: k8sops.At("dns_bridge"), Summary: "DNS Bridge IP Outside a Ready Range",
				Detail: fmt.Sprintf("The bridge keeps the cluster DNS Service's old IP %s, which no Ready ServiceCIDR holds. Keep the old "+
					"range, or create a k8scidr_service_cidr covering it (k8scidr_service_allocations.covering_cidrs), or set "+
					"dns_bridge = false.", ip)})
		}
	}
	name := dnsBridgeName(o.name(), moving)
	if byKey[ns+"/"+o.name()] == nil {
		name = o.name() // the first migration's bridge has the name the user gave
	}
	if other := byKey[ns+"/"+name]; other != nil {
		return append(out, k8sops.Finding{Path: k8sops.At("dns_bridge_name"), Summary: "Name Taken", Detail: fmt.Sprintf("%s/%s, the name of the DNS bridge on "+
			"%s, is taken by a Service on %v. Choose another dns_bridge_name.", ns, name, strings.Join(moving, ", "), other.Spec.ClusterIPs)})
	}
	s.Bridge = bridgeService(dns, name, moving)
	return out
}

// dnsBridgesIn are the DNS bridges of namespace ns among services, by name.
func dnsBridgesIn(services []corev1.Service, ns string) []*corev1.Service {
	var out []*corev1.Service
	for i := range services {
		if svc := &services[i]; svc.Namespace == ns && svc.Labels[k8sops.DNSBridgeLabel] == "true" {
			out = append(out, svc)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// dnsBridgeName is the name of a further DNS bridge (a second migration's) on ips: the bridge
// name with a hash of the IPs, cut to fit a Service name as old-IP bridge names are.
func dnsBridgeName(base string, ips []string) string {
	return base[:min(len(base), bridgeNamePrefixMax)] + "-" + shortHash(strings.Join(ips, ","))
}

// MovingIPs are the old IPs that a move changes, in order: on a dual-stack Service whose other
// family stays, one.
func MovingIPs(oldIPs, newIPs []string) []string {
	var out []string
	for i, ip := range oldIPs {
		if i >= len(newIPs) || newIPs[i] != ip {
			out = append(out, ip)
		}
	}
	return out
}

// journaledNewIPs are the IPs the journal entry of key recreates its Service with.
func journaledNewIPs(journal []JournalEntry, key string) []string {
	for _, e := range journal {
		if e.Key == key {
			return e.Service.Spec.ClusterIPs
		}
	}
	return nil
}

func parseAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// journaledDNS is the DNS Service as it was before an interrupted move (its old IPs), from the
// journal; nil when the journal does not hold it.
func journaledDNS(journal []JournalEntry, key string) *corev1.Service {
	for _, e := range journal {
		if e.Key == key && len(e.OldIPs) > 0 {
			dns := e.Service.DeepCopy()
			dns.Spec.ClusterIPs = slices.Clone(e.OldIPs)
			dns.Spec.ClusterIP = e.OldIPs[0]
			return dns
		}
	}
	return nil
}

// bridgeService is the DNS bridge named name: a ClusterIP Service with the DNS Service's
// selector and ports on ips, the DNS Service's IPs that move (of a dual-stack one, maybe one
// family).
func bridgeService(dns *corev1.Service, name string, ips []string) *corev1.Service {
	b := bridgeFor(dns, name, ips)
	b.Labels[k8sops.DNSBridgeLabel] = "true"
	b.Annotations["k8scidr.io/description"] = "Keeps the old cluster DNS IP answering until kubelets and pods use the new one."
	return b
}
