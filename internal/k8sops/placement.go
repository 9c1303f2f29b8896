// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Choosing the new ClusterIP of every moved Service: deterministic, explicit, never colliding.
package k8sops

import (
	"fmt"
	"math/big"
	"net/netip"
)

// IP assignment modes of k8scidr_service_recreation.
const (
	PreserveOffset = "preserve_offset"
	NextFree       = "next_free"
	// Previous moves each Service back to the IPs it had before k8scidr_service_recreation last
	// moved it (PreviousClusterIPsAnnotation); the others are placed as preserve_offset does.
	Previous = "previous"
)

// PlacementRequest is one address to move, in placement order.
type PlacementRequest struct {
	Key string // e.g. "kube-system/kube-dns"
	Old netip.Addr
}

// Placement is where an address moves.
type Placement struct {
	Key      string
	Old, New netip.Addr
}

// AssignIPs places each request, in the given order, into the target range of its family.
// preserve_offset keeps the old address's offset within its old range (modulo the target's
// size); next_free takes the lowest free address. Either way, a taken candidate probes forward,
// wrapping, and never lands on the target's network, IPv4 broadcast or first allocatable
// address (.1, which default/kubernetes takes once the apiserver flags move), nor on an address
// in held or already placed. The same inputs always give the same result.
func AssignIPs(mode string, targets, oldRanges []netip.Prefix, reqs []PlacementRequest, held []netip.Addr) ([]Placement, error) {
	if mode != PreserveOffset && mode != NextFree {
		return nil, fmt.Errorf("unknown ip_assignment %q: use %s or %s", mode, PreserveOffset, NextFree)
	}
	taken := map[netip.Addr]bool{}
	for _, ip := range held {
		taken[ip] = true
	}
	out := make([]Placement, 0, len(reqs))
	for _, r := range reqs {
		target, ok := TargetFor(targets, r.Old)
		if !ok {
			return nil, fmt.Errorf("%s (%s): no target range of its IP family", r.Key, r.Old)
		}
		start := big.NewInt(2) // next_free: the first address after .1
		if mode == PreserveOffset {
			start = offsetIn(oldRanges, r.Old)
		}
		ip, err := probe(target, start, taken)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", r.Key, r.Old, err)
		}
		taken[ip] = true
		out = append(out, Placement{Key: r.Key, Old: r.Old, New: ip})
	}
	return out, nil
}

func TargetFor(targets []netip.Prefix, ip netip.Addr) (netip.Prefix, bool) {
	for _, t := range targets {
		if t.Addr().Is4() == ip.Is4() {
			return t.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// offsetIn is ip's offset from the base of the narrowest old range holding it, or, outside
// them all, the whole address as a number (its low bits then act as the offset).
func offsetIn(ranges []netip.Prefix, ip netip.Addr) *big.Int {
	var best netip.Prefix
	for _, r := range ranges {
		if r.Contains(ip) && (!best.IsValid() || r.Bits() > best.Bits()) {
			best = r.Masked()
		}
	}
	n := addrInt(ip)
	if best.IsValid() {
		n.Sub(n, addrInt(best.Addr()))
	}
	return n
}

// probe returns the first usable address of target at offset start (mod its size), walking
// forward and wrapping.
func probe(target netip.Prefix, start *big.Int, taken map[netip.Addr]bool) (netip.Addr, error) {
	size := new(big.Int).Lsh(big.NewInt(1), uint(target.Addr().BitLen()-target.Bits()))
	base := addrInt(target.Addr())
	off := new(big.Int).Mod(start, size)
	first := netip.Addr{}
	if c := Capacity(target); c.Sign() > 0 {
		first = intAddr(new(big.Int).Add(base, big.NewInt(1)), target.Addr().Is4())
	}
	// Every address is looked at once at most; taken addresses bound the walk in practice.
	for tries := new(big.Int); tries.Cmp(size) < 0; tries.Add(tries, big.NewInt(1)) {
		ip := intAddr(new(big.Int).Add(base, off), target.Addr().Is4())
		if Allocatable(target, ip) && ip != first && !taken[ip] {
			return ip, nil
		}
		off.Add(off, big.NewInt(1))
		if off.Cmp(size) == 0 {
			off.SetInt64(0)
		}
	}
	return netip.Addr{}, fmt.Errorf("target range %s is full", target)
}

func addrInt(a netip.Addr) *big.Int { return new(big.Int).SetBytes(a.AsSlice()) }

func intAddr(n *big.Int, is4 bool) netip.Addr {
	if is4 {
		var b [4]byte
		n.FillBytes(b[:])
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	n.FillBytes(b[:])
	return netip.AddrFrom16(b)
}
