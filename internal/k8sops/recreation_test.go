package k8sops

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func rsvc(key, typ string, ips ...string) corev1.Service {
	ns, name, _ := strings.Cut(key, "/")
	s := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-" + types.UID(name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceType(typ), ClusterIPs: ips, Selector: map[string]string{"app": name}},
	}
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func readyRange(name string, cidrs ...string) ServiceCIDR {
	return ServiceCIDR{Name: name, CIDRs: cidrs, Ready: true}
}

// mixedSnapshot is the acceptance test's namespace set in miniature.
func mixedSnapshot() Snapshot {
	owned := rsvc("app/owned", "ClusterIP", "100.64.3.1")
	owned.OwnerReferences = []metav1.OwnerReference{{Kind: "Deployment", Name: "op", Controller: boolPtr(true)}}
	fin := rsvc("app/fin", "ClusterIP", "100.64.3.2")
	fin.Finalizers = []string{"example.com/protect"}
	helm := rsvc("app/helm", "ClusterIP", "100.70.1.7")
	helm.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	snap := Snapshot{
		Services: []corev1.Service{
			rsvc("default/kubernetes", "ClusterIP", "100.64.0.1"),
			rsvc("app/web", "ClusterIP", "100.64.7.200"),
			rsvc("app/np", "NodePort", "100.64.1.5"),
			rsvc("app/lb", "LoadBalancer", "100.64.12.7"),
			rsvc("app/headless", "ClusterIP", "None"),
			rsvc("app/ext", "ExternalName"),
			rsvc("kube-system/kube-dns", "ClusterIP", "100.64.0.10"),
			rsvc("app/moved", "ClusterIP", "172.24.0.99"),
			owned, fin, helm,
			rsvc("other/x", "ClusterIP", "100.64.9.9"),
		},
		Ranges: []ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13"), readyRange("new", "172.24.0.0/15")},
	}
	for _, s := range snap.Services {
		snap.Held = append(snap.Held, clusterIPs(&s)...)
	}
	return snap
}

func boolPtr(b bool) *bool { return &b }

func defaultOpts() RecreationOptions {
	return RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: PreserveOffset, DNSBridge: true,
		DNSBridgeName: DefaultDNSBridgeName, ExcludeNamespaces: []string{"other"}}
}

func TestPlanRecreationMixed(t *testing.T) {
	p := PlanRecreation(mixedSnapshot(), defaultOpts())
	if len(p.Errors) > 0 || len(p.Warnings) > 0 {
		t.Fatalf("errors %v warnings %v", p.Errors, p.Warnings)
	}
	wantMoves := []Move{
		{"kube-system/kube-dns", []string{"100.64.0.10"}, []string{"172.24.0.10"}},
		{"app/np", []string{"100.64.1.5"}, []string{"172.24.1.5"}},
		{"app/web", []string{"100.64.7.200"}, []string{"172.24.7.200"}},
		// 100.70.1.7 is offset 6.1.7 in the /13; modulo the /15 that is 0.1.7, taken by nobody.
		{"app/helm", []string{"100.70.1.7"}, []string{"172.24.1.7"}},
	}
	if !reflect.DeepEqual(p.Moves, wantMoves) || p.First != 1 {
		t.Errorf("moves = %v (first %d), want %v (first 1)", p.Moves, p.First, wantMoves)
	}
	wantSkipped := map[string]string{
		"default/kubernetes": "owned by the apiserver",
		"app/lb":             "LoadBalancer",
		"app/headless":       "headless",
		"app/ext":            "ExternalName",
		"app/owned":          "owned by Deployment op",
		"app/fin":            "carries finalizer example.com/protect",
		"other/x":            "out of scope",
	}
	if len(p.Skipped) != len(wantSkipped) {
		t.Errorf("skipped = %v", p.Skipped)
	}
	for k, prefix := range wantSkipped {
		if !strings.HasPrefix(p.Skipped[k], prefix) {
			t.Errorf("skipped[%s] = %q, want prefix %q", k, p.Skipped[k], prefix)
		}
	}
	if p.Bridge == nil || p.Bridge.Spec.ClusterIP != "100.64.0.10" || p.Bridge.Name != DefaultDNSBridgeName ||
		p.Bridge.Labels[DNSBridgeLabel] != "true" || p.Bridge.Spec.Selector["app"] != "kube-dns" {
		t.Errorf("bridge = %+v", p.Bridge)
	}
	if !reflect.DeepEqual(p.DNSIPs, []string{"172.24.0.10"}) {
		t.Errorf("DNSIPs = %v", p.DNSIPs)
	}
	if again := PlanRecreation(mixedSnapshot(), defaultOpts()); !reflect.DeepEqual(again, p) {
		t.Error("the same snapshot planned twice differs")
	}
}

func TestPlanRecreationCollisionsAndOptions(t *testing.T) {
	snap := mixedSnapshot()
	// 172.24.7.200 is held: web probes forward to .201.
	snap.Held = append(snap.Held, netip.MustParseAddr("172.24.7.200"))
	o := defaultOpts()
	o.IncludeLoadBalancers, o.IncludeOwned = true, true
	o.Selector = "app.kubernetes.io/managed-by!=Helm"
	p := PlanRecreation(snap, o)
	got := map[string]string{}
	for _, m := range p.Moves {
		got[m.Key] = m.NewIPs[0]
	}
	want := map[string]string{"kube-system/kube-dns": "172.24.0.10", "app/np": "172.24.1.5", "app/web": "172.24.7.201",
		"app/lb": "172.24.12.7", "app/owned": "172.24.3.1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("moves = %v, want %v", got, want)
	}
	if p.Skipped["app/helm"] != skipOutOfScope {
		t.Errorf("helm skipped = %q", p.Skipped["app/helm"])
	}

	o = defaultOpts()
	o.IPAssignment = NextFree
	p = PlanRecreation(mixedSnapshot(), o)
	var ips []string
	for _, m := range p.Moves {
		ips = append(ips, m.NewIPs[0])
	}
	if want := []string{"172.24.0.2", "172.24.0.3", "172.24.0.4", "172.24.0.5"}; !reflect.DeepEqual(ips, want) {
		t.Errorf("next_free = %v, want %v", ips, want)
	}
}

func TestPlanRecreationDualStack(t *testing.T) {
	snap := Snapshot{
		Services: []corev1.Service{rsvc("a/ds", "ClusterIP", "100.64.0.20", "fd00:10::20"),
			rsvc("a/keep6", "ClusterIP", "fd00:10::21", "172.24.0.21"),
			rsvc("a/only6", "ClusterIP", "fd00:10::22")},
		Ranges: []ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13", "fd00:10::/108"), readyRange("new", "172.24.0.0/15")},
	}
	p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: PreserveOffset})
	want := []Move{{"a/ds", []string{"100.64.0.20", "fd00:10::20"}, []string{"172.24.0.20", "fd00:10::20"}}}
	if !reflect.DeepEqual(p.Moves, want) {
		t.Errorf("moves = %v, want %v", p.Moves, want)
	}
	if len(p.Skipped) != 0 {
		t.Errorf("Services with nothing to move in the target's families are listed as skipped: %v", p.Skipped)
	}
	snap.Ranges = append(snap.Ranges, readyRange("new6", "fd00:24::/108"))
	p = PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15", "fd00:24::/108"}, IPAssignment: PreserveOffset})
	got := map[string][]string{}
	for _, m := range p.Moves {
		got[m.Key] = m.NewIPs
	}
	if fmt.Sprint(got) != "map[a/ds:[172.24.0.20 fd00:24::20] a/keep6:[fd00:24::21 172.24.0.21] a/only6:[fd00:24::22]]" {
		t.Errorf("dual-stack moves = %v", got)
	}
}

func TestPlanRecreationFindings(t *testing.T) {
	attrs := func(fs []Finding) string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Attribute)
		}
		return strings.Join(out, ",")
	}
	o := defaultOpts()
	o.TargetCIDRs = nil
	if got := attrs(PlanRecreation(mixedSnapshot(), o).Errors); got != "target_cidrs" {
		t.Errorf("empty target: errors on %q", got)
	}
	o = defaultOpts()
	o.First = []string{"kube-system/kube-dns", "app/nope"}
	if p := PlanRecreation(mixedSnapshot(), o); attrs(p.Errors) != "first" || !strings.Contains(p.Errors[0].Detail, "app/nope") {
		t.Errorf("missing first: %v", p.Errors)
	}
	o = defaultOpts()
	o.TargetCIDRs = []string{"172.24.0.0/30"} // 2 usable addresses minus .1: one fits
	snap := mixedSnapshot()
	snap.Ranges = append(snap.Ranges, readyRange("tiny", "172.24.0.0/30"))
	if p := PlanRecreation(snap, o); attrs(p.Errors) != "target_cidrs" || !strings.Contains(p.Errors[0].Detail, "full") {
		t.Errorf("full target: %v", p.Errors)
	}
	// Not served yet (created in the same apply) and the bridge IP outside a Ready range: warnings.
	snap = mixedSnapshot()
	snap.Ranges = []ServiceCIDR{{Name: "kubernetes", CIDRs: []string{"100.64.0.0/13"}, Terminating: true}}
	p := PlanRecreation(snap, defaultOpts())
	if attrs(p.Warnings) != "target_cidrs,dns_bridge" || len(p.Errors) > 0 || len(p.Moves) != 4 {
		t.Errorf("warnings %v errors %v moves %d", p.Warnings, p.Errors, len(p.Moves))
	}
	// A Service squatting on the bridge name.
	snap = mixedSnapshot()
	snap.Services = append(snap.Services, rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.11"))
	if p := PlanRecreation(snap, defaultOpts()); attrs(p.Errors) != "dns_bridge_name" {
		t.Errorf("bridge name taken: %v", p.Errors)
	}
}

func TestPlanRecreationBridgeLifecycle(t *testing.T) {
	snap := mixedSnapshot()
	bridge := rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.10")
	bridge.Labels = map[string]string{DNSBridgeLabel: "true"}
	for i := range snap.Services {
		if snap.Services[i].Name == "kube-dns" {
			snap.Services[i].Spec.ClusterIPs, snap.Services[i].Spec.ClusterIP = []string{"172.24.0.10"}, "172.24.0.10"
		}
	}
	snap.Services = append(snap.Services, bridge)
	p := PlanRecreation(snap, defaultOpts())
	if p.Bridge != nil || p.RemoveBridge != "" || p.First != 0 {
		t.Errorf("bridge kept: got create %v remove %q first %d", p.Bridge, p.RemoveBridge, p.First)
	}
	if _, listed := p.Skipped["kube-system/kube-dns-legacy"]; listed || !slices.Contains(p.Staying, netip.MustParseAddr("100.64.0.10")) {
		t.Errorf("the bridge must be neither moved nor listed, and its IP stays: skipped %v staying %v", p.Skipped, p.Staying)
	}
	o := defaultOpts()
	o.DNSBridge = false
	if p := PlanRecreation(snap, o); p.RemoveBridge != DefaultDNSBridgeName {
		t.Errorf("dns_bridge = false: remove %q", p.RemoveBridge)
	}
}

// An apply that stopped after deleting kube-dns, before the bridge existed: the next plan
// restores kube-dns at its new IP and creates the bridge on the old one it journaled.
func TestPlanRecreationBridgeAfterInterruptedDNSMove(t *testing.T) {
	snap := mixedSnapshot()
	snap.Services = slices.DeleteFunc(snap.Services, func(s corev1.Service) bool { return s.Name == "kube-dns" })
	snap.Held = slices.DeleteFunc(snap.Held, func(ip netip.Addr) bool { return ip.String() == "100.64.0.10" })
	snap.Journal = []JournalEntry{{Key: DNSServiceKey, OldIPs: []string{"100.64.0.10"},
		Service: rsvc(DNSServiceKey, "ClusterIP", "172.24.0.10"), Object: "j1"}}
	p := PlanRecreation(snap, defaultOpts())
	if len(p.Restore) != 1 || p.Restore[0].NewIPs[0] != "172.24.0.10" {
		t.Fatalf("restore = %v", p.Restore)
	}
	if p.Bridge == nil || p.Bridge.Spec.ClusterIP != "100.64.0.10" || !slices.Equal(p.Bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) {
		t.Fatalf("bridge = %+v, want one on the journaled old IP 100.64.0.10", p.Bridge)
	}
	got, err := CheckPlanned(snap, p, nil, p.Restore)
	if err != nil || got.Bridge == nil {
		t.Errorf("CheckPlanned dropped the bridge of a restored kube-dns: %v %v", got.Bridge, err)
	}
	o := defaultOpts()
	o.DNSBridge = false
	if p := PlanRecreation(snap, o); p.Bridge != nil {
		t.Errorf("dns_bridge = false still plans a bridge: %+v", p.Bridge)
	}
}

func TestPlanRecreationRestore(t *testing.T) {
	snap := mixedSnapshot()
	gone := rsvc("app/gone", "ClusterIP", "172.24.9.9")
	gone2 := rsvc("app/gone2", "ClusterIP", "172.24.1.5") // its IP was taken meanwhile... by np's plan
	snap.Held = append(snap.Held, netip.MustParseAddr("172.24.9.9"))
	snap.Journal = []JournalEntry{
		{Key: "app/gone", OldIPs: []string{"100.64.9.9"}, Service: gone, Object: "j1"},
		{Key: "app/web", OldIPs: []string{"100.64.7.200"}, Service: rsvc("app/web", "ClusterIP", "172.24.7.200"), Object: "j1"},
		{Key: "app/gone2", OldIPs: []string{"100.64.1.6"}, Service: gone2, Object: "j2"},
		{Key: "app/np", Service: rsvc("app/np", "ClusterIP", "172.24.1.5"), Object: "j3"},
	}
	p := PlanRecreation(snap, defaultOpts())
	want := []Restore{{"app/gone", []string{"172.24.9.10"}, "j1"}, {"app/gone2", []string{"172.24.1.5"}, "j2"}}
	if !reflect.DeepEqual(p.Restore, want) {
		t.Errorf("restore = %v, want %v", p.Restore, want)
	}
	if !reflect.DeepEqual(p.Stale, []string{"j3"}) {
		t.Errorf("stale = %v", p.Stale)
	}
	for _, m := range p.Moves {
		if m.Key == "app/np" && m.NewIPs[0] == "172.24.1.5" {
			t.Error("a move took the IP a restore keeps")
		}
	}
}

func TestCheckPlanned(t *testing.T) {
	snap := mixedSnapshot()
	fresh := PlanRecreation(snap, defaultOpts())
	planned := []Move{fresh.Moves[2], fresh.Moves[0]}
	got, err := CheckPlanned(snap, fresh, planned, nil)
	if err != nil || len(got.Moves) != 2 || got.Moves[0].Key != DNSServiceKey || got.First != 1 || got.Bridge == nil {
		t.Fatalf("CheckPlanned = %+v, %v", got.Moves, err)
	}
	moved := mixedSnapshot()
	moved.Services[1].Spec.ClusterIPs = fresh.Moves[2].NewIPs // app/web is where the plan puts it
	if got, err := CheckPlanned(moved, fresh, planned, nil); err != nil || len(got.Moves) != 1 || got.Moves[0].Key != DNSServiceKey {
		t.Errorf("a planned move already done must be dropped, not refused: %+v, %v", got.Moves, err)
	}
	got, err = CheckPlanned(snap, fresh, planned[:1], nil)
	if err != nil || got.Bridge != nil {
		t.Errorf("without kube-dns the bridge stays: %v %v", got.Bridge, err)
	}
	snap.Held = append(snap.Held, netip.MustParseAddr(fresh.Moves[2].NewIPs[0]))
	if _, err := CheckPlanned(snap, fresh, planned, nil); err == nil || !strings.Contains(err.Error(), "is taken now") {
		t.Errorf("taken IP: %v", err)
	}
	snap = mixedSnapshot()
	snap.Services[1].Spec.ClusterIPs = []string{"100.64.7.201"}
	if _, err := CheckPlanned(snap, fresh, planned, nil); err == nil || !strings.Contains(err.Error(), "planned from") {
		t.Errorf("changed Service: %v", err)
	}
}

func TestRecreationCopyKeepsEverythingButTheDenyList(t *testing.T) {
	s := rsvc("app/web", "NodePort", "100.64.7.200")
	s.ResourceVersion, s.Generation = "42", 3
	s.CreationTimestamp = metav1.Now()
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	s.Finalizers = []string{lbCleanupFinalizer}
	s.Labels = map[string]string{"helm.sh/chart": "web-1"}
	s.Annotations = map[string]string{"meta.helm.sh/release-name": "web"}
	s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080}}
	s.Spec.ExternalIPs = []string{"192.0.2.1"}
	s.Spec.PublishNotReadyAddresses = true
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}}
	c := recreationCopy(&s, []string{"172.24.7.200"})
	if c.ResourceVersion != "" || c.UID != "" || c.Generation != 0 || !c.CreationTimestamp.IsZero() || c.ManagedFields != nil ||
		len(c.Finalizers) != 0 || len(c.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("deny-list fields survived: %+v", c.ObjectMeta)
	}
	if c.Spec.ClusterIP != "172.24.7.200" || c.Spec.Ports[0].NodePort != 30080 || c.Spec.ExternalIPs[0] != "192.0.2.1" ||
		!c.Spec.PublishNotReadyAddresses || c.Labels["helm.sh/chart"] != "web-1" || c.Annotations["meta.helm.sh/release-name"] != "web" {
		t.Errorf("copy lost fields: %+v", c)
	}
	if s.Spec.ClusterIP != "100.64.7.200" {
		t.Error("the original was modified")
	}
}

func TestAdaptiveLimit(t *testing.T) {
	ctx := context.Background()
	l := newAdaptiveLimit(10, 100*time.Millisecond, 0)
	if l.current() != 2 {
		t.Fatalf("starts at %d, want 2", l.current())
	}
	// Fast windows: additive increase, 1/limit per move, up to the maximum.
	for range 200 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		l.release(20*time.Millisecond, true)
	}
	if l.current() != 10 {
		t.Fatalf("after fast windows: %d, want the maximum 10", l.current())
	}
	// A slow window halves the limit; more slow windows within that window's span do not cut again.
	l.acquire(ctx) //nolint:errcheck // a background context
	l.release(time.Second, true)
	if l.current() != 5 {
		t.Fatalf("after a slow window: %d, want 5", l.current())
	}
	for range 5 {
		l.acquire(ctx) //nolint:errcheck // as above
		l.release(time.Second, true)
	}
	if l.current() != 5 {
		t.Errorf("late moves of the same episode cut again: %d", l.current())
	}
	// Failed moves change nothing; acquire blocks at the limit until a release.
	l.acquire(ctx) //nolint:errcheck // as above
	l.release(time.Hour, false)
	if l.current() != 5 {
		t.Errorf("a failed move changed the limit: %d", l.current())
	}
	for range 5 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := l.acquire(short); err == nil {
		t.Error("a sixth move started with the limit at 5")
	}
	go l.release(10*time.Millisecond, true)
	if err := l.acquire(ctx); err != nil {
		t.Errorf("a release did not wake the waiter: %v", err)
	}
	// With a client rate of 50 QPS (25 moves a second) and 60 ms windows, 2 x 25 x 0.06 = 3 in
	// flight keep the client busy: the limit grows no further, whatever the maximum.
	q := newAdaptiveLimit(10, 150*time.Millisecond, 50)
	for range 200 {
		q.acquire(ctx) //nolint:errcheck // a background context
		q.release(60*time.Millisecond, true)
	}
	if q.current() != 3 {
		t.Errorf("with a 50 QPS client the limit grew to %d, want 3", q.current())
	}
}
