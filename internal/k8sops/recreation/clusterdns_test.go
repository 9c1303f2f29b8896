// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// dnsLabelled is a Service labelled as the cluster DNS is, plainSvc one that is not.
func dnsLabelled(key string, ips ...string) corev1.Service {
	s := rsvc(key, "ClusterIP", ips...)
	s.Labels = map[string]string{DNSServiceLabel: "kube-dns"}
	return s
}

func plainSvc(key string, ips ...string) corev1.Service { return rsvc(key, "ClusterIP", ips...) }

func dnsCluster(svcs ...corev1.Service) Snapshot { return Snapshot{Services: svcs} }

func TestFindClusterDNS(t *testing.T) {
	bridge := rsvc("kube-system/kube-dns-legacy", "ClusterIP", "100.64.0.10")
	bridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true", DNSServiceLabel: "kube-dns"}
	bridge.Annotations = map[string]string{k8sops.BridgeForAnnotation: "kube-system/coredns"}
	for _, tc := range []struct {
		name      string
		snap      Snapshot
		hints     ClusterDNSHints
		extra     func(*Snapshot)
		want      string
		errOn     string // the attribute of the expected error
		noteMatch string
	}{
		{name: "kube-dns by name, unlabelled", snap: dnsCluster(plainSvc("kube-system/kube-dns", "100.64.0.10")), want: "kube-system/kube-dns"},
		{name: "coredns by label", snap: dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10"), plainSvc("app/web", "100.64.1.1")),
			want: "kube-system/coredns"},
		{name: "label outside kube-system does not count", snap: dnsCluster(dnsLabelled("app/coredns", "100.64.0.10"))},
		{name: "kube-dns wins over kube-dns-upstream (NodeLocal DNSCache)",
			snap: dnsCluster(dnsLabelled("kube-system/kube-dns", "100.64.0.10"), dnsLabelled("kube-system/kube-dns-upstream", "100.64.0.11")),
			want: "kube-system/kube-dns"},
		{name: "two labelled, nothing decides", snap: dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10"),
			dnsLabelled("kube-system/coredns-2", "100.64.0.11")), errOn: "dns_service"},
		{name: "kubelet clusterDNS decides", snap: dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10"),
			dnsLabelled("kube-system/coredns-2", "100.64.0.11")), hints: ClusterDNSHints{KubeletClusterDNS: []string{"100.64.0.11"}},
			want: "kube-system/coredns-2"},
		{name: "kubelet clusterDNS beats the name", snap: dnsCluster(plainSvc("kube-system/kube-dns", "100.64.0.20"),
			dnsLabelled("kube-system/coredns", "100.64.0.10")), hints: ClusterDNSHints{KubeletClusterDNS: []string{"100.64.0.10"}},
			want: "kube-system/coredns"},
		{name: "NodeLocal DNSCache link-local clusterDNS decides nothing", snap: dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10")),
			hints: ClusterDNSHints{KubeletClusterDNS: []string{"169.254.20.10"}}, want: "kube-system/coredns", noteMatch: "link-local"},
		{name: "link-local and ambiguous", snap: dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10"),
			dnsLabelled("kube-system/coredns-2", "100.64.0.11")), hints: ClusterDNSHints{KubeletClusterDNS: []string{"169.254.20.10"}},
			errOn: "dns_service"},
		{name: "clusterDNS on the bridge names the Service it stands in for",
			snap:  dnsCluster(dnsLabelled("kube-system/coredns", "172.24.0.10"), dnsLabelled("kube-system/coredns-2", "100.64.0.11")),
			extra: func(s *Snapshot) { s.Services = append(s.Services, bridge) }, hints: ClusterDNSHints{KubeletClusterDNS: []string{"100.64.0.10"}},
			want: "kube-system/coredns"},
		{name: "clusterDNS matching nothing: noted, label decides", snap: dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10")),
			hints: ClusterDNSHints{KubeletClusterDNS: []string{"10.96.0.10"}}, want: "kube-system/coredns", noteMatch: "which no Service has"},
		{name: "clusterDNS on a Service that is not the labelled DNS: noted, label decides",
			snap:  dnsCluster(dnsLabelled("kube-system/kube-dns", "172.24.0.11"), plainSvc("app/took-it", "172.24.0.10")),
			hints: ClusterDNSHints{KubeletClusterDNS: []string{"172.24.0.10"}}, want: "kube-system/kube-dns", noteMatch: "the IP of app/took-it"},
		{name: "clusterDNS on an unlabelled Service, none labelled", snap: dnsCluster(plainSvc("kube-system/dns-default", "100.64.0.10")),
			hints: ClusterDNSHints{KubeletClusterDNS: []string{"100.64.0.10"}}, want: "kube-system/dns-default"},
		{name: "named", snap: dnsCluster(plainSvc("kube-system/kube-dns", "100.64.0.10"), plainSvc("dns/resolver", "100.64.0.53")),
			hints: ClusterDNSHints{Named: "dns/resolver"}, want: "dns/resolver"},
		{name: "named but missing", snap: dnsCluster(plainSvc("kube-system/kube-dns", "100.64.0.10")),
			hints: ClusterDNSHints{Named: "kube-system/coredns"}, errOn: "dns_service"},
		{name: "only in the journal (deleted mid-move)", snap: Snapshot{Journal: []JournalEntry{{Key: "kube-system/coredns",
			Service: dnsCluster(dnsLabelled("kube-system/coredns", "172.24.0.10")).Services[0]}}}, want: "kube-system/coredns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.extra != nil {
				tc.extra(&tc.snap)
			}
			got := FindClusterDNS(tc.snap.Services, tc.snap.Journal, tc.hints)
			if got.Key != tc.want || paths(got.Errors) != tc.errOn {
				t.Errorf("found %q, errors on %q (%v); want %q, errors on %q", got.Key, paths(got.Errors), got.Errors, tc.want, tc.errOn)
			}
			if tc.noteMatch != "" && !slices.ContainsFunc(got.Notes, func(n string) bool { return strings.Contains(n, tc.noteMatch) }) {
				t.Errorf("notes %q lack %q", got.Notes, tc.noteMatch)
			}
			if tc.errOn != "" && !strings.Contains(got.Errors[0].Detail, "dns_service") {
				t.Errorf("the error does not say what to set: %v", got.Errors[0])
			}
		})
	}
}

// The found DNS Service is what the plan moves first, bridges and reports.
func TestPlanRecreationFollowsTheClusterDNS(t *testing.T) {
	snap := dnsCluster(dnsLabelled("kube-system/coredns", "100.64.0.10"), plainSvc("app/web", "100.64.0.5"))
	snap.Ranges = []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13"), readyRange("new", "172.24.0.0/15")}
	p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset})
	if p.DNSService != "kube-system/coredns" || !slices.Equal(p.First, []string{"kube-system/coredns"}) || !slices.Equal(p.DNSIPs, []string{"172.24.0.10"}) {
		t.Fatalf("DNS %q first %v IPs %v", p.DNSService, p.First, p.DNSIPs)
	}
	s, errs := PrepareRecreation(snap, planned(p), bridgeOn)
	if len(errs) > 0 || s.Bridge == nil || s.Bridge.Spec.ClusterIP != "100.64.0.10" || s.Bridge.Annotations[k8sops.BridgeForAnnotation] != "kube-system/coredns" {
		t.Errorf("bridge %+v errors %v", s.Bridge, errs)
	}
	snap.Services = append(snap.Services, dnsCluster(dnsLabelled("kube-system/coredns-2", "100.64.0.11")).Services...)
	if p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset}); paths(p.Errors) != "dns_service" {
		t.Errorf("ambiguous DNS: errors %v", p.Errors)
	}
}

// A dual-stack DNS Service whose IPv6 stays: the bridge takes only the IPv4 that moves, so the
// new DNS Service can keep its IPv6.
func TestPrepareRecreationBridgeDualStackOneFamilyStays(t *testing.T) {
	snap := dnsCluster(plainSvc(DNSServiceKey, "100.64.0.10", "fd00:10::a"))
	snap.Ranges = []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13", "fd00:10::/108"), readyRange("new", "172.24.0.0/15")}
	p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset})
	if len(p.Moves) != 1 || !slices.Equal(p.Moves[0].NewIPs, []string{"172.24.0.10", "fd00:10::a"}) {
		t.Fatalf("moves %v", p.Moves)
	}
	s, errs := PrepareRecreation(snap, planned(p), bridgeOn)
	if len(errs) > 0 || s.Bridge == nil || !slices.Equal(s.Bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) ||
		len(s.Bridge.Spec.IPFamilies) != 1 || *s.Bridge.Spec.IPFamilyPolicy != "SingleStack" {
		t.Errorf("bridge %+v errors %v: want IPv4 100.64.0.10 only", s.Bridge, errs)
	}
}

// takenIP reads the IP the apiserver names, as an address.
func TestTakenIP(t *testing.T) {
	invalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "x", field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs"), []string{"172.24.0.1", "172.24.0.10"}, msg)})
	}
	for _, tc := range []struct {
		err  error
		ips  []string
		want int
	}{
		{invalid("failed to allocate IP 172.24.0.10: provided IP is already allocated"), []string{"172.24.0.1", "172.24.0.10"}, 1},
		{invalid("failed to allocate IP 172.24.0.10: provided IP is already allocated"), []string{"172.24.0.1"}, -1},
		{invalid("failed to allocate IP fd00:24::a: provided IP is already allocated"), []string{"172.24.0.10", "fd00:24:0::a"}, 1},
		{invalid("failed to allocate IP 172.24.0.10: the provided network does not match the current range"), []string{"172.24.0.10"}, -1},
		{apierrors.NewAlreadyExists(schema.GroupResource{Resource: "services"}, "x"), []string{"172.24.0.10"}, -1},
	} {
		if got := takenIP(tc.err, tc.ips); got != tc.want {
			t.Errorf("takenIP(%v, %v) = %d, want %d", tc.err, tc.ips, got, tc.want)
		}
	}
}

// The replacement for a planned IP taken mid-apply stays in the target, skips planned IPs, and
// is claimed: no later call gives it out again.
func TestNextFree(t *testing.T) {
	x := &executor{targets: []netip.Prefix{netip.MustParsePrefix("172.24.0.0/30")},
		planned: map[netip.Addr]bool{netip.MustParseAddr("172.24.0.2"): true}}
	if ip, ok := x.nextFree(netip.MustParseAddr("172.24.0.2")); ok {
		t.Errorf("a /30 has nothing after .2 but its broadcast address: got %v", ip)
	}
	x.targets = []netip.Prefix{netip.MustParsePrefix("172.24.0.0/29")}
	x.planned[netip.MustParseAddr("172.24.0.3")] = true
	if ip, ok := x.nextFree(netip.MustParseAddr("172.24.0.2")); !ok || ip.String() != "172.24.0.4" {
		t.Errorf("next free after .2 with .3 planned: %v %v, want 172.24.0.4", ip, ok)
	}
	x.planned[netip.MustParseAddr("172.24.0.6")] = true
	if ip, ok := x.nextFree(netip.MustParseAddr("172.24.0.6")); !ok || ip.String() != "172.24.0.5" {
		t.Errorf("next free after .6 wraps past the broadcast, network, first, planned and claimed (.4) addresses: %v %v, want 172.24.0.5", ip, ok)
	}
	if ip, ok := x.nextFree(netip.MustParseAddr("172.24.0.2")); ok {
		t.Errorf("every address of the /29 is planned or claimed, yet nextFree gave %v", ip)
	}
	if _, ok := x.nextFree(netip.MustParseAddr("100.64.0.2")); ok {
		t.Error("an IP outside the target has no replacement inside it")
	}
}

// kube-dns moved but its bridge was refused: the journal entry the failed run kept makes the
// next plan restore it, which creates the bridge; once the bridge exists the entry is settled.
func TestPlanRecreationRetriesTheBridge(t *testing.T) {
	snap := dnsCluster(plainSvc(DNSServiceKey, "172.24.0.10"))
	snap.Ranges = []k8sops.ServiceCIDR{readyRange("kubernetes", "100.64.0.0/13"), readyRange("new", "172.24.0.0/15")}
	snap.Journal = []JournalEntry{{Key: DNSServiceKey, OldIPs: []string{"100.64.0.10"}, Service: plainSvc(DNSServiceKey, "172.24.0.10"), Object: "j1"}}
	p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset})
	if len(p.Restore) != 1 || p.Restore[0].Key != DNSServiceKey {
		t.Fatalf("restore = %v, want kube-dns's entry", p.Restore)
	}
	s, errs := PrepareRecreation(snap, planned(p), bridgeOn)
	if len(errs) > 0 || s.Bridge == nil || !slices.Equal(s.Bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) {
		t.Errorf("bridge %+v errors %v, want one on the journaled old IP", s.Bridge, errs)
	}
	bridge := plainSvc("kube-system/"+DefaultDNSBridgeName, "100.64.0.10")
	bridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true"}
	snap.Services = append(snap.Services, bridge)
	if p := PlanRecreation(snap, RecreationOptions{TargetCIDRs: []string{"172.24.0.0/15"}, IPAssignment: k8sops.PreserveOffset}); len(p.Restore) != 0 {
		t.Errorf("with the bridge there, restore = %v", p.Restore)
	}
}
