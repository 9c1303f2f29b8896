// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

func svc(ns, name string, typ corev1.ServiceType, labels map[string]string, ips ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.ServiceSpec{Type: typ, ClusterIPs: ips}}
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func TestPlanAllocations(t *testing.T) {
	services := []corev1.Service{
		svc("default", "kubernetes", corev1.ServiceTypeClusterIP, nil, "100.64.0.1"),
		svc("kube-system", "kube-dns", corev1.ServiceTypeClusterIP, nil, "100.64.0.10"),
		svc("kube-system", "kube-dns-legacy", corev1.ServiceTypeClusterIP, map[string]string{k8sops.DNSBridgeLabel: "true"}, "100.64.0.10"),
		svc("web", "ingress", corev1.ServiceTypeLoadBalancer, nil, "100.64.12.7"),
		svc("web", "ingress-2", corev1.ServiceTypeLoadBalancer, nil, "100.64.12.200"),
		svc("web", "moved", corev1.ServiceTypeClusterIP, nil, "172.24.0.9"),
		svc("web", "dual", corev1.ServiceTypeClusterIP, nil, "172.24.0.12", "fd00:10:96::12"),
		svc("web", "pinned", corev1.ServiceTypeNodePort, nil, "100.64.40.8"),
		svc("web", "headless", corev1.ServiceTypeClusterIP, nil, "None"),
		svc("web", "external", corev1.ServiceTypeExternalName, nil),
	}
	a, err := PlanAllocations(rangesOf("172.24.0.0/15"), services, nil, AllocationOptions{AlsoKeep: []string{"web/pinned"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(a.Outside); got != "[default/kubernetes kube-system/kube-dns kube-system/kube-dns-legacy web/dual web/ingress web/ingress-2 web/pinned]" {
		t.Errorf("Outside = %s", got)
	}
	// The bridge's 100.64.0.10, the two LB IPs (one /24: the narrowest range holding .7 and .200
	// is a /24), and the pinned .8 (network address of its /30 and /29, so a /28).
	if got := fmt.Sprint(a.Covering); got != "[100.64.0.8/30 100.64.12.0/24 100.64.40.0/28]" {
		t.Errorf("Covering = %s", got)
	}
	if len(a.Ranges) != 1 || a.Ranges[0].Used != 2 || a.Ranges[0].Free().Int64() != 131070-2 {
		t.Errorf("Ranges = %+v (counted from Services when no IPAddress list is given)", a.Ranges)
	}
	if len(a.Services) != 8 {
		t.Errorf("%d Services with ClusterIPs, want 8 (headless and ExternalName have none)", len(a.Services))
	}
	for _, s := range a.Services {
		if s.Name == "dual" && (s.Ranges[0] != netip.MustParsePrefix("172.24.0.0/15") || s.Ranges[1].IsValid()) {
			t.Errorf("dual-stack Service ranges %v: want the IPv4 in 172.24.0.0/15 and the IPv6 in none", s.Ranges)
		}
	}
}

// The covering ranges depend only on the IPs that stay: moving the other Services changes nothing.
func TestPlanAllocations_coveringIgnoresMovingServices(t *testing.T) {
	lb := svc("web", "lb", corev1.ServiceTypeLoadBalancer, nil, "100.64.3.3")
	before, _ := PlanAllocations(rangesOf("172.24.0.0/15"), []corev1.Service{lb, svc("a", "x", "", nil, "100.64.3.9")}, nil, AllocationOptions{})
	after, _ := PlanAllocations(rangesOf("172.24.0.0/15"), []corev1.Service{lb, svc("a", "x", "", nil, "172.24.3.9")}, nil, AllocationOptions{})
	if fmt.Sprint(before.Covering) != fmt.Sprint(after.Covering) || fmt.Sprint(after.Covering) != "[100.64.3.0/29]" {
		t.Errorf("covering changed or wrong: before %v after %v", before.Covering, after.Covering)
	}
}

func TestPlanAllocations_countsIPAddressesWhenGiven(t *testing.T) {
	used := []netip.Addr{netip.MustParseAddr("172.24.0.1"), netip.MustParseAddr("172.24.0.2"), netip.MustParseAddr("10.0.0.1")}
	a, err := PlanAllocations(rangesOf("172.24.0.0/15"), nil, used, AllocationOptions{})
	if err != nil || a.Ranges[0].Used != 2 {
		t.Errorf("got %+v, %v; want 2 used", a.Ranges, err)
	}
}

func TestPlanAllocations_unknownAlsoKeep(t *testing.T) {
	_, err := PlanAllocations(nil, nil, nil, AllocationOptions{AlsoKeep: []string{"web/nope"}})
	if err == nil || !strings.Contains(err.Error(), "web/nope") {
		t.Errorf("got %v, want an error naming web/nope", err)
	}
}

// A DNS bridge's IPs stay while it exists (its keep-range before the move is the moves data
// source's, TestPlanRecreationKeepCovering). An old-IP bridge's get no keep-range: a Ready range
// around them would give new Services IPs in the old range; they hold the retired old range.
func TestPlanAllocations_bridgesStay(t *testing.T) {
	moved := svc("kube-system", "kube-dns", corev1.ServiceTypeClusterIP, nil, "172.24.0.10")
	bridge := svc("kube-system", "kube-dns-legacy", corev1.ServiceTypeClusterIP, map[string]string{k8sops.DNSBridgeLabel: "true"}, "100.64.0.10")
	oldIP := svc("app", "web-old-ip", corev1.ServiceTypeClusterIP, map[string]string{k8sops.OldIPBridgeLabel: "true"}, "100.64.0.20")
	other := svc("app", "web", corev1.ServiceTypeClusterIP, nil, "100.64.0.30")
	a, err := PlanAllocations(rangesOf("172.24.0.0/15"), []corev1.Service{moved, bridge, oldIP, other}, nil, AllocationOptions{})
	if err != nil || fmt.Sprint(a.Covering) != "[100.64.0.8/30]" {
		t.Errorf("covering %v (%v), want the DNS bridge's range only", a.Covering, err)
	}
}

// rangesOf parses each of s.
func rangesOf(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range s {
		out = append(out, netip.MustParsePrefix(v))
	}
	return out
}
