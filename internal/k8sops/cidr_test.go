// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"math/big"
	"net/netip"
	"strings"
	"testing"
)

func TestValidateServiceCIDRs(t *testing.T) {
	tests := []struct {
		name    string
		cidrs   []string
		index   int
		summary string
		detail  string
	}{
		{"ok single", []string{"172.24.0.0/15"}, 0, "", ""},
		{"ok dual-stack", []string{"172.24.0.0/15", "fd00:10:96::/108"}, 0, "", ""},
		{"ok /30 keep-range", []string{"100.64.0.8/30"}, 0, "", ""},
		{"ok /64", []string{"fd00:1::/64"}, 0, "", ""},
		{"none", nil, -1, "Wrong Number of CIDRs", "got 0"},
		{"three", []string{"10.0.0.0/24", "fd00::/108", "10.1.0.0/24"}, -1, "Wrong Number of CIDRs", "got 3"},
		{"not a CIDR", []string{"172.24.0.0"}, 0, "Invalid CIDR", "not a CIDR prefix"},
		{"host bits", []string{"172.25.0.0/15"}, 0, "CIDR Has Host Bits Set", "the range it names is 172.24.0.0/15"},
		{"two IPv4", []string{"172.24.0.0/15", "10.0.0.0/24"}, 1, "Two CIDRs of One Family", "both IPv4"},
		{"two IPv6", []string{"fd00::/108", "fd01::/108"}, 1, "Two CIDRs of One Family", "both IPv6"},
		{"IPv4 /32", []string{"100.64.0.10/32"}, 0, "Unusable Service Range", "ClusterIPOutOfRange"},
		{"IPv4 /31", []string{"100.64.0.10/31"}, 0, "Unusable Service Range", "use /30 or wider"},
		{"IPv6 /128", []string{"172.24.0.0/15", "fd00::1/128"}, 1, "Unusable Service Range", "IPv6 /128"},
		{"IPv6 /48", []string{"fd00::/48"}, 0, "Unusable Service Range", "wider than /64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ValidateServiceCIDRs(At("cidrs"), tt.cidrs)
			want := At("cidrs")
			if tt.index >= 0 {
				want = want.Index(tt.index)
			}
			if tt.summary == "" {
				if len(got) != 0 {
					t.Fatalf("unexpected problems: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Path.String() != want.String() || got[0].Summary != tt.summary || !strings.Contains(got[0].Detail, tt.detail) {
				t.Fatalf("got %+v, want one problem at %s %q containing %q", got, want, tt.summary, tt.detail)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	huge, _ := new(big.Int).SetString("18446744073709551615", 10) // 2^64 - 1
	tests := map[string]*big.Int{
		"100.64.0.0/13":    big.NewInt(524286),
		"172.24.0.0/15":    big.NewInt(131070),
		"10.0.0.0/28":      big.NewInt(14), // the write-up's 13 Services + default/kubernetes
		"10.0.0.0/30":      big.NewInt(2),
		"10.0.0.0/31":      big.NewInt(0),
		"10.0.0.0/32":      big.NewInt(0),
		"fd00:10:96::/108": big.NewInt(1048575),
		"fd00::/64":        huge,
		"fd00::/127":       big.NewInt(1),
		"fd00::/128":       big.NewInt(0),
	}
	for cidr, want := range tests {
		if got := Capacity(netip.MustParsePrefix(cidr)); got.Cmp(want) != 0 {
			t.Errorf("Capacity(%s) = %s, want %s", cidr, got, want)
		}
	}
}

func TestAllocatable(t *testing.T) {
	p := netip.MustParsePrefix("100.64.0.0/24")
	for ip, want := range map[string]bool{
		"100.64.0.0": false, "100.64.0.1": true, "100.64.0.254": true, "100.64.0.255": false, "100.64.1.1": false,
	} {
		if got := Allocatable(p, netip.MustParseAddr(ip)); got != want {
			t.Errorf("Allocatable(%s, %s) = %v", p, ip, got)
		}
	}
	p6 := netip.MustParsePrefix("fd00::/120")
	for ip, want := range map[string]bool{"fd00::": false, "fd00::ff": true, "fd00::100": false} {
		if got := Allocatable(p6, netip.MustParseAddr(ip)); got != want {
			t.Errorf("Allocatable(%s, %s) = %v", p6, ip, got)
		}
	}
}

func TestCoveringPrefix(t *testing.T) {
	tests := []struct {
		ips  []string
		want string
	}{
		{[]string{"100.64.0.10"}, "100.64.0.8/30"},
		{[]string{"100.64.0.8"}, "100.64.0.0/28"},  // .8 is the network address of the /30 and the /29
		{[]string{"100.64.0.11"}, "100.64.0.8/29"}, // .11 is the broadcast address of the /30
		{[]string{"100.64.3.200", "100.64.3.17"}, "100.64.3.0/24"},
		{[]string{"100.64.0.1", "100.64.255.254"}, "100.64.0.0/16"},
		{[]string{"fd00::1:5"}, "fd00::1:4/127"}, // IPv6 has no broadcast address
		{[]string{"fd00::1:4"}, "fd00::1:0/125"}, // :4 is the network address of the /127 and the /126
	}
	for _, tt := range tests {
		var ips []netip.Addr
		for _, s := range tt.ips {
			ips = append(ips, netip.MustParseAddr(s))
		}
		got, err := CoveringPrefix(ips)
		if err != nil || got.String() != tt.want {
			t.Errorf("CoveringPrefix(%v) = %v, %v; want %s", tt.ips, got, err, tt.want)
		}
	}
	if _, err := CoveringPrefix([]netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}); err == nil {
		t.Error("mixed families: want an error")
	}
}

// FuzzCoveringPrefix checks the invariants: the result is a valid Service range, every address
// is allocatable in it, and the next narrower prefix does not qualify.
func FuzzCoveringPrefix(f *testing.F) {
	f.Add(uint32(0x6440000a), uint32(0x6440000b))
	f.Add(uint32(0x64400008), uint32(0x64400008))
	f.Add(uint32(0x00000000), uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, a, b uint32) {
		ips := []netip.Addr{addr4(a), addr4(b)}
		p, err := CoveringPrefix(ips)
		if err != nil {
			// Only possible when an address is the network or broadcast address of every
			// prefix containing both, i.e. 0.0.0.0 or 255.255.255.255 is among them.
			if a != 0 && b != 0 && a != ^uint32(0) && b != ^uint32(0) {
				t.Fatalf("CoveringPrefix(%v): %v", ips, err)
			}
			return
		}
		if allocatableRange(p) != nil || ValidateServiceCIDRs(At("cidrs"), []string{p.String()}) != nil {
			t.Fatalf("%s is not a valid Service range", p)
		}
		for _, ip := range ips {
			if !Allocatable(p, ip) {
				t.Fatalf("%s not allocatable in %s", ip, p)
			}
		}
		if p.Bits() < 30 {
			narrower := netip.PrefixFrom(ips[0], p.Bits()+1).Masked()
			if narrower.Contains(ips[1]) && allAllocatable(narrower, ips) {
				t.Fatalf("%s covers %v but the narrower %s does too", p, ips, narrower)
			}
		}
	})
}

func addr4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range s {
		out = append(out, netip.MustParsePrefix(v))
	}
	return out
}
