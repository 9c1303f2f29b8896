// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"fmt"
	"net/netip"
	"testing"
)

func reqs(pairs ...string) []PlacementRequest {
	var out []PlacementRequest
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, PlacementRequest{Key: pairs[i], Old: netip.MustParseAddr(pairs[i+1])})
	}
	return out
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, v := range s {
		out = append(out, netip.MustParseAddr(v))
	}
	return out
}

func placed(ps []Placement) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("%s=%s ", p.Key, p.New)
	}
	return s
}

func TestAssignIPs(t *testing.T) {
	old := prefixes("100.64.0.0/13", "fd00:10:96::/108")
	target := prefixes("172.24.0.0/15", "fd00:24::/108")
	tests := []struct {
		name string
		mode string
		tgt  []netip.Prefix
		reqs []PlacementRequest
		held []netip.Addr
		want string
	}{
		{"kube-dns keeps its offset", PreserveOffset, target, reqs("kube-system/kube-dns", "100.64.0.10"), nil,
			"kube-system/kube-dns=172.24.0.10 "},
		{"offset wraps modulo the target size", PreserveOffset, target, reqs("a/x", "100.66.0.5"), nil, // offset 2^17+5
			"a/x=172.24.0.5 "},
		{"collision probes forward, skipping held", PreserveOffset, target,
			reqs("a/x", "100.64.0.20", "a/y", "100.66.0.20"), addrs("172.24.0.21"),
			"a/x=172.24.0.20 a/y=172.24.0.22 "},
		{"never .1: default/kubernetes needs it", PreserveOffset, target, reqs("a/x", "100.64.0.1"), nil,
			"a/x=172.24.0.2 "},
		{"never the network address", PreserveOffset, target, reqs("a/x", "100.66.0.0"), nil,
			"a/x=172.24.0.2 "},
		{"never the broadcast address: wraps", PreserveOffset, prefixes("10.1.0.0/29"), reqs("a/x", "100.64.0.7"), nil,
			"a/x=10.1.0.2 "},
		{"IPv6 keeps its offset", PreserveOffset, target, reqs("a/v6", "fd00:10:96::abc"), nil,
			"a/v6=fd00:24::abc "},
		{"next_free fills from .2 in order", NextFree, target, reqs("kube-system/kube-dns", "100.64.0.10", "a/x", "100.64.3.3"), addrs("172.24.0.3"),
			"kube-system/kube-dns=172.24.0.2 a/x=172.24.0.4 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AssignIPs(tt.mode, tt.tgt, old, tt.reqs, tt.held)
			if err != nil || placed(got) != tt.want {
				t.Errorf("got %q, %v; want %q", placed(got), err, tt.want)
			}
		})
	}
}

func TestAssignIPs_fullTarget(t *testing.T) {
	// A /30 has .1 and .2 allocatable; .1 is reserved, so one Service fits.
	_, err := AssignIPs(PreserveOffset, prefixes("10.1.0.0/30"), nil, reqs("a/x", "100.64.0.9", "a/y", "100.64.0.10"), nil)
	if err == nil || err.Error() != "a/y (100.64.0.10): target range 10.1.0.0/30 is full" {
		t.Errorf("got %v, want a/y to find the target full", err)
	}
	if _, err := AssignIPs(PreserveOffset, prefixes("10.1.0.0/24"), nil, reqs("a/v6", "fd00::1"), nil); err == nil {
		t.Error("an IPv6 address with only an IPv4 target: want an error")
	}
	if _, err := AssignIPs("random", nil, nil, nil, nil); err == nil {
		t.Error("unknown mode: want an error")
	}
}

// FuzzAssignIPs: whatever the inputs, placements are distinct, allocatable in the target, never
// .1, never held, and the same inputs give the same result.
func FuzzAssignIPs(f *testing.F) {
	f.Add(uint32(0x6440000a), uint32(0x6442000a), uint32(0xac180001), uint8(24), true)
	f.Add(uint32(0x64400001), uint32(0x64400002), uint32(0xac180002), uint8(29), false)
	f.Fuzz(func(t *testing.T, a, b, h uint32, bits uint8, preserve bool) {
		target := netip.PrefixFrom(netip.MustParseAddr("172.24.0.0"), 16+int(bits%15)) // /16 … /30
		mode := NextFree
		if preserve {
			mode = PreserveOffset
		}
		rs := []PlacementRequest{{Key: "a", Old: addr4(a)}, {Key: "b", Old: addr4(b)}}
		held := []netip.Addr{addr4(h)}
		got, err := AssignIPs(mode, []netip.Prefix{target}, prefixes("100.64.0.0/13"), rs, held)
		if err != nil {
			if target.Bits() < 30 {
				t.Fatalf("%s into %s: %v", mode, target, err)
			}
			return // A /30 holds one Service besides .1.
		}
		again, _ := AssignIPs(mode, []netip.Prefix{target}, prefixes("100.64.0.0/13"), rs, held)
		if placed(got) != placed(again) {
			t.Fatalf("not deterministic: %s vs %s", placed(got), placed(again))
		}
		first := netip.MustParseAddr("172.24.0.1")
		if got[0].New == got[1].New {
			t.Fatalf("both placed at %s", got[0].New)
		}
		for _, p := range got {
			if !Allocatable(target, p.New) || p.New == first || p.New == held[0] {
				t.Fatalf("%s placed at %s in %s (held %s)", p.Key, p.New, target, held[0])
			}
		}
	})
}
