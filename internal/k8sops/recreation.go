// Planning k8scidr_service_recreation: which Services move, to which IPs, in which order, and
// which are skipped and why. Pure over a Snapshot, so plan and apply compute the same thing.
package k8sops

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// DNSServiceKey is the cluster DNS Service, moved first by default.
const DNSServiceKey = "kube-system/kube-dns"

// Defaults of k8scidr_service_recreation.
const (
	DefaultDNSBridgeName    = "kube-dns-legacy"
	DefaultParallelism      = 10
	DefaultJournalNamespace = "kube-system"
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
	// First lists "ns/name" moved and verified before the rest; nil means DNSServiceKey where
	// it exists. A listed Service that does not exist is an error.
	First         []string
	IPAssignment  string
	DNSBridge     bool
	DNSBridgeName string
}

// Snapshot is what planning reads from the cluster: one list per kind.
type Snapshot struct {
	Services []corev1.Service
	// Slices are the EndpointSlices labelled with a Service name.
	Slices []discoveryv1.EndpointSlice
	// Endpoints are the hand-made Endpoints of selector-less Services, by "ns/name".
	Endpoints map[string]corev1.Endpoints
	// Held are the addresses allocated now: IPAddress objects.
	Held []netip.Addr
	// Ranges are the ServiceCIDRs.
	Ranges []ServiceCIDR
	// Journal holds the entries an interrupted apply left.
	Journal []JournalEntry
	// NodeLocalDNS reports a NodeLocal DNSCache DaemonSet, which binds kube-dns's IP on nodes.
	NodeLocalDNS bool
}

// Move is one Service to recreate. OldIPs and NewIPs are its whole spec.clusterIPs, in order;
// an IP already inside the target stays.
type Move struct {
	Key            string
	OldIPs, NewIPs []string
}

// Restore is a journaled Service to recreate at NewIPs before anything else moves.
type Restore struct {
	Key     string
	NewIPs  []string
	Journal string // the journal object holding it
}

// Finding is a problem tied to an input attribute.
type Finding struct {
	Attribute, Summary, Detail string
}

func (f Finding) Error() string { return f.Summary + ": " + f.Detail }

// RecreationPlan is what an apply does, in order: Restore, then Moves[:First] (verified), then
// the DNS bridge, then the rest of Moves, then the bridge removal.
type RecreationPlan struct {
	Restore []Restore
	Moves   []Move
	First   int
	Skipped map[string]string
	// Bridge is the DNS bridge to create right after kube-dns moves; nil when none.
	Bridge *corev1.Service
	// RemoveBridge is the name of an existing bridge to delete (dns_bridge = false).
	RemoveBridge string
	// Stale are journal objects whose every entry is settled; apply deletes them.
	Stale []string
	// Warnings hold what may be fixed by another resource in the same apply (a ServiceCIDR
	// created with this one): warnings at plan, errors at apply.
	Warnings []Finding
	// Notes are plain warnings (addon managers, NodeLocal DNSCache).
	Notes []string
	// Staying are the IPs outside the target that stay: skipped LoadBalancers and the DNS
	// bridge. KeepCovering are the ranges that keep them valid once the old range goes.
	Staying      []netip.Addr
	KeepCovering []netip.Prefix
	// DNSIPs are kube-dns's ClusterIPs once the plan is carried out; nil without kube-dns.
	DNSIPs []string
	// Errors are plan-time errors.
	Errors []Finding
}

// PlanRecreation computes the plan from a snapshot. It never reads the cluster.
func PlanRecreation(snap Snapshot, o RecreationOptions) RecreationPlan {
	p := RecreationPlan{Skipped: map[string]string{}}
	targets, ok := p.checkTargets(snap, o)
	if !ok {
		return p
	}
	sel := labels.Everything()
	if o.Selector != "" {
		s, err := labels.Parse(o.Selector)
		if err != nil {
			p.Errors = append(p.Errors, Finding{"selector", "Invalid Label Selector", err.Error()})
			return p
		}
		sel = s
	}
	byKey := map[string]*corev1.Service{}
	for i := range snap.Services {
		byKey[svcKey(&snap.Services[i])] = &snap.Services[i]
	}
	first := o.First
	if first == nil {
		if _, ok := byKey[DNSServiceKey]; ok {
			first = []string{DNSServiceKey}
		}
	}
	for _, k := range first {
		if _, ok := byKey[k]; !ok {
			p.Errors = append(p.Errors, Finding{"first", "Service In first Does Not Exist",
				fmt.Sprintf("%q is not a Service in the cluster. List existing Services as namespace/name, or remove it.", k)})
		}
	}
	type candidate struct {
		svc    *corev1.Service
		oldIPs []netip.Addr
	}
	var cands []candidate
	for i := range snap.Services {
		svc := &snap.Services[i]
		ips := clusterIPs(svc)
		// An IP moves when the target has a range of its family and it is not inside it yet.
		movable := slices.ContainsFunc(ips, func(ip netip.Addr) bool { _, ok := targetFor(targets, ip); return ok && !inAny(targets, ip) })
		if svc.Labels[DNSBridgeLabel] == "true" { // never moved, and not a Service the user asked about
			p.Staying = append(p.Staying, slices.DeleteFunc(ips, func(ip netip.Addr) bool { return inAny(targets, ip) })...)
			continue
		}
		reason := skipReason(svc, ips, o, sel)
		if !movable && (reason == "" || reason == skipOutOfScope) {
			continue // in the target already, or of a family the migration does not move
		}
		if reason != "" {
			p.Skipped[svcKey(svc)] = reason
			if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
				p.Staying = append(p.Staying, slices.DeleteFunc(ips, func(ip netip.Addr) bool { return inAny(targets, ip) })...)
			}
			continue
		}
		cands = append(cands, candidate{svc, ips})
	}
	rank := func(key string) int {
		if i := slices.Index(first, key); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if ra, rb := rank(svcKey(a.svc)), rank(svcKey(b.svc)); ra != rb {
			return ra - rb
		}
		if c := a.oldIPs[0].Compare(b.oldIPs[0]); c != 0 {
			return c
		}
		return strings.Compare(svcKey(a.svc), svcKey(b.svc))
	})

	held := slices.Clone(snap.Held)
	var reqs []PlacementRequest
	p.planRestore(snap, byKey, targets, &held, &reqs)
	for _, c := range cands {
		for _, ip := range c.oldIPs {
			if _, ok := targetFor(targets, ip); ok && !inAny(targets, ip) {
				reqs = append(reqs, PlacementRequest{Key: svcKey(c.svc), Old: ip})
			}
		}
	}
	placed, err := AssignIPs(o.IPAssignment, targets, rangePrefixes(snap.Ranges), reqs, held)
	if err != nil {
		p.Errors = append(p.Errors, Finding{"target_cidrs", "Target Ranges Cannot Hold the Services",
			err.Error() + ". Use larger target_cidrs, or narrow the scope."})
		return p
	}
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
		m := Move{Key: svcKey(c.svc)}
		for _, ip := range c.oldIPs {
			m.OldIPs = append(m.OldIPs, ip.String())
			if n, ok := newIP[m.Key][ip]; ok {
				ip = n
			}
			m.NewIPs = append(m.NewIPs, ip.String())
		}
		if rank(m.Key) < len(first) {
			p.First++
		}
		p.Moves = append(p.Moves, m)
	}
	p.planBridge(snap, byKey, o)
	if dns := byKey[DNSServiceKey]; dns != nil {
		p.DNSIPs = ipStrings(clusterIPs(dns))
		if i := slices.IndexFunc(p.Moves, func(m Move) bool { return m.Key == DNSServiceKey }); i >= 0 {
			p.DNSIPs = p.Moves[i].NewIPs
		}
	}
	if p.Bridge != nil {
		p.Staying = append(p.Staying, clusterIPs(p.Bridge)...)
	}
	slices.SortFunc(p.Staying, netip.Addr.Compare)
	if cover, err := coveringSet(p.Staying); err == nil {
		p.KeepCovering = cover
	}
	return p
}

// checkTargets validates target_cidrs and reports ranges no Ready ServiceCIDR serves.
func (p *RecreationPlan) checkTargets(snap Snapshot, o RecreationOptions) ([]netip.Prefix, bool) {
	if len(o.TargetCIDRs) == 0 {
		p.Errors = append(p.Errors, Finding{"target_cidrs", "No Target Range",
			"Set target_cidrs to the new Service range(s), e.g. k8scidr_service_cidr.new.cidrs."})
		return nil, false
	}
	for _, pr := range ValidateServiceCIDRs(o.TargetCIDRs) {
		p.Errors = append(p.Errors, Finding{"target_cidrs", pr.Summary, pr.Detail})
	}
	if o.IPAssignment != PreserveOffset && o.IPAssignment != NextFree {
		p.Errors = append(p.Errors, Finding{"ip_assignment", "Unknown IP Assignment",
			fmt.Sprintf("%q: use %s or %s.", o.IPAssignment, PreserveOffset, NextFree)})
	}
	if len(p.Errors) > 0 {
		return nil, false
	}
	targets := parsePrefixes(o.TargetCIDRs)
	for _, t := range targets {
		if !servedByReady(snap.Ranges, t) {
			p.Warnings = append(p.Warnings, Finding{"target_cidrs", "Target Range Not Served",
				fmt.Sprintf("No Ready ServiceCIDR covers %s, so no Service can get an IP there. Create one first "+
					"(k8scidr_service_cidr, and reference its cidrs here so it is applied before this resource).", t)})
		}
	}
	return targets, true
}

// servedByReady reports whether a Ready ServiceCIDR contains the whole prefix.
func servedByReady(ranges []ServiceCIDR, t netip.Prefix) bool {
	for _, r := range ranges {
		if !r.Ready || r.Terminating {
			continue
		}
		for _, c := range parsePrefixes(r.CIDRs) {
			if c.Bits() <= t.Bits() && c.Contains(t.Addr()) {
				return true
			}
		}
	}
	return false
}

// readyHolds reports whether a Ready ServiceCIDR can allocate ip.
func readyHolds(ranges []ServiceCIDR, ip netip.Addr) bool {
	for _, r := range ranges {
		if r.Ready && !r.Terminating && inAny(parsePrefixes(r.CIDRs), ip) {
			return true
		}
	}
	return false
}

const skipOutOfScope = "out of scope"

// skipReason says why a Service is not moved, or "" when it is.
func skipReason(svc *corev1.Service, ips []netip.Addr, o RecreationOptions, sel labels.Selector) string {
	key := svcKey(svc)
	switch {
	case len(o.Namespaces) > 0 && !slices.Contains(o.Namespaces, svc.Namespace),
		slices.Contains(o.ExcludeNamespaces, svc.Namespace),
		slices.Contains(o.Exclude, key),
		!sel.Matches(labels.Set(svc.Labels)):
		return skipOutOfScope
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "ExternalName: has no ClusterIP"
	case len(ips) == 0:
		return "headless: has no ClusterIP"
	case key == "default/kubernetes":
		return "owned by the apiserver: moves when --service-cluster-ip-range changes (KEP-1880 procedure)"
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

// planRestore turns journal entries whose Service is gone into Restores, keeping the journaled
// target IP when still free and asking for a new placement otherwise.
func (p *RecreationPlan) planRestore(snap Snapshot, byKey map[string]*corev1.Service, targets []netip.Prefix,
	held *[]netip.Addr, reqs *[]PlacementRequest) {
	open := map[string]bool{}
	for _, e := range snap.Journal {
		if _, exists := byKey[e.Key]; exists {
			if !open[e.Object] {
				open[e.Object] = false
			}
			continue
		}
		open[e.Object] = true
		r := Restore{Key: e.Key, Journal: e.Object, NewIPs: slices.Clone(e.Service.Spec.ClusterIPs)}
		for _, s := range r.NewIPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			if slices.Contains(*held, ip) || !readyHolds(snap.Ranges, ip) {
				if _, ok := targetFor(targets, ip); ok {
					*reqs = append(*reqs, PlacementRequest{Key: "restore " + e.Key, Old: ip})
				}
				continue
			}
			*held = append(*held, ip)
		}
		p.Restore = append(p.Restore, r)
	}
	for obj, hasOpen := range open {
		if !hasOpen {
			p.Stale = append(p.Stale, obj)
		}
	}
	slices.Sort(p.Stale)
	slices.SortFunc(p.Restore, func(a, b Restore) int { return strings.Compare(a.Key, b.Key) })
}

// planBridge decides the DNS bridge: created when kube-dns moves, removed when switched off.
func (p *RecreationPlan) planBridge(snap Snapshot, byKey map[string]*corev1.Service, o RecreationOptions) {
	name := o.DNSBridgeName
	if name == "" {
		name = DefaultDNSBridgeName
	}
	existing := byKey["kube-system/"+name]
	if existing != nil && existing.Labels[DNSBridgeLabel] != "true" {
		p.Errors = append(p.Errors, Finding{"dns_bridge_name", "Name Taken",
			fmt.Sprintf("kube-system/%s exists and is not a DNS bridge. Choose another dns_bridge_name.", name)})
		return
	}
	if !o.DNSBridge {
		if existing != nil {
			p.RemoveBridge = name
		}
		return
	}
	if existing != nil {
		return
	}
	dns := byKey[DNSServiceKey]
	if dns == nil {
		// An apply stopped between deleting kube-dns and creating the bridge: the journal holds
		// kube-dns with its old IPs, and the bridge is created before it is restored.
		dns = journaledDNS(snap.Journal, p.Restore)
	} else if !slices.ContainsFunc(p.Moves, func(m Move) bool { return m.Key == DNSServiceKey }) {
		dns = nil
	}
	if dns == nil {
		return
	}
	if _, pinned := dns.Labels["addon.kops.k8s.io/name"]; pinned {
		p.Notes = append(p.Notes, "kube-dns is managed by a kOps addon whose template pins its clusterIP: set the kOps "+
			"cluster spec's kubeDNS.serverIP to the new IP before the addon manager next applies, or it recreates the old IP.")
	} else if dns.Labels["addonmanager.kubernetes.io/mode"] == "Reconcile" {
		p.Notes = append(p.Notes, "kube-dns is reconciled by the addon manager: change the clusterIP in its addon manifest too.")
	}
	if snap.NodeLocalDNS {
		p.Notes = append(p.Notes, "NodeLocal DNSCache runs in this cluster and forwards to kube-dns's IP: update its "+
			"configuration (the __PILLAR__ upstream / kube-dns IP) to the new IP.")
	}
	for _, s := range clusterIPs(dns) {
		if !readyHolds(snap.Ranges, s) {
			p.Warnings = append(p.Warnings, Finding{"dns_bridge", "DNS Bridge IP Outside a Ready Range",
				fmt.Sprintf("The bridge keeps kube-dns's old IP %s, which no Ready ServiceCIDR holds. Keep the old range, "+
					"or create a k8scidr_service_cidr covering it (k8scidr_service_allocations.covering_cidrs), or set dns_bridge = false.", s)})
		}
	}
	p.Bridge = bridgeService(dns, name)
}

// journaledDNS is kube-dns as it was before an interrupted move (its old IPs), when the plan
// restores it from the journal; nil otherwise.
func journaledDNS(journal []JournalEntry, restore []Restore) *corev1.Service {
	if !slices.ContainsFunc(restore, func(r Restore) bool { return r.Key == DNSServiceKey }) {
		return nil
	}
	for _, e := range journal {
		if e.Key == DNSServiceKey && len(e.OldIPs) > 0 {
			dns := e.Service.DeepCopy()
			dns.Spec.ClusterIPs = slices.Clone(e.OldIPs)
			dns.Spec.ClusterIP = e.OldIPs[0]
			return dns
		}
	}
	return nil
}

// bridgeService is a ClusterIP Service with kube-dns's selector and ports on its current IPs.
func bridgeService(dns *corev1.Service, name string) *corev1.Service {
	b := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: dns.Namespace,
			Labels: map[string]string{DNSBridgeLabel: "true", "app.kubernetes.io/managed-by": "k8scidr"},
			Annotations: map[string]string{"k8scidr.io/bridge-for": svcKey(dns),
				"k8scidr.io/description": "Keeps the old cluster DNS IP answering until kubelets and pods use the new one."},
		},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeClusterIP,
			Selector:       maps.Clone(dns.Spec.Selector),
			ClusterIP:      dns.Spec.ClusterIP,
			ClusterIPs:     slices.Clone(dns.Spec.ClusterIPs),
			IPFamilies:     slices.Clone(dns.Spec.IPFamilies),
			IPFamilyPolicy: dns.Spec.IPFamilyPolicy,
		},
	}
	for _, port := range dns.Spec.Ports {
		b.Spec.Ports = append(b.Spec.Ports, corev1.ServicePort{Name: port.Name, Protocol: port.Protocol, Port: port.Port,
			TargetPort: port.TargetPort, AppProtocol: port.AppProtocol})
	}
	return b
}

// recreationCopy is the Service to create in place of svc: the whole object but the deny-list
// (server-set metadata, system finalizers, status), with spec.clusterIP(s) set to ips.
func recreationCopy(svc *corev1.Service, ips []string) *corev1.Service {
	out := svc.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{}
	clearServerFields(&out.ObjectMeta)
	out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool { return f == lbCleanupFinalizer })
	out.Status = corev1.ServiceStatus{}
	out.Spec.ClusterIPs = slices.Clone(ips)
	out.Spec.ClusterIP = ips[0]
	return out
}

func svcKey(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// clusterIPs parses a Service's ClusterIPs; none for headless and ExternalName Services.
func clusterIPs(svc *corev1.Service) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range raw {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

func rangePrefixes(ranges []ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range ranges {
		out = append(out, parsePrefixes(r.CIDRs)...)
	}
	return out
}
