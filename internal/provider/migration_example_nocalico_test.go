// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccMigrationExample_withoutCalico: examples/migration (migrationRun) on a cluster whose
// pods do not take their addresses from Calico's IPAM (kubenet: no network plugin this provider
// knows, pods on their nodes' podCIDRs), as a new user gets there. The quickstart reads the
// cluster, writes pod_cidrs.old = null, says why the pod stages are left out and how this
// cluster's pod range moves instead, and finds nothing about a pod range; examples/migration's
// first plan says once, in an output, that stages 5 and 6 are left out, with no warning or error
// of its own about it; stages 1 to 4 plan and apply as on a Calico cluster, on the wire; stages 5
// and 6 then plan nothing.
func TestAccMigrationExample_withoutCalico(t *testing.T) {
	r, ok := startMigrationRun(t, withoutCalico)
	if !ok {
		return
	}
	outputs := r.useQuickstart(`{ old = null, new = "172.16.0.0/13" }`, "")
	podStages, _ := dig(outputs, "pod_stages", "value").(string)
	for _, want := range []string{"Left out: stages 5 and 6 (pod_cidrs.old is null).", "No network plugin this provider knows runs here",
		"With kubenet or host-local IPAM: pods take addresses from their node's podCIDR", "Service stages 1 to 4 work"} {
		if !strings.Contains(podStages, want) {
			t.Errorf("examples/quickstart's output pod_stages lacks %q:\n%s", want, podStages)
		}
	}
	if cni, _ := dig(outputs, "facts", "value", "cni").(string); cni != "none this provider knows" {
		t.Errorf("examples/quickstart's facts say cni %q", cni)
	}
	// Its findings concern only what moves: the Services. Nothing of a pod range, which does not
	// move here (kube-controller-manager's --cluster-cidr, node podCIDRs, Calico's IPAM).
	for _, f := range list(dig(outputs, "findings", "value")) {
		if s, _ := f.(string); regexp.MustCompile(`(?i)pod range|cluster-cidr|crash-loop|calico|cni_ipam`).MatchString(s) {
			t.Errorf("examples/quickstart finds what does not concern a cluster whose pod range does not move: %s", s)
		}
	}
	after := r.serviceStages()
	// Said once, in plain words, in the first plan: an output, not a warning or an error.
	if n := strings.Count(r.firstPlan, "Stages 5 and 6 are left out"); n != 1 {
		t.Errorf("the first plan says %d times that the pod stages are left out, want once:\n%s", n, r.firstPlan)
	}
	for _, d := range regexp.MustCompile(`(?s)╷\n(.*?)╵`).FindAllString(r.firstPlan, -1) {
		if regexp.MustCompile(`Calico|pod_cidrs|pod range|pod stage`).MatchString(d) {
			t.Errorf("the first plan warns about the pod stages it leaves out:\n%s", d)
		}
	}
	// The pod stages plan nothing: no pool, canary or roll, and nothing else.
	for _, n := range []int{5, 6} {
		r.w.converged("-input=false", fmt.Sprintf("-var=stage=%d", n))
	}
	r.stages.check(t, "pods started after stage 3", after, testcluster.ClientNewResolver, testcluster.ClientAPINew)
}
