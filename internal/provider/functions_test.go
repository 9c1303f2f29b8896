// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
)

// The functions run in a real terraform (1.8+), with no cluster configured.
func TestAccFunctions(t *testing.T) {
	outputs := `
output "overlaps"      { value = provider::k8scidr::cidr_overlaps("100.64.0.0/13", "100.64.0.0/10") }
output "apart"         { value = provider::k8scidr::cidr_overlaps("172.24.0.0/15", "100.64.0.0/10") }
output "families"      { value = provider::k8scidr::cidr_overlaps("10.0.0.0/8", "fd00::/8") }
output "contains_ip"   { value = provider::k8scidr::cidr_contains("172.24.0.0/15", "172.24.0.10") }
output "contains_cidr" { value = provider::k8scidr::cidr_contains("100.64.0.0/10", "100.64.0.0/13") }
output "wider"         { value = provider::k8scidr::cidr_contains("100.64.0.0/13", "100.64.0.0/10") }
output "kube_dns"      { value = provider::k8scidr::cidr_map_offset("100.64.0.10", "100.64.0.0/13", "172.24.0.0/15") }
output "wrapped"       { value = provider::k8scidr::cidr_map_offset("100.69.0.5", "100.64.0.0/13", "172.24.0.0/15") }
output "v6"            { value = provider::k8scidr::cidr_map_offset("fd00:10::a", "fd00:10::/108", "fd00:24::/108") }
output "kops"          { value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", "10.20.0.0/16", "172.24.0.10", "100.64.0.0/13") }
output "kops_options"  {
  value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", null, "172.24.0.53", "100.64.0.0/13",
    { calico_ipam = false, node_local_dns_ip = "169.254.20.10", kubernetes_version = "v1.31.4" })
}
`
	check := func(name string, v knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownOutputValue(name, v)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: outputs,
				ConfigStateChecks: []statecheck.StateCheck{
					check("overlaps", knownvalue.Bool(true)), check("apart", knownvalue.Bool(false)), check("families", knownvalue.Bool(false)),
					check("contains_ip", knownvalue.Bool(true)), check("contains_cidr", knownvalue.Bool(true)), check("wider", knownvalue.Bool(false)),
					check("kube_dns", knownvalue.StringExact("172.24.0.10")), check("wrapped", knownvalue.StringExact("172.25.0.5")),
					check("v6", knownvalue.StringExact("fd00:24::a")),
					check("kops", knownvalue.ObjectExact(map[string]knownvalue.Check{
						"service_cluster_ip_range": knownvalue.StringExact("172.24.0.0/15"), "pod_cidr": knownvalue.StringExact("172.16.0.0/13"),
						"non_masquerade_cidr": knownvalue.StringExact("172.16.0.0/12"), "kube_dns_server_ip": knownvalue.StringExact("172.24.0.10"),
						"kubelet_cluster_dns": knownvalue.StringExact("172.24.0.10"), "allocate_node_cidrs": knownvalue.Bool(false),
						"additional_sans": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("100.64.0.1")}),
						"steps": knownvalue.ListExact([]knownvalue.Check{
							knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact("service_range"),
								"yaml": knownvalue.StringExact("spec:\n  serviceClusterIPRange: 172.24.0.0/15\n  additionalSans: # keep any you have\n  - 100.64.0.1\n" +
									"  kubeDNS:\n    serverIP: 172.24.0.10\n  kubelet:\n    clusterDNS: 172.24.0.10\n  masterKubelet:\n    clusterDNS: 172.24.0.10\n")}),
							knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact("pod_range"),
								"yaml": knownvalue.StringExact("spec:\n  nonMasqueradeCIDR: 172.16.0.0/12\n  podCIDR: 172.16.0.0/13\n" +
									"  kubeControllerManager:\n    clusterCIDR: 172.16.0.0/13\n    allocateNodeCIDRs: false\n")}),
						}),
						"yaml": knownvalue.StringRegexp(regexp.MustCompile(`(?s)^# service_range: .*---\n# pod_range: `)),
					})),
					check("kops_options", knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"allocate_node_cidrs": knownvalue.Bool(true), "kube_dns_server_ip": knownvalue.StringExact("172.24.0.53"),
						"kubelet_cluster_dns": knownvalue.StringExact("169.254.20.10"),
						"steps": knownvalue.ListPartial(map[int]knownvalue.Check{0: knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"name": knownvalue.StringExact("gates"), "yaml": knownvalue.StringRegexp(regexp.MustCompile(`networking.k8s.io/v1beta1: "true"`))})}),
					})),
				},
			},
			{
				Config:      `output "x" { value = provider::k8scidr::cidr_overlaps("10.0.0.1/8", "10.0.0.0/8") }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "a" parameter: "10.0.0.1/8" has host bits set: use 10.0.0.0/8`),
			},
			{
				Config:      `output "x" { value = provider::k8scidr::cidr_map_offset("10.0.0.1", "100.64.0.0/13", "172.24.0.0/15") }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "ip" parameter: 10.0.0.1 is not inside 100.64.0.0/13`),
			},
			{
				Config:      `output "x" { value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", "172.20.0.0/16", "172.24.0.10", "100.64.0.0/13") }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "network_cidr" parameter`, "the network CIDR 172.20.0.0/16 overlaps nonMasqueradeCIDR 172.16.0.0/12"),
			},
			{
				Config:      `output "x" { value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", null, "100.64.0.10", "100.64.0.0/13") }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "cluster_dns_ip" parameter`, "must contain the DNS Server IP"),
			},
			{
				Config:      `output "x" { value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", null, "172.24.0.10", "100.64.0.0/13", { nodelocal = "x" }) }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "options" parameter`, `unknown option "nodelocal"`),
			},
			{
				Config:      `output "x" { value = provider::k8scidr::cidr_contains("10.0.0.0/8", "ten") }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "ip_or_cidr" parameter: "ten" is neither an IP address nor a CIDR`),
			},
		},
	})
}
