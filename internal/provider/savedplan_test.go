// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// rpcCounts counts the provider calls of each kind a terraform TRACE log shows.
func rpcCounts(t *testing.T, logFile string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`GRPCProvider\.v6: ([A-Za-z]+)\n`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]]++
	}
	return out
}

// TestAccSavedPlan_cliContract proves, on the terraform (or tofu) this suite runs, the CLI
// behaviour the plan contract rests on: applying a saved plan reads no data source again (the
// moves are the reviewed ones, though a Service was created meanwhile) and asks the provider to
// plan each changed resource again, which must give the same values; and a data source that
// references a resource with a planned change is read only during apply, even when the value
// it references is known at plan.
func TestAccSavedPlan_cliContract(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("web", "ClusterIP", "100.64.7.7"))
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))
	if out, err := w.run("apply", "-auto-approve", "-target=k8scidr_service_cidr.this"); err != nil {
		t.Fatalf("creating the target range: %v\n%s", err, out)
	}
	w.planFile()
	f.service("app", ipService("late", "ClusterIP", "100.64.8.8"))
	logFile := filepath.Join(t.TempDir(), "apply.log")
	cmd := w.command([]string{"TF_LOG=trace", "TF_LOG_PATH=" + logFile}, "apply", "-no-color", "tfplan")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	rpcs := rpcCounts(t, logFile)
	t.Logf("provider calls while applying the saved plan: %v", rpcs)
	if rpcs["ReadDataSource"] != 0 {
		t.Errorf("applying the saved plan read %d data sources again", rpcs["ReadDataSource"])
	}
	if rpcs["PlanResourceChange"] < 1 || rpcs["ApplyResourceChange"] != 1 {
		t.Errorf("applying the saved plan: %d PlanResourceChange and %d ApplyResourceChange calls, want the changed resource planned again and applied once",
			rpcs["PlanResourceChange"], rpcs["ApplyResourceChange"])
	}
	expect(t, "recreated", w.stateValue(recreationAddr, "recreated"),
		recreatedCheck(map[string][2][]string{"app/web": {{"100.64.7.7"}, {"172.24.7.7"}}}))
	if ip := servicesIn(t, c.Kube, "app")["app/late"].Spec.ClusterIP; ip != "100.64.8.8" {
		t.Errorf("app/late, created after the plan, moved to %s", ip)
	}

	// A known reference to a resource with a planned change defers the data source to apply;
	// one with only literals is read at plan.
	w.write(providerBlock(c.Kubeconfig) + `
resource "k8scidr_service_cidr" "other" {
  name              = "other"
  cidrs             = ["172.26.0.0/16"]
  wait_for_deletion = false
}
data "k8scidr_service_allocations" "deferred" {
  cidrs = k8scidr_service_cidr.other.cidrs
}
data "k8scidr_service_allocations" "now" {
  cidrs = ["172.26.0.0/16"]
}
output "deferred" {
  value = data.k8scidr_service_allocations.deferred.outside
}
output "now" {
  value = data.k8scidr_service_allocations.now.outside
}
`)
	out := w.planFile()
	if !strings.Contains(out, "data.k8scidr_service_allocations.deferred will be read during apply") {
		t.Errorf("a data source referencing a resource with a planned change was read at plan:\n%s", out)
	}
	if strings.Contains(out, "data.k8scidr_service_allocations.now will be read during apply") {
		t.Errorf("a data source with only literals was deferred to apply:\n%s", out)
	}
}
