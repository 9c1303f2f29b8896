// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package preflight

import (
	"net/netip"
	"testing"
)

func TestFindConflicts(t *testing.T) {
	r := func(kind, name, cidr string) NamedRange { return NamedRange{kind, name, netip.MustParsePrefix(cidr)} }
	ranges := []NamedRange{
		r(RangeServiceCIDR, "kubernetes", "100.64.0.0/13"),
		r(RangeServiceCIDR, "keep-lb", "100.64.12.0/24"), // nested in the old range: by design
		r(RangeServiceCIDR, "new", "172.24.0.0/15"),
		r(RangeCalicoPool, "default-ipv4-ippool", "100.96.0.0/11"),
		r(RangeCalicoPool, "new", "172.16.0.0/13"),
		r(RangeNodePodCIDR, "node-a", "100.96.1.0/24"), // inside its pool: by design
		r(RangeNodeAddress, "node-a InternalIP", "172.20.1.5/32"),
		r(RangeReserved, "tailscale", "100.64.0.0/10"),
	}
	got := FindConflicts(ranges)
	want := []string{
		"kubernetes/tailscale 100.64.0.0/13",
		"keep-lb/tailscale 100.64.12.0/24",
		"default-ipv4-ippool/tailscale 100.96.0.0/11",
		"new/node-a InternalIP 172.20.1.5/32", // the new pool 172.16.0.0/13 holds a node's address
		"node-a/tailscale 100.96.1.0/24",
	}
	if len(got) != len(want) {
		t.Fatalf("conflicts %v, want %v", got, want)
	}
	for i, c := range got {
		if s := c.A.Name + "/" + c.B.Name + " " + c.Overlap.String(); s != want[i] {
			t.Errorf("conflict %d: %s, want %s", i, s, want[i])
		}
	}
}
