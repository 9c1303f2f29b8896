// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Which of the cluster's address ranges collide: node addresses, node podCIDRs, ServiceCIDRs,
// Calico pools, extra named ranges, and ranges reserved for something else (a VPN, Tailscale).
package preflight

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

// Kinds of named ranges.
const (
	RangeNodeAddress = "node_address"
	RangeNodePodCIDR = "node_pod_cidr"
	RangeServiceCIDR = "service_cidr"
	RangeCalicoPool  = "calico_pool"
	RangeExtra       = "extra"
	RangeReserved    = "reserved"
)

// NamedRange is one range and where it comes from.
type NamedRange struct {
	Kind, Name string
	CIDR       netip.Prefix
}

// Conflict is two overlapping ranges and the prefix they share (the narrower of the two).
type Conflict struct {
	A, B    NamedRange
	Overlap netip.Prefix
}

// expectedOverlap lists the pairs of kinds that overlap by design: node podCIDRs are carved out
// of the pod range (a Calico pool), and ServiceCIDRs may nest (a keep-range inside the old range).
func expectedOverlap(a, b string) bool {
	pair := func(x, y string) bool { return a == x && b == y || a == y && b == x }
	return pair(RangeNodePodCIDR, RangeCalicoPool) || pair(RangeServiceCIDR, RangeServiceCIDR) ||
		pair(RangeNodeAddress, RangeNodeAddress) || pair(RangeReserved, RangeReserved)
}

// FindConflicts checks every pair of ranges, except pairs that overlap by design.
func FindConflicts(ranges []NamedRange) []Conflict {
	var out []Conflict
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if expectedOverlap(a.Kind, b.Kind) || !a.CIDR.Overlaps(b.CIDR) {
				continue
			}
			overlap := a.CIDR
			if b.CIDR.Bits() > a.CIDR.Bits() {
				overlap = b.CIDR
			}
			out = append(out, Conflict{A: a, B: b, Overlap: overlap})
		}
	}
	return out
}

// GatherRanges reads the cluster's ranges: node addresses (as /32 and /128) and podCIDRs,
// ServiceCIDRs, and Calico pools where Calico is served. One paginated list per kind.
func GatherRanges(ctx context.Context, c *k8sops.Client) ([]NamedRange, error) {
	var nodes []corev1.Node
	if err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Nodes().List), collect(&nodes)); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	scs, err := servedServiceCIDRs(ctx, c)
	if err != nil {
		return nil, err
	}
	var pools []calico.IPPool
	api, err := calico.Calico(ctx, c)
	switch {
	case errors.Is(err, calico.ErrNoCalico):
	case err != nil:
		return nil, err
	default:
		if pools, err = api.ListIPPools(ctx); err != nil {
			return nil, err
		}
	}
	return RangesOf(nodes, scs, pools), nil
}

// servedServiceCIDRs lists the ServiceCIDRs; none on clusters that serve no ServiceCIDR API
// (their only range is the apiserver flag's, not readable here).
func servedServiceCIDRs(ctx context.Context, c *k8sops.Client) ([]k8sops.ServiceCIDR, error) {
	caps, err := c.Capabilities()
	if err != nil || caps.ServiceCIDRVersion == "" {
		return nil, err
	}
	scs, _, err := k8sops.ListServiceCIDRObjects(ctx, c)
	return scs, err
}

// RangesOf are the ranges of nodes (addresses and podCIDRs), ServiceCIDRs and Calico pools, sorted.
func RangesOf(nodes []corev1.Node, scs []k8sops.ServiceCIDR, pools []calico.IPPool) []NamedRange {
	var out []NamedRange
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, NamedRange{RangeNodeAddress, n.Name + " " + string(a.Type), netip.PrefixFrom(ip, ip.BitLen())})
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, p := range k8sops.ParsePrefixes(cidrs) {
			out = append(out, NamedRange{RangeNodePodCIDR, n.Name, p.Masked()})
		}
	}
	for _, sc := range scs {
		for _, p := range k8sops.ParsePrefixes(sc.CIDRs) {
			out = append(out, NamedRange{RangeServiceCIDR, sc.Name, p.Masked()})
		}
	}
	for _, p := range pools {
		if pfx := p.Prefix(); pfx.IsValid() {
			out = append(out, NamedRange{RangeCalicoPool, p.Name, pfx.Masked()})
		}
	}
	SortRanges(out)
	return out
}

// SortRanges orders ranges by kind, name and address.
func SortRanges(r []NamedRange) {
	slices.SortStableFunc(r, func(a, b NamedRange) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), a.CIDR.Addr().Compare(b.CIDR.Addr()))
	})
}
