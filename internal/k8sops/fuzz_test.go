// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"net/netip"
	"strings"
	"testing"
)

// Fuzz tests of every parser and every piece of IP math the plan relies on: no input panics,
// and what comes out keeps the invariants the resources build on. `make fuzz` runs each for
// FUZZTIME executions; `make test` runs 5000 of each.

var cidrSeeds = []string{"172.24.0.0/15", "100.64.0.0/13", "10.0.0.1/8", "fd00:10::/108", "::/0", "0.0.0.0/0",
	"255.255.255.255/32", "10.0.0.0/33", " 10.0.0.0/8 ", "ten", "", "::ffff:10.0.0.0/104", "fe80::/10%eth0"}

func FuzzParseCIDR(f *testing.F) {
	for _, s := range cidrSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseCIDR(s)
		if err != nil {
			if !strings.Contains(err.Error(), "not a CIDR") && !strings.Contains(err.Error(), "host bits set") {
				t.Fatalf("ParseCIDR(%q): unexplained error %v", s, err)
			}
			return
		}
		if !p.IsValid() || p.Masked() != p {
			t.Fatalf("ParseCIDR(%q) = %v: not a valid masked prefix", s, p)
		}
		if q, err := ParseCIDR(p.String()); err != nil || q != p {
			t.Fatalf("ParseCIDR(%q) = %v does not round-trip: %v, %v", s, p, q, err)
		}
	})
}

func FuzzValidateServiceCIDRs(f *testing.F) {
	for i, s := range cidrSeeds {
		f.Add(s, cidrSeeds[(i+3)%len(cidrSeeds)], i%3)
	}
	f.Fuzz(func(t *testing.T, a, b string, n int) {
		cidrs := []string{a, b, a}[:1+abs(n)%3]
		problems := ValidateServiceCIDRs(At("cidrs"), cidrs)
		for _, pr := range problems {
			steps := pr.Path.Steps
			if len(steps) == 0 || steps[0].Name != "cidrs" || len(steps) > 2 ||
				len(steps) == 2 && (steps[1].Kind != StepIndex || steps[1].Index >= len(cidrs)) || pr.Summary == "" || pr.Detail == "" {
				t.Fatalf("ValidateServiceCIDRs(%q): malformed problem %+v", cidrs, pr)
			}
		}
		if len(problems) > 0 {
			return
		}
		// Accepted: at most one range per family, each masked and with an allocatable address.
		families := map[bool]bool{}
		for _, s := range cidrs {
			p, err := netip.ParsePrefix(s)
			if err != nil || p.Masked() != p || families[p.Addr().Is4()] || allocatableRange(p) != nil {
				t.Fatalf("ValidateServiceCIDRs(%q) accepted %q", cidrs, s)
			}
			families[p.Addr().Is4()] = true
		}
	})
}

func FuzzCIDROverlapsAndContains(f *testing.F) {
	for i, s := range cidrSeeds {
		f.Add(s, cidrSeeds[(i+1)%len(cidrSeeds)])
	}
	f.Add("10.0.0.0/8", "10.1.2.3")
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, errAB := CIDROverlaps(a, b)
		ba, errBA := CIDROverlaps(b, a)
		if (errAB == nil) != (errBA == nil) || ab != ba {
			t.Fatalf("CIDROverlaps is not symmetric on %q, %q: %t/%v vs %t/%v", a, b, ab, errAB, ba, errBA)
		}
		checkArgError(t, errAB, 2)
		contains, err := CIDRContains(a, b)
		checkArgError(t, err, 2)
		if err != nil || !contains {
			return
		}
		// a contains b: then they overlap (when b is a CIDR), and a contains a.
		if strings.Contains(b, "/") && !ab {
			t.Fatalf("%q contains %q but they do not overlap", a, b)
		}
		if self, err := CIDRContains(a, a); err != nil || !self {
			t.Fatalf("%q does not contain itself: %v", a, err)
		}
	})
}

func FuzzMapOffset(f *testing.F) {
	f.Add("100.64.0.10", "100.64.0.0/13", "172.24.0.0/15")
	f.Add("100.64.0.0", "100.64.0.0/13", "172.24.0.0/15")
	f.Add("fd00:10::a", "fd00:10::/108", "fd00:24::/112")
	f.Add("10.0.0.1", "10.0.0.0/31", "10.1.0.0/32")
	f.Fuzz(func(t *testing.T, ip, from, to string) {
		got, err := MapOffset(ip, from, to)
		checkArgError(t, err, 3)
		if err != nil {
			return
		}
		addr, perr := netip.ParseAddr(got)
		target := netip.MustParsePrefix(strings.TrimSpace(to))
		if perr != nil || !target.Contains(addr) || !Allocatable(target, addr) {
			t.Fatalf("MapOffset(%q, %q, %q) = %q: not an allocatable address of the target", ip, from, to, got)
		}
	})
}

func FuzzNewKopsNetworking(f *testing.F) {
	f.Add("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", "10.20.0.0/16", "172.24.0.10", "100.64.0.0/13", "", "1.31", true)
	f.Add("fd00:24::/108", "fd00:16::/64", "::/0", "", "fd00:24::a", "fd00:10::/108", "", "", false)
	f.Add("100.64.0.0/13", "100.96.0.0/11", "100.64.0.0/10", "172.20.0.0/16", "100.64.0.10", "100.64.0.0/13", "169.254.20.10", "v1.29.6", true)
	f.Fuzz(func(t *testing.T, svc, pod, nm, network, dns, old, local, version string, calico bool) {
		k, err := NewKopsNetworking(KopsInput{ServiceCIDR: svc, PodCIDR: pod, NonMasqueradeCIDR: nm, NetworkCIDR: network,
			ClusterDNSIP: dns, OldServiceCIDR: old, NodeLocalDNSIP: local, KubernetesVersion: version, CalicoIPAM: calico})
		checkArgError(t, err, 7)
		if err != nil {
			return
		}
		s, p, n := netip.MustParsePrefix(k.ServiceClusterIPRange), netip.MustParsePrefix(k.PodCIDR), netip.MustParsePrefix(k.NonMasqueradeCIDR)
		server := netip.MustParseAddr(k.KubeDNSServerIP)
		switch {
		case s.Overlaps(p):
			t.Fatalf("accepted overlapping Service and pod ranges %s, %s", s, p)
		case !Within(n, p):
			t.Fatalf("accepted a pod range outside nonMasqueradeCIDR %s: %s", n, p)
		case !s.Contains(server):
			t.Fatalf("kubeDNS.serverIP %s outside the Service range %s", server, s)
		case k.KubeletClusterDNS != k.KubeDNSServerIP && strings.TrimSpace(local) == "":
			t.Fatalf("clusterDNS %s differs from serverIP %s without NodeLocal DNS", k.KubeletClusterDNS, k.KubeDNSServerIP)
		case k.AllocateNodeCIDRs == calico:
			t.Fatalf("allocateNodeCIDRs %t with calico_ipam %t", k.AllocateNodeCIDRs, calico)
		case !strings.Contains(k.YAML, "serviceClusterIPRange: "+k.ServiceClusterIPRange+"\n"):
			t.Fatalf("the YAML lacks the Service range:\n%s", k.YAML)
		}
		if network = strings.TrimSpace(network); network != "" && s.Addr().Is4() {
			if w := netip.MustParsePrefix(network); w.Overlaps(n) || w.Overlaps(s) {
				t.Fatalf("accepted network CIDR %s overlapping nonMasqueradeCIDR %s or the Service range %s", w, n, s)
			}
		}
	})
}

// checkArgError fails unless err is nil or a Finding naming one of n arguments.
func checkArgError(t *testing.T, err error, n int) {
	t.Helper()
	if err != nil {
		if arg := argOf(err); arg < 0 || arg >= n {
			t.Fatalf("error %v is not a Finding about one of %d arguments", err, n)
		}
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"https://203.0.113.10:6443", "127.0.0.1:6443", "https://[::1", "http://", "", "k8s.example.test"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, host string, tls bool) {
		u, err := ParseHost(host, tls)
		if err != nil {
			return
		}
		if again, err := ParseHost(u, tls); err != nil || again != u {
			t.Fatalf("ParseHost(%q) = %q, which parses to %q, %v", host, u, again, err)
		}
	})
}
