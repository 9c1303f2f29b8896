package provider

import (
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
				Config:      `output "x" { value = provider::k8scidr::cidr_contains("10.0.0.0/8", "ten") }`,
				ExpectError: diagRE("Invalid function argument", `Invalid value for "ip_or_cidr" parameter: "ten" is neither an IP address nor a CIDR`),
			},
		},
	})
}
