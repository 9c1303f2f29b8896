// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// CIDR math with the apiserver's rules for Service ranges: which addresses a range can allocate.
package k8sops

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"net/netip"
	"slices"
)

// ValidateServiceCIDRs checks a ServiceCIDR's cidrs the way the apiserver and its allocator
// will, so that mistakes surface at plan: valid prefixes with no host bits, at most one per IP
// family, and ranges that can hold at least one allocatable address. at is the list attribute
// the cidrs come from; a finding about one entry names its index under it.
func ValidateServiceCIDRs(at Path, cidrs []string) []Finding {
	var problems []Finding
	add := func(i int, summary, format string, args ...any) {
		where := at
		if i >= 0 {
			where = at.Index(i)
		}
		problems = append(problems, Finding{Path: where, Summary: summary, Detail: fmt.Sprintf(format, args...)})
	}
	if len(cidrs) == 0 || len(cidrs) > 2 {
		add(-1, "Wrong Number of CIDRs", "A ServiceCIDR holds one range, or two of different IP families (dual-stack); got %d.", len(cidrs))
		return problems
	}
	seen := map[bool]int{} // is4 → index
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			add(i, "Invalid CIDR", "%q is not a CIDR prefix such as 172.24.0.0/15 or fd00:10:96::/108: %v.", s, err)
			continue
		}
		if m := p.Masked(); m != p {
			add(i, "CIDR Has Host Bits Set", "%q has bits set after the /%d prefix; the range it names is %s. Write that instead.", s, p.Bits(), m)
			continue
		}
		if j, dup := seen[p.Addr().Is4()]; dup {
			add(i, "Two CIDRs of One Family", "%q and %q are both %s; a dual-stack ServiceCIDR has one IPv4 and one IPv6 range.",
				cidrs[j], s, Family(p.Addr()))
			continue
		}
		seen[p.Addr().Is4()] = i
		if err := allocatableRange(p); err != nil {
			add(i, "Unusable Service Range", "%q: %v.", s, err)
		}
	}
	return problems
}

// allocatableRange rejects ranges the apiserver's allocator cannot use.
func allocatableRange(p netip.Prefix) error {
	switch {
	case p.Addr().Is4() && p.Bits() > 30:
		return errors.New("an IPv4 /31 or /32 holds no allocatable address (the network and broadcast addresses are " +
			"never allocated), so every Service IP in it is rejected as ClusterIPOutOfRange; use /30 or wider, e.g. a /24")
	case p.Addr().Is6() && p.Bits() == 128:
		return errors.New("an IPv6 /128 holds no allocatable address (the network address is never allocated); use /120 or wider")
	case p.Addr().Is6() && p.Bits() < 64:
		return errors.New("the Service IP allocator refuses IPv6 ranges wider than /64; use a prefix of /64 or longer, e.g. /108")
	}
	return nil
}

func Family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// Capacity is the number of addresses the apiserver can allocate from p: all of them but the
// network address and, for IPv4, the broadcast address. IPv6 ranges overflow int64.
func Capacity(p netip.Prefix) *big.Int {
	size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	reserved := int64(1)
	if p.Addr().Is4() {
		reserved = 2
	}
	if size.Cmp(big.NewInt(reserved)) <= 0 {
		return new(big.Int)
	}
	return size.Sub(size, big.NewInt(reserved))
}

// Allocatable reports whether the apiserver counts ip as inside p: in the prefix, and neither
// its network address nor (IPv4) its broadcast address.
func Allocatable(p netip.Prefix, ip netip.Addr) bool {
	p = p.Masked()
	if !p.Contains(ip) || ip == p.Addr() {
		return false
	}
	return !ip.Is4() || ip != lastAddr(p)
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// CoveringPrefix is the narrowest Service range in which every ip is allocatable: the shortest
// common prefix, widened until it is a valid ServiceCIDR (/30 or wider for IPv4, /64–/127 for
// IPv6) and no ip sits on its network or broadcast address. All ips must be of one family.
func CoveringPrefix(ips []netip.Addr) (netip.Prefix, error) {
	if len(ips) == 0 {
		return netip.Prefix{}, errors.New("no addresses to cover")
	}
	n := ips[0].BitLen()
	for _, ip := range ips[1:] {
		if ip.BitLen() != ips[0].BitLen() {
			return netip.Prefix{}, fmt.Errorf("%s and %s are of different IP families", ips[0], ip)
		}
		n = min(n, commonBits(ips[0], ip))
	}
	for ; n >= 0; n-- {
		p := netip.PrefixFrom(ips[0], n).Masked()
		if allocatableRange(p) == nil && allAllocatable(p, ips) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no valid Service range covers %v", ips)
}

func allAllocatable(p netip.Prefix, ips []netip.Addr) bool {
	for _, ip := range ips {
		if !Allocatable(p, ip) {
			return false
		}
	}
	return true
}

// commonBits is the length of the longest prefix a and b (same family) share.
func commonBits(a, b netip.Addr) int {
	x, y := a.AsSlice(), b.AsSlice()
	for i := range x {
		if d := x[i] ^ y[i]; d != 0 {
			return i*8 + bits.LeadingZeros8(d)
		}
	}
	return len(x) * 8
}

func ParsePrefixes(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func InAny(prefixes []netip.Prefix, ip netip.Addr) bool {
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return Allocatable(p, ip) })
}

// CoveringSet groups the staying IPs by /24 (IPv4) or /120 (IPv6) and covers each group with
// its narrowest valid Service range, then drops ranges contained in others. Grouping bounds the
// result: one prefix per family could swallow the whole old range, one per IP multiplies
// ServiceCIDR objects.
func CoveringSet(ips []netip.Addr) ([]netip.Prefix, error) {
	groups := map[netip.Prefix][]netip.Addr{}
	for _, ip := range ips {
		bits := 24
		if ip.Is6() {
			bits = 120
		}
		g := netip.PrefixFrom(ip, bits).Masked()
		groups[g] = append(groups[g], ip)
	}
	var out []netip.Prefix
	for _, g := range groups {
		p, err := CoveringPrefix(g)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.DeleteFunc(slices.Clone(out), func(p netip.Prefix) bool {
		return slices.ContainsFunc(out, func(q netip.Prefix) bool { return q != p && q.Bits() < p.Bits() && q.Contains(p.Addr()) })
	}), nil
}

// Within reports whether outer contains the whole of inner.
func Within(outer, inner netip.Prefix) bool {
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}
