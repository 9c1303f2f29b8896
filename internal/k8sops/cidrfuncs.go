// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Plan-time CIDR math behind the provider functions: overlap, containment, and the address
// mapping preserve_offset uses.
package k8sops

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseCIDR parses a CIDR that has no host bits set.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %v", s, err)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: use %s", s, p.Masked())
	}
	return p, nil
}

// argError is a Finding about one argument (counted from 0) of a CIDR function, so a caller can
// point at the argument; its Detail is err's text.
func argError(arg int, err error) error {
	return Finding{Path: Arg(arg), Summary: "Invalid Argument", Detail: err.Error()}
}

// CIDROverlaps reports whether two CIDRs share any address (false across IP families).
func CIDROverlaps(a, b string) (bool, error) {
	pa, err := ParseCIDR(a)
	if err != nil {
		return false, argError(0, err)
	}
	pb, err := ParseCIDR(b)
	if err != nil {
		return false, argError(1, err)
	}
	return pa.Overlaps(pb), nil
}

// CIDRContains reports whether cidr contains an address, or every address of a CIDR.
func CIDRContains(cidr, ipOrCIDR string) (bool, error) {
	p, err := ParseCIDR(cidr)
	if err != nil {
		return false, argError(0, err)
	}
	if strings.Contains(ipOrCIDR, "/") {
		q, err := ParseCIDR(ipOrCIDR)
		if err != nil {
			return false, argError(1, err)
		}
		return q.Bits() >= p.Bits() && p.Contains(q.Addr()), nil
	}
	ip, err := netip.ParseAddr(strings.TrimSpace(ipOrCIDR))
	if err != nil {
		return false, argError(1, fmt.Errorf("%q is neither an IP address nor a CIDR", ipOrCIDR))
	}
	return p.Contains(ip), nil
}

// MapOffset is where preserve_offset puts ip when it moves from from to to, with nothing else
// in the way: the same offset (modulo to's size), skipping to's network, IPv4 broadcast and
// first address.
func MapOffset(ip, from, to string) (string, error) {
	addr, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil {
		return "", argError(0, fmt.Errorf("%q is not an IP address", ip))
	}
	pf, err := ParseCIDR(from)
	if err != nil {
		return "", argError(1, err)
	}
	pt, err := ParseCIDR(to)
	if err != nil {
		return "", argError(2, err)
	}
	if !pf.Contains(addr) {
		return "", argError(0, fmt.Errorf("%s is not inside %s", addr, pf))
	}
	if pf.Addr().Is4() != pt.Addr().Is4() {
		return "", argError(2, fmt.Errorf("%s and %s are of different IP families", pf, pt))
	}
	out, err := AssignIPs(PreserveOffset, []netip.Prefix{pt}, []netip.Prefix{pf}, []PlacementRequest{{Key: "ip", Old: addr}}, nil)
	if err != nil {
		return "", argError(2, err) // found by FuzzMapOffset: a target with no usable address
	}
	return out[0].New.String(), nil
}
