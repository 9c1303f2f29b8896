// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The write-up's conflict: kOps' Service range and node podCIDRs inside Tailscale's
// 100.64.0.0/10, and an extra VPN range inside the Calico pool.
func TestAccNetworkOverlapsDataSource_tailscale(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	const addr = "data.k8scidr_network_overlaps.this"
	conflict := func(a, b, overlap string) knownvalue.Check {
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"a":       knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(a)}),
			"b":       knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(b)}),
			"overlap": knownvalue.StringExact(overlap),
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			// A bad CIDR is a validate-time error, before the cluster is read (first: the post-test
			// destroy runs the last step's configuration).
			{
				Config:      e.provider() + "data \"k8scidr_network_overlaps\" \"this\" {\n  reserved = { vpn = \"10.0.0.1/8\" }\n}\n",
				ExpectError: diagRE("Invalid CIDR", `reserved = { vpn = "10.0.0.1/8" }`, "host bits set: use 10.0.0.0/8."),
			},
			{
				Config: e.provider() + `
data "k8scidr_network_overlaps" "this" {
  reserved = { tailscale = "100.64.0.0/10" }
  extra    = { vpn = "10.10.32.0/24" }
}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("conflicts"), knownvalue.ListExact([]knownvalue.Check{
						conflict(oldPoolName, "vpn", "10.10.32.0/24"),
						conflict("kwok-node-0", "tailscale", "100.96.0.0/24"),
						conflict("kwok-node-1", "tailscale", "100.96.1.0/24"),
						conflict("kubernetes", "tailscale", "100.64.0.0/13"),
					})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("conflict_free"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("ranges"), knownvalue.ListPartial(map[int]knownvalue.Check{
						0: knownvalue.ObjectExact(map[string]knownvalue.Check{"kind": knownvalue.StringExact("calico_pool"),
							"name": knownvalue.StringExact(oldPoolName), "cidr": knownvalue.StringExact(oldPoolCIDR)}),
					})),
				},
			},
			{
				Config: e.provider() + `
data "k8scidr_network_overlaps" "this" {}

check "no_conflicts" {
  assert {
    condition     = data.k8scidr_network_overlaps.this.conflict_free
    error_message = "conflicts"
  }
}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("conflicts"), knownvalue.ListExact([]knownvalue.Check{})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("conflict_free"), knownvalue.Bool(true)),
				},
			},
		},
	})
}
