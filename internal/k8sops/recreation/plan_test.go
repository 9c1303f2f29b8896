// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

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

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
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

func readyRange(name string, cidrs ...string) k8sops.ServiceCIDR {
	return k8sops.ServiceCIDR{Name: name, CIDRs: cidrs, Ready: true}
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
		Ranges: []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13"), readyRange("new", "172.24.0.0/15")},
	}
	for _, s := range snap.Services {
		snap.Held = append(snap.Held, k8sops.ClusterIPs(&s)...)
	}
	return snap
}

func boolPtr(b bool) *bool { return &b }

func defaultOpts() RecreationOptions {
	return RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset, ExcludeNamespaces: []string{"other"}, DNSBridge: true}
}

func mv(key, typ string, oldIPs, newIPs []string) Move {
	_, name, _ := strings.Cut(key, "/")
	return Move{Key: key, UID: "uid-" + name, Type: typ, OldIPs: oldIPs, NewIPs: newIPs}
}

func paths(fs []k8sops.Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path.String())
	}
	return strings.Join(out, ",")
}

func TestPlanRecreationMixed(t *testing.T) {
	p := PlanRecreation(mixedSnapshot(), defaultOpts())
	if len(p.Errors) > 0 || len(p.Warnings) > 0 {
		t.Fatalf("errors %v warnings %v", p.Errors, p.Warnings)
	}
	wantMoves := []Move{
		mv("kube-system/kube-dns", "ClusterIP", []string{"100.64.0.10"}, []string{"172.24.0.10"}),
		mv("app/np", "NodePort", []string{"100.64.1.5"}, []string{"172.24.1.5"}),
		mv("app/web", "ClusterIP", []string{"100.64.7.200"}, []string{"172.24.7.200"}),
		// 100.70.1.7 is offset 6.1.7 in the /13; modulo the /15 that is 0.1.7, taken by nobody.
		mv("app/helm", "ClusterIP", []string{"100.70.1.7"}, []string{"172.24.1.7"}),
	}
	if !reflect.DeepEqual(p.Moves, wantMoves) || !slices.Equal(p.First, []string{DNSServiceKey}) {
		t.Errorf("moves = %v (first %v), want %v (first kube-dns)", p.Moves, p.First, wantMoves)
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
	if p.DNSService != DNSServiceKey || !reflect.DeepEqual(p.DNSIPs, []string{"172.24.0.10"}) {
		t.Errorf("DNS %q at %v", p.DNSService, p.DNSIPs)
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
	o.IPAssignment = k8sops.NextFree
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
		Ranges: []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13", "fd00:10::/108"), readyRange("new", "172.24.0.0/15")},
	}
	p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset})
	want := []Move{mv("a/ds", "ClusterIP", []string{"100.64.0.20", "fd00:10::20"}, []string{"172.24.0.20", "fd00:10::20"})}
	if !reflect.DeepEqual(p.Moves, want) {
		t.Errorf("moves = %v, want %v", p.Moves, want)
	}
	if len(p.Skipped) != 0 {
		t.Errorf("Services with nothing to move in the target's families are listed as skipped: %v", p.Skipped)
	}
	snap.Ranges = append(snap.Ranges, readyRange("new6", "fd00:24::/108"))
	p = PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15", "fd00:24::/108"}, IPAssignment: k8sops.PreserveOffset})
	got := map[string][]string{}
	for _, m := range p.Moves {
		got[m.Key] = m.NewIPs
	}
	if fmt.Sprint(got) != "map[a/ds:[172.24.0.20 fd00:24::20] a/keep6:[fd00:24::21 172.24.0.21] a/only6:[fd00:24::22]]" {
		t.Errorf("dual-stack moves = %v", got)
	}
}

func TestPlanRecreationFindings(t *testing.T) {
	o := defaultOpts()
	o.TargetCIDRs = nil
	if got := paths(PlanRecreation(mixedSnapshot(), o).Errors); got != "target_cidrs" {
		t.Errorf("empty target: errors on %q", got)
	}
	o = defaultOpts()
	o.First = []string{"kube-system/kube-dns", "app/nope"}
	if p := PlanRecreation(mixedSnapshot(), o); paths(p.Errors) != "first[1]" || !strings.Contains(p.Errors[0].Detail, "app/nope") {
		t.Errorf("missing first: %v", p.Errors)
	}
	o = defaultOpts()
	o.TargetCIDRs = []string{"172.24.0.0/30"} // 2 usable addresses minus .1: one fits
	snap := mixedSnapshot()
	snap.Ranges = append(snap.Ranges, readyRange("tiny", "172.24.0.0/30"))
	if p := PlanRecreation(snap, o); paths(p.Errors) != "target_cidrs" || !strings.Contains(p.Errors[0].Detail, "full") {
		t.Errorf("full target: %v", p.Errors)
	}
	// Not served yet (created in the same apply): planned all the same, and not warned of here
	// (the recreation's check, RecreationPreflight, counts the ranges the run creates).
	snap = mixedSnapshot()
	snap.Ranges = []k8sops.ServiceCIDR{{Name: "kubernetes", CIDRs: []string{"100.64.0.0/13"}, Terminating: true}}
	p := PlanRecreation(snap, defaultOpts())
	if len(p.Warnings) > 0 || len(p.Errors) > 0 || len(p.Moves) != 4 {
		t.Errorf("warnings %v errors %v moves %d", p.Warnings, p.Errors, len(p.Moves))
	}
	if got := RecreationPreflight(snap, PlannedRecreation{TargetCIDRs: defaultOpts().TargetCIDRs}, BridgeOptions{}); !slices.ContainsFunc(got, func(f k8sops.Finding) bool { return f.Summary == "Target Range Not Served" }) {
		t.Errorf("the recreation's check of an unserved target: %+v, want Target Range Not Served", got)
	}
}

// planned is what the resource would hold for a plan of snap.
func planned(p RecreationPlan) PlannedRecreation {
	return PlannedRecreation{TargetCIDRs: []string{"172.24.0.0/15"}, Moves: p.Moves, Restore: p.Restore, First: p.First,
		DNSService: p.DNSService, DNSBridge: true}
}

var bridgeOn = BridgeOptions{Enabled: true}

func TestPrepareRecreationBridge(t *testing.T) {
	snap := mixedSnapshot()
	s, errs := PrepareRecreation(snap, planned(PlanRecreation(snap, defaultOpts())), bridgeOn)
	if len(errs) > 0 || s.Bridge == nil || s.Bridge.Spec.ClusterIP != "100.64.0.10" || s.Bridge.Name != DefaultDNSBridgeName ||
		s.Bridge.Labels[k8sops.DNSBridgeLabel] != "true" || s.Bridge.Spec.Selector["app"] != "kube-dns" {
		t.Errorf("bridge = %+v, errors %v", s.Bridge, errs)
	}
	// The DNS Service's old range Terminating: the bridge's IP would be invalid.
	terminating := mixedSnapshot()
	terminating.Ranges[0].Terminating = true
	if _, errs := PrepareRecreation(terminating, planned(PlanRecreation(terminating, defaultOpts())), bridgeOn); paths(errs) != "dns_bridge" {
		t.Errorf("bridge outside a Ready range: %v", errs)
	}
	// A Service squatting on the bridge name.
	squat := mixedSnapshot()
	squat.Services = append(squat.Services, rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.11"))
	if _, errs := PrepareRecreation(squat, planned(PlanRecreation(squat, defaultOpts())), bridgeOn); paths(errs) != "dns_bridge_name" {
		t.Errorf("bridge name taken: %v", errs)
	}
	// Once kube-dns has moved and the bridge exists: nothing to do, and the bridge is not a Service to move.
	moved := mixedSnapshot()
	bridge := rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.10")
	bridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true"}
	for i := range moved.Services {
		if moved.Services[i].Name == "kube-dns" {
			moved.Services[i].Spec.ClusterIPs, moved.Services[i].Spec.ClusterIP = []string{"172.24.0.10"}, "172.24.0.10"
		}
	}
	moved.Services = append(moved.Services, bridge)
	p := PlanRecreation(moved, defaultOpts())
	if _, listed := p.Skipped["kube-system/kube-dns-legacy"]; listed || !slices.Contains(p.Staying, netip.MustParseAddr("100.64.0.10")) || len(p.First) != 0 {
		t.Errorf("the bridge must be neither moved nor listed, and its IP stays: skipped %v staying %v first %v", p.Skipped, p.Staying, p.First)
	}
	if s, errs := PrepareRecreation(moved, planned(p), bridgeOn); s.Bridge != nil || len(s.RemoveBridges) > 0 || len(errs) > 0 {
		t.Errorf("bridge kept: create %v remove %q errors %v", s.Bridge, s.RemoveBridges, errs)
	}
	if s, _ := PrepareRecreation(moved, planned(p), BridgeOptions{}); !slices.Equal(s.RemoveBridges, []string{"kube-system/" + DefaultDNSBridgeName}) {
		t.Errorf("dns_bridge = false: remove %q", s.RemoveBridges)
	}
}

// A second migration: kube-dns moved to 172.24.0.10 with its bridge on 100.64.0.10, and moves
// again, to 10.100.0.0/16. The first bridge does not keep 172.24.0.10, which the kubelets may
// name by now: a second bridge does, beside the first, under a name of its own; both stay, and
// dns_bridge = false removes both. The same holds for old-IP bridges: app/web's second move
// gets a bridge of its own on the IP it frees now.
func TestPrepareRecreationSecondMigrationBridgesEachOldIP(t *testing.T) {
	snap := mixedSnapshot()
	dnsBridge := rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.10")
	dnsBridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true"}
	for i := range snap.Services {
		if svc := &snap.Services[i]; svc.Name == "kube-dns" || svc.Name == "web" {
			ip := map[string]string{"kube-dns": "172.24.0.10", "web": "172.24.7.200"}[svc.Name]
			svc.Spec.ClusterIPs, svc.Spec.ClusterIP = []string{ip}, ip
		}
	}
	web := snap.Services[slices.IndexFunc(snap.Services, func(s corev1.Service) bool { return s.Name == "web" })]
	webBridge := oldIPBridgeService(&web, []string{"100.64.7.200"}, "default")
	snap.Services = append(snap.Services, dnsBridge, *webBridge)
	snap.Ranges = append(snap.Ranges, readyRange("newer", "10.100.0.0/16"))
	o := defaultOpts()
	o.TargetCIDRs = []string{"10.100.0.0/16"}
	o.Namespaces = []string{"kube-system", "app"}
	p := PlanRecreation(snap, o)
	if i := slices.IndexFunc(p.Moves, func(m Move) bool { return m.Key == "kube-system/kube-dns" }); i < 0 ||
		!slices.Equal(p.Moves[i].OldIPs, []string{"172.24.0.10"}) || !slices.Equal(p.Moves[i].NewIPs, []string{"10.100.0.10"}) {
		t.Fatalf("kube-dns not planned from 172.24.0.10 to 10.100.0.10: %+v", p.Moves)
	}
	s, errs := PrepareRecreation(snap, planned(p), BridgeOptions{Enabled: true, OldIPs: BridgesAll, Group: "default"})
	if len(errs) > 0 {
		t.Fatalf("findings %v", errs)
	}
	want := dnsBridgeName(DefaultDNSBridgeName, []string{"172.24.0.10"})
	if s.Bridge == nil || s.Bridge.Name != want || !slices.Equal(s.Bridge.Spec.ClusterIPs, []string{"172.24.0.10"}) || s.Bridge.Labels[k8sops.DNSBridgeLabel] != "true" {
		t.Errorf("second DNS bridge %+v: want %s on 172.24.0.10", s.Bridge, want)
	}
	if b := s.OldIPBridges["app/web"]; b == nil || b.Name == webBridge.Name || !slices.Equal(b.Spec.ClusterIPs, []string{"172.24.7.200"}) {
		t.Errorf("app/web's second bridge %+v: want one of its own on 172.24.7.200 beside %s", b, webBridge.Name)
	}
	// Interrupted after the second DNS bridge was made: found, not made again.
	snap.Services = append(snap.Services, *s.Bridge)
	if again, _ := PrepareRecreation(snap, planned(p), BridgeOptions{Enabled: true}); again.Bridge != nil {
		t.Errorf("a bridge on 172.24.0.10 exists, and another is made: %+v", again.Bridge)
	}
	off, _ := PrepareRecreation(snap, planned(p), BridgeOptions{})
	if !slices.Equal(off.RemoveBridges, []string{"kube-system/" + DefaultDNSBridgeName, "kube-system/" + want}) {
		t.Errorf("dns_bridge = false removes %v, want both DNS bridges", off.RemoveBridges)
	}
}

// An apply that stopped after deleting kube-dns, before the bridge existed: the next plan
// restores kube-dns at its new IP and creates the bridge on the old one it journaled.
func TestPrepareRecreationBridgeAfterInterruptedDNSMove(t *testing.T) {
	snap := mixedSnapshot()
	snap.Services = slices.DeleteFunc(snap.Services, func(s corev1.Service) bool { return s.Name == "kube-dns" })
	snap.Held = slices.DeleteFunc(snap.Held, func(ip netip.Addr) bool { return ip.String() == "100.64.0.10" })
	snap.Journal = []JournalEntry{{Key: DNSServiceKey, OldIPs: []string{"100.64.0.10"},
		Service: rsvc(DNSServiceKey, "ClusterIP", "172.24.0.10"), Object: "j1"}}
	p := PlanRecreation(snap, defaultOpts())
	if len(p.Restore) != 1 || p.Restore[0].NewIPs[0] != "172.24.0.10" || p.DNSService != DNSServiceKey || p.DNSIPs[0] != "172.24.0.10" {
		t.Fatalf("restore = %v, DNS %q %v", p.Restore, p.DNSService, p.DNSIPs)
	}
	s, errs := PrepareRecreation(snap, planned(p), bridgeOn)
	if len(errs) > 0 || s.Bridge == nil || !slices.Equal(s.Bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) || len(s.Restore) != 1 {
		t.Fatalf("bridge = %+v (errors %v), want one on the journaled old IP 100.64.0.10", s.Bridge, errs)
	}
	if s, _ := PrepareRecreation(snap, planned(p), BridgeOptions{}); s.Bridge != nil {
		t.Errorf("dns_bridge = false still plans a bridge: %+v", s.Bridge)
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
	// Journaled Services that exist with all they had need nothing; one that lost its
	// hand-made Endpoints is settled at the IPs it has.
	want := []Restore{{"app/gone", []string{"172.24.9.10"}, "j1"}, {"app/gone2", []string{"172.24.1.5"}, "j2"}}
	if !reflect.DeepEqual(p.Restore, want) {
		t.Errorf("restore = %v, want %v", p.Restore, want)
	}
	for _, m := range p.Moves {
		if m.Key == "app/np" && m.NewIPs[0] == "172.24.1.5" {
			t.Error("a move took the IP a restore keeps")
		}
	}
	// A restore whose journal entry another apply settled meanwhile is reported, not attempted.
	later := snap
	later.Journal = snap.Journal[1:]
	s, errs := PrepareRecreation(later, planned(p), bridgeOn)
	if len(errs) > 0 || len(s.Restore) != 1 || !strings.Contains(s.NotMoved["app/gone"], "journal entry is gone") ||
		!s.Settled["j1 app/web"] || !s.Settled["j3 app/np"] {
		t.Errorf("restore %v, not moved %v, settled %v, errors %v", s.Restore, s.NotMoved, s.Settled, errs)
	}
	lost := mixedSnapshot()
	lost.Journal = []JournalEntry{{Key: "app/web", Service: rsvc("app/web", "ClusterIP", "172.24.7.200"), Object: "j4",
		Endpoints: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}}}}
	if p := PlanRecreation(lost, defaultOpts()); !reflect.DeepEqual(p.Restore, []Restore{{"app/web", []string{"100.64.7.200"}, "j4"}}) {
		t.Errorf("a journaled Service whose Endpoints are gone: restore %v", p.Restore)
	}
}

// Two entries for one gone Service (re-journaled after a change mid-apply) restore the newer at
// the journaled IP, which the older entry must not count as taken; both are settled with it.
func TestPlanRecreationRestoreNewestOfTwo(t *testing.T) {
	snap := mixedSnapshot()
	older := rsvc("app/gone", "ClusterIP", "172.24.9.9")
	newer := older
	newer.Labels = map[string]string{"changed": "during the apply"}
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	snap.Journal = []JournalEntry{
		{Key: "app/gone", OldIPs: []string{"100.64.9.9"}, Service: newer, Object: "j2", Written: at.Add(time.Second)},
		{Key: "app/gone", OldIPs: []string{"100.64.9.9"}, Service: older, Object: "j1", Written: at},
	}
	p := PlanRecreation(snap, defaultOpts())
	if want := []Restore{{"app/gone", []string{"172.24.9.9"}, "j2"}}; !reflect.DeepEqual(p.Restore, want) {
		t.Errorf("restore = %v, want %v", p.Restore, want)
	}
	s, errs := PrepareRecreation(snap, planned(p), bridgeOn)
	if len(errs) > 0 || len(s.Restore) != 1 || len(s.Unplanned) > 0 {
		t.Errorf("restore %v, unplanned %v, errors %v", s.Restore, s.Unplanned, errs)
	}
}

// TestPlanRecreationNamespaceGoing: a journal entry whose namespace is being deleted or gone is
// dropped, not restored (the create would fail on every apply), and settled at apply; Services
// being deleted, or in a namespace being deleted, are skipped with that reason.
func TestPlanRecreationNamespaceGoing(t *testing.T) {
	snap := mixedSnapshot()
	snap.Namespaces = map[string]corev1.NamespacePhase{"app": corev1.NamespaceActive, "kube-system": corev1.NamespaceActive,
		"default": corev1.NamespaceActive, "other": corev1.NamespaceActive, "doomed": corev1.NamespaceTerminating}
	snap.Services = append(snap.Services, rsvc("doomed/z", "ClusterIP", "100.64.2.3"))
	deleting := rsvc("app/deleting", "ClusterIP", "100.64.2.4")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	snap.Services = append(snap.Services, deleting)
	snap.Journal = []JournalEntry{
		{Key: "doomed/x", Service: rsvc("doomed/x", "ClusterIP", "172.24.2.1"), Object: "j1"},
		{Key: "gone/y", Service: rsvc("gone/y", "ClusterIP", "172.24.2.2"), Object: "j1"},
		{Key: "app/lost", Service: rsvc("app/lost", "ClusterIP", "172.24.2.5"), Object: "j2"},
	}
	p := PlanRecreation(snap, defaultOpts())
	wantDropped := map[string]string{"doomed/x": "its namespace doomed is being deleted", "gone/y": "its namespace gone is gone"}
	if !reflect.DeepEqual(p.Dropped, wantDropped) {
		t.Errorf("dropped = %v, want %v", p.Dropped, wantDropped)
	}
	if len(p.Restore) != 1 || p.Restore[0].Key != "app/lost" {
		t.Errorf("restore = %v, want app/lost only", p.Restore)
	}
	if p.Skipped["doomed/z"] != "its namespace doomed is being deleted" || p.Skipped["app/deleting"] != "being deleted" {
		t.Errorf("skipped: doomed/z %q, app/deleting %q", p.Skipped["doomed/z"], p.Skipped["app/deleting"])
	}
	s, errs := PrepareRecreation(snap, planned(p), bridgeOn)
	if len(errs) > 0 || !s.Settled["j1 doomed/x"] || !s.Settled["j1 gone/y"] || s.Settled["j2 app/lost"] {
		t.Errorf("settled %v, errors %v", s.Settled, errs)
	}
	// Planned before the namespace went: the restore and the move are not made at apply.
	before := planned(p)
	before.Restore = append(before.Restore, Restore{Key: "doomed/x", NewIPs: []string{"172.24.2.1"}, Journal: "j1"})
	before.Moves = append(before.Moves, mv("doomed/z", "ClusterIP", []string{"100.64.2.3"}, []string{"172.24.2.3"}))
	s, _ = PrepareRecreation(snap, before, bridgeOn)
	if !strings.Contains(s.NotMoved["doomed/x"], "being deleted") || !strings.Contains(s.NotMoved["doomed/z"], "being deleted") ||
		slices.ContainsFunc(s.Restore, func(r Restore) bool { return r.Key == "doomed/x" }) {
		t.Errorf("apply after the namespace went Terminating: restore %v, not moved %v", s.Restore, s.NotMoved)
	}
}

func TestPrepareRecreation(t *testing.T) {
	snap := mixedSnapshot()
	p := planned(PlanRecreation(snap, defaultOpts()))
	s, errs := PrepareRecreation(snap, p, bridgeOn)
	if len(errs) > 0 || len(s.Moves) != 4 || s.Moves[0].Key != DNSServiceKey || s.First != 1 || len(s.NotMoved) != 0 {
		t.Fatalf("unchanged cluster: moves %v first %d not moved %v errors %v", s.Moves, s.First, s.NotMoved, errs)
	}
	// The cluster changes between plan and apply: every move that no longer holds is left out
	// and said why; the rest go ahead, in the planned order.
	churned := mixedSnapshot()
	byName := func(name string) *corev1.Service {
		i := slices.IndexFunc(churned.Services, func(s corev1.Service) bool { return s.Name == name })
		return &churned.Services[i]
	}
	byName("web").UID = "uid-web-2"                         // replaced
	byName("np").Spec.Type = corev1.ServiceTypeLoadBalancer // became a LoadBalancer
	churned.Services = slices.DeleteFunc(churned.Services, func(s corev1.Service) bool { return s.Name == "helm" })
	churned.Services = append(churned.Services, rsvc("app/late", "ClusterIP", "100.64.0.99"))
	s, errs = PrepareRecreation(churned, p, bridgeOn)
	wantReasons := map[string]string{"app/web": "replaced since the plan", "app/np": "type changed from NodePort to LoadBalancer",
		"app/helm": "deleted since the plan"}
	if len(errs) > 0 || len(s.Moves) != 1 || s.Moves[0].Key != DNSServiceKey || len(s.NotMoved) != len(wantReasons) {
		t.Errorf("churned: moves %v not moved %v errors %v", s.Moves, s.NotMoved, errs)
	}
	for k, r := range wantReasons {
		if !strings.Contains(s.NotMoved[k], r) {
			t.Errorf("not moved %s: %q, want %q", k, s.NotMoved[k], r)
		}
	}
	// A planned IP taken meanwhile.
	taken := mixedSnapshot()
	taken.Held = append(taken.Held, netip.MustParseAddr("172.24.7.200"))
	if s, _ := PrepareRecreation(taken, p, bridgeOn); !strings.Contains(s.NotMoved["app/web"], "172.24.7.200 is taken now") {
		t.Errorf("taken IP: %v", s.NotMoved)
	}
	// Already moved (a partial apply): reported, and harmless even for the first move.
	moved := mixedSnapshot()
	moved.Services[6].Spec.ClusterIPs = []string{"172.24.0.10"}
	if s, errs := PrepareRecreation(moved, p, bridgeOn); len(errs) > 0 || s.NotMoved[DNSServiceKey] != reasonAlreadyMoved || s.Bridge != nil {
		t.Errorf("DNS already moved: not moved %v, bridge %v, errors %v", s.NotMoved, s.Bridge, errs)
	}
	// The DNS move no longer holds: nothing moves.
	gone := mixedSnapshot()
	gone.Services[6].UID = "uid-other"
	if _, errs := PrepareRecreation(gone, p, bridgeOn); paths(errs) != `moves["kube-system/kube-dns"]` {
		t.Errorf("DNS replaced: errors %v", errs)
	}
}

func TestValidatePlanned(t *testing.T) {
	good := planned(PlanRecreation(mixedSnapshot(), defaultOpts()))
	if fs := ValidatePlanned(good); len(fs) > 0 {
		t.Fatalf("the data source's own plan: %v", fs)
	}
	for _, tt := range []struct {
		name string
		edit func(p *PlannedRecreation)
		path string
	}{
		{"outside the target", func(p *PlannedRecreation) { p.Moves[1].NewIPs = []string{"10.0.0.5"} }, `moves["app/np"]`},
		{"network address", func(p *PlannedRecreation) { p.Moves[1].NewIPs = []string{"172.24.0.0"} }, `moves["app/np"]`},
		{"broadcast address", func(p *PlannedRecreation) { p.Moves[1].NewIPs = []string{"172.25.255.255"} }, `moves["app/np"]`},
		{"first address", func(p *PlannedRecreation) { p.Moves[1].NewIPs = []string{"172.24.0.1"} }, `moves["app/np"]`},
		{"duplicate", func(p *PlannedRecreation) { p.Moves[2].NewIPs = p.Moves[1].NewIPs }, `moves["app/web"]`},
		{"unpaired", func(p *PlannedRecreation) { p.Moves[1].NewIPs = []string{"172.24.1.5", "172.24.1.6"} }, `moves["app/np"]`},
		{"family", func(p *PlannedRecreation) { p.Moves[1].NewIPs = []string{"fd00::5"} }, `moves["app/np"]`},
		{"bad key", func(p *PlannedRecreation) { p.Moves[1].Key = "np" }, `moves["np"]`},
		{"first move not a move", func(p *PlannedRecreation) { p.First = append(p.First, "app/gone") }, `first[1]`},
		{"restore on the broadcast", func(p *PlannedRecreation) {
			p.Restore = []Restore{{Key: "app/x", NewIPs: []string{"172.25.255.255"}, Journal: "j"}}
		}, `restore["app/x"].new_ips[0]`},
		// The cluster DNS Service moving without its bridge: every resolver dark at once.
		{"DNS without its bridge", func(p *PlannedRecreation) { p.DNSBridge = false }, `dns_bridge`},
		{"DNS restored without its bridge", func(p *PlannedRecreation) {
			p.DNSBridge = false
			p.Moves = slices.DeleteFunc(p.Moves, func(m Move) bool { return m.Key == "kube-system/kube-dns" })
			p.First = nil
			p.Restore = []Restore{{Key: "kube-system/kube-dns", NewIPs: []string{"172.24.0.10"}, Journal: "j"}}
		}, `dns_bridge`},
		{"DNS without its bridge, reason stated", func(p *PlannedRecreation) {
			p.DNSBridge, p.DNSBridgeOffReason = false, "every node runs NodeLocal DNSCache on its own address"
		}, ``},
		{"bridge off once DNS has moved", func(p *PlannedRecreation) {
			p.DNSBridge = false
			p.Moves = slices.DeleteFunc(p.Moves, func(m Move) bool { return m.Key == "kube-system/kube-dns" })
			p.First = nil
		}, ``},
	} {
		p := planned(PlanRecreation(mixedSnapshot(), defaultOpts()))
		tt.edit(&p)
		if got := paths(ValidatePlanned(p)); got != tt.path {
			t.Errorf("%s: findings at %q, want %q", tt.name, got, tt.path)
		}
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

func TestRecreationResult_FollowUps(t *testing.T) {
	steps := RecreationSteps{DNSService: "kube-system/kube-dns"}
	if got := (RecreationResult{}).FollowUps(steps); len(got) != 0 {
		t.Errorf("nothing recreated: got %q, want no follow-ups", got)
	}
	app := Move{Key: "app/web", OldIPs: []string{"100.64.0.20"}, NewIPs: []string{"172.24.0.20"}}
	got := RecreationResult{Recreated: []Move{app}}.FollowUps(steps)
	if len(got) != 1 || !strings.Contains(got[0], "k8scidr_apiserver_service") {
		t.Errorf("an app Service moved: got %q, want only the apiserver Service's step", got)
	}
	dns := Move{Key: "kube-system/kube-dns", OldIPs: []string{"100.64.0.10"}, NewIPs: []string{"172.24.0.10"}}
	got = RecreationResult{Recreated: []Move{app, dns}, BridgeCreated: "kube-system/kube-dns-bridge"}.FollowUps(steps)
	want := []string{"clusterDNS (kOps: kubeDNS.serverIP) to kube-system/kube-dns's new IP 172.24.0.10",
		"the DNS bridge kube-system/kube-dns-bridge answers on 100.64.0.10", "dns_moved_at", "k8scidr_apiserver_service"}
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("cluster DNS moved: follow-ups %q lack %q", got, w)
		}
	}
}

// keep_cidrs: the ranges that keep the IPs that stay outside the target valid. Before the move
// the cluster DNS Service's old IP stays (its bridge will take it), after it the bridge's; with
// the bridge switched off, neither; a LoadBalancer's IP always.
func TestPlanRecreationKeepCovering(t *testing.T) {
	dns := rsvc("kube-system/kube-dns", "ClusterIP", "100.64.0.10")
	moved := rsvc("kube-system/kube-dns", "ClusterIP", "172.24.0.10")
	bridge := rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.10")
	bridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true"}
	other := rsvc("app/web", "ClusterIP", "100.64.0.20")
	lb := rsvc("app/lb", "LoadBalancer", "100.64.12.7")
	dual := rsvc("kube-system/kube-dns", "ClusterIP", "100.64.0.10", "fd00:10::a")
	for _, c := range []struct {
		name     string
		services []corev1.Service
		bridge   bool
		want     string
	}{
		{"before the move", []corev1.Service{dns, other}, true, "[100.64.0.8/30]"},
		{"after the move", []corev1.Service{moved, bridge, other}, true, "[100.64.0.8/30]"},
		{"bridge switched off", []corev1.Service{moved, bridge, other}, false, "[]"},
		{"moved without a bridge", []corev1.Service{dns, other}, false, "[]"},
		{"a LoadBalancer stays", []corev1.Service{moved, bridge, other, lb}, false, "[100.64.12.0/28]"},
		// Only the IPv4 moves: the IPv6 stays in its own range, which nothing retires.
		{"dual-stack DNS", []corev1.Service{dual, other}, true, "[100.64.0.8/30]"},
	} {
		snap := Snapshot{Services: c.services, Ranges: []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13"), readyRange("new", "172.24.0.0/15")}}
		o := defaultOpts()
		o.DNSBridge = c.bridge
		p := PlanRecreation(snap, o)
		if len(p.Errors) > 0 || fmt.Sprint(p.KeepCovering) != c.want {
			t.Errorf("%s: keep %v (%v), want %s", c.name, p.KeepCovering, p.Errors, c.want)
		}
	}
}

// TestPlanRecreation_previous: the way back puts each Service on the IPs it had before its last
// move, which preserve_offset from a /13 into a /15 and back cannot (100.66.0.20 went to
// 172.24.0.20, whose offset maps back to 100.64.0.20); IPs its own bridge holds count as free
// for it and are taken over; an IP another Service took, or nothing recorded, falls back to
// preserve_offset with a note.
func TestPlanRecreation_previous(t *testing.T) {
	moved := func(key, now, before string) corev1.Service {
		s := rsvc(key, "ClusterIP", now)
		s.Annotations = map[string]string{k8sops.PreviousClusterIPsAnnotation: before}
		return s
	}
	dns := moved("kube-system/kube-dns", "172.24.0.10", "100.64.0.10")
	dnsBridge := rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.10")
	dnsBridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true"}
	dnsBridge.Annotations = map[string]string{k8sops.BridgeForAnnotation: "kube-system/kube-dns"}
	oldIP := rsvc("app/b-old-1234567890", "ClusterIP", "100.70.3.4")
	oldIP.Labels = map[string]string{k8sops.OldIPBridgeLabel: "true", k8sops.OldIPBridgeForLabel: "b"}
	oldIP.Annotations = map[string]string{k8sops.BridgeForAnnotation: "app/b"}
	snap := Snapshot{
		Services: []corev1.Service{
			dns, dnsBridge, oldIP,
			moved("app/a", "172.24.0.20", "100.66.0.20"),
			moved("app/b", "172.26.3.4", "100.70.3.4"), // 172.26 is outside the /15 on purpose: a wider new range
			moved("app/c", "172.24.0.30", "100.65.0.30"),
			rsvc("app/taker", "ClusterIP", "100.65.0.30"), // took c's old IP meanwhile
			rsvc("app/fresh", "ClusterIP", "172.24.9.9"),  // created in the new range: nothing recorded
		},
		Ranges: []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13"), readyRange("new", "172.24.0.0/14")},
	}
	for _, s := range snap.Services {
		snap.Held = append(snap.Held, k8sops.ClusterIPs(&s)...)
	}
	o := RecreationOptions{TargetCIDRs: []string{"100.64.0.0/13"}, IPAssignment: k8sops.Previous, DNSBridge: true}
	p := PlanRecreation(snap, o)
	if len(p.Errors) > 0 {
		t.Fatal(p.Errors)
	}
	got := map[string]string{}
	for _, m := range p.Moves {
		got[m.Key] = strings.Join(m.NewIPs, ",")
	}
	want := map[string]string{
		"kube-system/kube-dns": "100.64.0.10", // its bridge's IP: taken over
		"app/a":                "100.66.0.20", // preserve_offset would give 100.64.0.20
		"app/b":                "100.70.3.4",  // its old-IP bridge's IP: taken over
		"app/c":                "100.64.0.30", // its old IP is taken: preserve_offset
		"app/fresh":            "100.64.9.9",  // nothing recorded: preserve_offset
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("moves %v\nwant %v", got, want)
	}
	notes := strings.Join(p.WayBack, "\n")
	for _, s := range []string{"Going back to IPs their own bridges hold now (2): app/b on 100.70.3.4 (bridge app/b-old-1234567890), " +
		"kube-system/kube-dns on 100.64.0.10 (bridge kube-system/kube-dns-legacy)", "Not going back", "(1): app/c (100.65.0.30)",
		"No earlier IP inside", "(1): app/fresh (172.24.9.9)"} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes lack %q:\n%s", s, notes)
		}
	}

	// At apply the bridges are taken over, not counted as taking the planned IPs.
	steps, errs := PrepareRecreation(snap, PlannedRecreation{TargetCIDRs: o.TargetCIDRs, Moves: p.Moves, First: p.First,
		DNSService: p.DNSService}, BridgeOptions{Enabled: true})
	if len(errs) > 0 || len(steps.NotMoved) > 0 {
		t.Fatalf("errors %v, not moved %v", errs, steps.NotMoved)
	}
	taken := map[string]string{}
	for key, bs := range steps.TakeOver {
		for _, b := range bs {
			taken[key] += k8sops.SvcKey(b)
		}
	}
	if want := map[string]string{"kube-system/kube-dns": "kube-system/kube-dns-legacy", "app/b": "app/b-old-1234567890"}; !reflect.DeepEqual(taken, want) {
		t.Errorf("take over %v, want %v", taken, want)
	}
	// The DNS move frees 172.24.0.10: a new DNS bridge keeps it for kubelets already pointed there.
	if steps.Bridge == nil || !slices.Equal(steps.Bridge.Spec.ClusterIPs, []string{"172.24.0.10"}) {
		t.Errorf("DNS bridge %v, want one on 172.24.0.10", steps.Bridge)
	}
}

// TestMovedCopyRecordsPrevious: the copy a move creates remembers the IPs it had.
func TestMovedCopyRecordsPrevious(t *testing.T) {
	s := rsvc("app/a", "ClusterIP", "100.66.0.20")
	c := movedCopy(&s, []string{"172.24.0.20"})
	if got := c.Annotations[k8sops.PreviousClusterIPsAnnotation]; got != "100.66.0.20" || c.Spec.ClusterIP != "172.24.0.20" {
		t.Errorf("copy at %s records %q", c.Spec.ClusterIP, got)
	}
	if s.Annotations != nil {
		t.Errorf("the original changed: %v", s.Annotations)
	}
}
