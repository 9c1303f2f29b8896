// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccBadInput_matrix: mistakes across the provider block, data sources, functions and
// resources are plan-time errors that name the attribute (or argument) and say what to do.
// The resources' own _invalid tests hold more cases; together they are the bad-input matrix
// (see the closing note of issue 9 for the count). Every step is plan-only: nothing is written.
func TestAccBadInput_matrix(t *testing.T) {
	testAccPreCheck(t)
	kc := testAccCluster.Kubeconfig
	p := testAccProviderConfig()
	noContext := filepath.Join(t.TempDir(), "no-current-context")
	if err := os.WriteFile(noContext, []byte("apiVersion: v1\nkind: Config\ncurrent-context: gone\nclusters: []\ncontexts: []\nusers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fn := func(call string) string { return p + "output \"x\" {\n  value = " + call + "\n}\n" }
	cases := []badInput{
		// The provider block and the way to the cluster.
		{"unreachable cluster", `provider "k8scidr" {
  host     = "https://127.0.0.1:1"
  token    = "x"
  insecure = true
}` + clusterInfoConfig, []string{"Cluster Not Readable", "127.0.0.1:1", "connection refused"}},
		{"kubeconfig whose current context is missing", fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n}\n", noContext) + clusterInfoConfig,
			[]string{"Kubeconfig Context Not Found", `no context named "gone" (the kubeconfig's current-context)`, "Set config_context"}},
		{"config_context_cluster unknown", fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n  config_context_cluster = \"nope\"\n}\n", kc) + clusterInfoConfig,
			[]string{"@config_context_cluster", "nope"}},
		{"burst zero", fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n  burst = 0\n}\n", kc) + clusterInfoConfig,
			[]string{"@burst", "at least 1"}},
		{"two exec blocks", fmt.Sprintf("provider \"k8scidr\" {\n  host = %q\n  exec {\n    api_version = \"client.authentication.k8s.io/v1\"\n    command = \"a\"\n  }\n  exec {\n    api_version = \"client.authentication.k8s.io/v1\"\n    command = \"b\"\n  }\n}\n", testAccCluster.Host) + clusterInfoConfig,
			// Terraform points a block-count error at the provider block; the detail names exec.
			[]string{"Invalid Attribute Value", "Attribute exec list must contain at most 1"}},
		{"empty field_manager", fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n  field_manager = \"\"\n}\n", kc) + clusterInfoConfig,
			[]string{"@field_manager", "length must be between 1 and 128"}},

		// Data sources.
		{"service_allocations: host bits", p + "data \"k8scidr_service_allocations\" \"x\" {\n  cidrs = [\"172.24.0.1/15\"]\n}\n",
			[]string{"@cidrs", "host bits set: use 172.24.0.0/15"}},
		{"service_allocations: also_keep not namespace/name", p + "data \"k8scidr_service_allocations\" \"x\" {\n  also_keep = [\"kube-dns\"]\n}\n",
			[]string{"@also_keep", "must be namespace/name"}},
		{"pod_allocations: not a CIDR", p + "data \"k8scidr_pod_allocations\" \"x\" {\n  cidrs = [\"pods\"]\n}\n",
			[]string{"@cidrs", `"pods"`}},
		{"pod_allocations: cluster_cidr with host bits", p + "data \"k8scidr_pod_allocations\" \"x\" {\n  cluster_cidr = [\"172.16.0.1/13\"]\n}\n",
			[]string{"@cluster_cidr", "host bits set: use 172.16.0.0/13"}},
		{"network_overlaps: extra not a CIDR", p + "data \"k8scidr_network_overlaps\" \"x\" {\n  extra = { vpc = \"10.0.0.0/33\" }\n}\n",
			[]string{"Invalid CIDR", "@extra", `"10.0.0.0/33"`}},

		// Functions: v4/v6 mixes, edges.
		{"cidr_map_offset across families", fn(`provider::k8scidr::cidr_map_offset("100.64.0.10", "100.64.0.0/13", "fd00:24::/108")`),
			[]string{`Invalid value for "to_cidr" parameter`, "different IP families"}},
		{"cidr_map_offset into a /32", fn(`provider::k8scidr::cidr_map_offset("10.0.0.1", "10.0.0.0/31", "10.1.0.0/32")`),
			[]string{`Invalid value for "to_cidr" parameter`, "10.1.0.0/32 is full"}},
		{"cidr_contains with a prefix length past 32", fn(`provider::k8scidr::cidr_contains("10.0.0.0/8", "10.0.0.0/40")`),
			[]string{`Invalid value for "ip_or_cidr" parameter`, "not a CIDR"}},
		{"cidr_overlaps with an empty string", fn(`provider::k8scidr::cidr_overlaps("", "10.0.0.0/8")`),
			[]string{`Invalid value for "a" parameter`, "not a CIDR"}},
		{"kops_networking across families", fn(`provider::k8scidr::kops_networking("172.24.0.0/15", "fd00:16::/64", "172.16.0.0/12", null, "172.24.0.10", "100.64.0.0/13")`),
			[]string{`Invalid value for "pod_cidr" parameter`, "another IP family"}},
		{"kops_networking Service range too wide", fn(`provider::k8scidr::kops_networking("172.0.0.0/11", "10.0.0.0/13", "0.0.0.0/0", null, "172.0.0.10", "100.64.0.0/13")`),
			[]string{`Invalid value for "service_cidr" parameter`}},
		{"kops_networking with the DNS IP still in the old range", fn(`provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", "10.20.0.0/16", "100.64.0.10", "100.64.0.0/13")`),
			[]string{`Invalid value for "cluster_dns_ip" parameter`, "must contain the DNS Server IP"}},
		{"kops_networking on kOps' AWS default network", fn(`provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", "172.20.0.0/16", "172.24.0.10", "100.64.0.0/13")`),
			[]string{`Invalid value for "network_cidr" parameter`, "cannot overlap with networkCIDR"}},

		// Resources: families, impossible targets, unknown namespaces and kinds.
		{"service_cidr: two IPv4 ranges", p + "resource \"k8scidr_service_cidr\" \"x\" {\n  name = \"x\"\n  cidrs = [\"172.24.0.0/15\", \"172.28.0.0/15\"]\n}\n",
			[]string{"Two CIDRs of One Family", "@cidrs"}},
		{"service_cidr: a /32 holds no Service", p + "resource \"k8scidr_service_cidr\" \"x\" {\n  name = \"x\"\n  cidrs = [\"172.24.0.1/32\"]\n}\n",
			[]string{"Unusable Service Range", "@cidrs"}},
		{"service_moves: two IPv6 targets", p + "data \"k8scidr_service_moves\" \"x\" {\n  target_cidrs = [\"fd00:24::/108\", \"fd00:25::/108\"]\n}\n",
			[]string{"Two CIDRs of One Family", "@target_cidrs"}},
		{"service_moves: first names a Service that is not there", p + "data \"k8scidr_service_moves\" \"x\" {\n  target_cidrs = [\"172.24.0.0/15\"]\n  first = [\"nowhere/nothing\"]\n}\n",
			[]string{"@first", `"nowhere/nothing" is not a Service`}},
		{"service_recreation: a move into another family", p + "resource \"k8scidr_service_recreation\" \"x\" {\n" + handPlan(map[string]string{
			"target_cidrs": `["fd00:24::/108"]`,
			"moves":        `{ "a/b" = "10.0.0.1 to fd00:24::1 (ClusterIP, uid u)" }`}) + "}\n",
			[]string{"IP Family Changes", `plan.moves["a/b"]`}},
		{"service_recreation: a move no data source writes", p + "resource \"k8scidr_service_recreation\" \"x\" {\n" + handPlan(map[string]string{
			"moves": `{ "a/b" = "100.64.0.1 -> 172.24.0.5" }`}) + "}\n",
			[]string{"Invalid Move", `plan.moves["a/b"]`, "OLD_IPS to NEW_IPS (TYPE, uid UID)"}},
		{"service_recreation: endpoint_wait not a duration", p + "resource \"k8scidr_service_recreation\" \"x\" {\n" + handPlan(nil) +
			"  endpoint_wait = \"2 minutes\"\n}\n",
			[]string{"Invalid Duration", "@endpoint_wait", `"2 minutes" is not a Go duration`}},
		{"service_recreation: journal_group not a label value", p + "resource \"k8scidr_service_recreation\" \"x\" {\n" +
			handPlan(map[string]string{"journal_group": `"team a"`}) + "}\n",
			[]string{"Invalid Plan", `journal_group "team a" is not a label value`}},
		{"service_recreation: the DNS Service moves without its bridge", p + "resource \"k8scidr_service_recreation\" \"x\" {\n" +
			handPlan(map[string]string{"dns_service": `"kube-system/kube-dns"`, "dns_bridge": "false", "first_moves": `["kube-system/kube-dns"]`,
				"moves": `{ "kube-system/kube-dns" = "100.64.0.10 to 172.24.0.10 (ClusterIP, uid u)" }`}) + "}\n",
			[]string{"Cluster DNS Would Move Without Its Bridge", "kube-system/kube-dns", "dns_bridge_off_reason"}},
		{"service_moves: journal_group not a label value", p + "data \"k8scidr_service_moves\" \"x\" {\n  target_cidrs = [\"172.24.0.0/15\"]\n" +
			"  journal_group = \"-a\"\n}\n",
			[]string{"@journal_group", "must be a label value"}},
		{"workload_roll: unknown kind in include", p + "resource \"k8scidr_workload_roll\" \"x\" {\n  include = [\"default/cronjob/x\"]\n}\n",
			[]string{"Invalid Workload", "@include", `kind "cronjob"`}},
		{"workload_restarts: pod_cidrs of both families' edge", p + "data \"k8scidr_workload_restarts\" \"x\" {\n  pod_cidrs = [\"::/129\"]\n}\n",
			[]string{"Invalid CIDR", "@pod_cidrs"}},
		{"service_cidr_policy: IPv6 host bits", p + "resource \"k8scidr_service_cidr_policy\" \"x\" {\n  name = \"x\"\n  allowed_cidrs = [\"fd00:24::1/108\"]\n}\n",
			[]string{"@allowed_cidrs", "host bits set: use fd00:24::/108"}},
	}
	planErrors(t, cases)
}

// TestAccBadInput_beforeTheCluster: mistakes that need no cluster to see are plan-time errors
// naming their attribute even when the cluster cannot be reached, so they are found before
// anything is read (each used to pass the plan and be refused by the apiserver mid-apply, or
// hide behind "Calico Not Readable").
func TestAccBadInput_beforeTheCluster(t *testing.T) {
	testAccPreCheck(t)
	p := `provider "k8scidr" {
  host     = "https://127.0.0.1:1"
  token    = "x"
  insecure = true
}
`
	moves := func(arg string) string {
		return p + "data \"k8scidr_service_moves\" \"x\" {\n  target_cidrs = [\"172.24.0.0/15\"]\n  " + arg + "\n}\n"
	}
	pool := func(args string) string {
		return p + "resource \"k8scidr_calico_ippool\" \"x\" {\n  name = \"new-pool\"\n  cidr = \"172.16.0.0/13\"\n  " + args + "\n}\n"
	}
	cases := []badInput{
		{"service_recreation: journal_namespace", p + "resource \"k8scidr_service_recreation\" \"x\" {\n" +
			handPlan(map[string]string{"journal_namespace": `"Bad_NS"`}) + "}\n", []string{"Invalid Plan", `journal_namespace "Bad_NS" is not a namespace`}},
		{"service_moves: journal_namespace", moves(`journal_namespace = "Bad_NS"`), []string{"Invalid Name", "@journal_namespace", `"Bad_NS" is not a namespace`}},
		{"service_moves: namespaces", moves(`namespaces = ["app", "Bad NS"]`), []string{"Invalid Name", "@namespaces", `"Bad NS" is not a namespace`}},
		{"service_moves: exclude_namespaces", moves(`exclude_namespaces = ["-x"]`), []string{"Invalid Name", "@exclude_namespaces", `"-x" is not a namespace`}},
		{"service_moves: selector", moves(`selector = "a in (b"`), []string{"Invalid Label Selector", "@selector"}},
		{"workload_restarts: namespaces", p + "data \"k8scidr_workload_restarts\" \"x\" {\n  namespaces = [\"App\"]\n}\n",
			[]string{"Invalid Name", "@namespaces", `"App" is not a namespace`}},
		{"service_cidr: name", p + "resource \"k8scidr_service_cidr\" \"x\" {\n  name = \"Not A Name\"\n  cidrs = [\"172.24.0.0/15\"]\n}\n",
			[]string{"Invalid Name", "@name", `"Not A Name" is not a ServiceCIDR name`}},
		{"service_cidr_policy: name", p + "resource \"k8scidr_service_cidr_policy\" \"x\" {\n  name = \"policy_1\"\n  allowed_cidrs = [\"172.24.0.0/15\"]\n}\n",
			[]string{"Invalid Name", "@name", `"policy_1" is not a ValidatingAdmissionPolicy name`}},
		{"calico_ip_pool: name", p + "resource \"k8scidr_calico_ippool\" \"x\" {\n  name = \"Bad_Name\"\n  cidr = \"172.16.0.0/13\"\n}\n",
			[]string{"Invalid Name", "@name", `"Bad_Name" is not an IPPool name`}},
		{"calico_ip_pool: block_size", pool("block_size = 33"), []string{"Block Size Out of Range", "@block_size", "33: an IPv4 pool's block size is 20 to 32"}},
		{"calico_ip_pool: both encapsulations", pool("ipip_mode = \"Always\"\n  vxlan_mode = \"CrossSubnet\""),
			[]string{"Both Encapsulations Enabled", "@vxlan_mode", "Set the other to Never"}},
		{"calico_ip_pool: IPIP on IPv6", p + "resource \"k8scidr_calico_ippool\" \"x\" {\n  name = \"v6\"\n  cidr = \"fd00:16::/64\"\n  ipip_mode = \"Always\"\n}\n",
			[]string{"IPIP Is IPv4 Only", "@ipip_mode"}},
		{"calico_ip_pool: node_selector", pool(`node_selector = "has(("`), []string{"Invalid Calico Selector", "@node_selector", `"has((" is not a selector Calico can parse`}},
		// A null element, as `[var.x]` with var.x unset gives it (nullVar declares var.x).
		{"preflight: a null pod range", p + nullVar + "data \"k8scidr_preflight\" \"x\" {\n  old_service_cidrs = [\"100.64.0.0/13\"]\n  old_pod_cidrs = [var.x]\n}\n",
			[]string{"Null Element", "@old_pod_cidrs", "old_pod_cidrs[0] is null", "each element must be a CIDR prefix"}},
		{"service_moves: a null target", p + nullVar + "data \"k8scidr_service_moves\" \"x\" {\n  target_cidrs = [var.x]\n}\n",
			[]string{"Null Element", "@target_cidrs", "target_cidrs[0] is null"}},
		{"network_overlaps: a null reserved range", p + nullVar + "data \"k8scidr_network_overlaps\" \"x\" {\n  reserved = { a = var.x }\n}\n",
			[]string{"Null Element", "@reserved", `reserved["a"] is null`}},
		{"kops_networking: a null option", p + nullVar + `output "x" {
  value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", null, "172.24.0.10", "100.64.0.0/13", { kubernetes_version = var.x })
}
`, []string{`Invalid value for "options" parameter`, `["kubernetes_version"] is null`}},
		{"calico_ip_pool: link-local", p + "resource \"k8scidr_calico_ippool\" \"x\" {\n  name = \"ll\"\n  cidr = \"169.254.0.0/16\"\n}\n",
			[]string{"CIDR Overlaps Link-Local Addresses", "@cidr"}},
	}
	planErrors(t, cases)
}

// nullVar declares var.x, unset: what a module input nobody set is.
const nullVar = "variable \"x\" {\n  type    = string\n  default = null\n}\n"

// unsetKubeEnv unsets the provider's environment variables for the test, so that only its
// provider block says where the cluster is.
func unsetKubeEnv(t *testing.T) {
	for _, v := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_HOST", "KUBE_CTX"} {
		t.Setenv(v, "") // restores the variable after the test
		if err := os.Unsetenv(v); err != nil {
			t.Fatal(err)
		}
	}
}

// badInput is a configuration whose plan must fail with a diagnostic holding want, in order.
type badInput struct {
	name, config string
	want         []string
}

// planErrors plans each case, with only its provider block saying where the cluster is.
func planErrors(t *testing.T, cases []badInput) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unsetKubeEnv(t)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: c.config, PlanOnly: true, ExpectError: diagRE(c.want...)}},
			})
		})
	}
}
