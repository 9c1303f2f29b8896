// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// recreationHCL is a k8scidr_service_moves data source "this" with dataArgs and the
// k8scidr_service_recreation "this" that makes its moves, with resourceArgs. after, when not
// "", is an address the resource depends on (e.g. the ServiceCIDR of the target range).
func recreationHCL(after, dataArgs, resourceArgs string) string {
	if !strings.Contains(resourceArgs, "old_ip_bridges ") {
		resourceArgs = dnsOnlyBridges + resourceArgs
	}
	return recreationHCLWith(after, dataArgs, fastHandOver+resourceArgs)
}

// dnsOnlyBridges is old_ip_bridges among recreationHCL's arguments unless they set it (or name
// it, as bridgesDefault does): the tests of other things than the old IPs (the journal, kills,
// guards, churn) move Services back and forth, and each old-IP bridge would hold an IP a later
// move or check wants. The default ("all") is the one of the wire tests, the bridges' own
// tests, the matrix and the examples.
const dnsOnlyBridges = "  old_ip_bridges = \"dns\"\n"

// bridgesDefault among recreationHCL's resource arguments leaves old_ip_bridges unset: the default.
const bridgesDefault = "  # old_ip_bridges unset: the default\n"

// fastHandOver shortens the hand-over's waits for kube-proxy and for cached DNS answers in the
// tests without either (the wire tests, which have both, keep the defaults).
const fastHandOver = "  proxy_sync_wait = \"100ms\"\n  dns_ttl = \"1s\"\n"

// deleteAndCreate, among a recreation's resource arguments, moves every Service by delete and
// create: for the tests of that path (what NodePort, LoadBalancer and selector-less Services
// still take), whose fault gates hold a move between its delete and its create.
const deleteAndCreate = "  hand_over = false\n"

// recreationHCLWith is recreationHCL with nothing set but resourceArgs.
func recreationHCLWith(after, dataArgs, resourceArgs string) string {
	const name = "this"
	dependsOn := ""
	if after != "" {
		dependsOn = "  depends_on = [" + after + "]\n"
	}
	return fmt.Sprintf(`
data "k8scidr_service_moves" %[1]q {
%[2]s
}

resource "k8scidr_service_recreation" %[1]q {
  plan = data.k8scidr_service_moves.%[1]s
%[3]s
%[4]s}
`, name, dataArgs, resourceArgs, dependsOn)
}

// rollHCL is a k8scidr_workload_restarts data source with dataArgs and the
// k8scidr_workload_roll of the same name that restarts its workloads, with resourceArgs.
func rollHCL(name, dataArgs, resourceArgs string) string {
	return fmt.Sprintf(`
data "k8scidr_workload_restarts" %[1]q {
%[2]s
}

resource "k8scidr_workload_roll" %[1]q {
  plan = data.k8scidr_workload_restarts.%[1]s
%[3]s
}
`, name, dataArgs, resourceArgs)
}

// handPlan is a k8scidr_service_recreation "plan" argument written by hand, as an edited
// configuration would have it: every attribute of the plan object, set gives HCL expressions
// for some of them (e.g. "moves").
func handPlan(set map[string]string) string {
	attrs := map[string]string{"target_cidrs": `["172.24.0.0/15"]`, "moves": "{}", "restore": "{}", "first_moves": "[]",
		"dns_service": "null", "dns_bridge": "true", "dns_bridge_off_reason": "null",
		"journal_namespace": strconv.Quote(recreation.DefaultJournalNamespace), "journal_group": strconv.Quote(recreation.DefaultJournalGroup)}
	maps.Copy(attrs, set)
	var b strings.Builder
	b.WriteString("  plan = {\n")
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		fmt.Fprintf(&b, "    %s = %s\n", k, attrs[k])
	}
	b.WriteString("  }\n")
	return b.String()
}
