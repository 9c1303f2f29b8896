package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

const (
	planRole  = "../../examples/rbac/k8scidr-plan.yaml"
	applyRole = "../../examples/rbac/k8scidr-apply.yaml"
)

// TestAccRBAC_planReadOnly: with only examples/rbac/k8scidr-plan.yaml (get and list), terraform
// plan of every resource and every data source works, on a cluster with Calico, pods and
// Services. Any write at plan would be refused, so a passing plan is also one that wrote nothing.
func TestAccRBAC_planReadOnly(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	e.deployment("web", 2)
	f := fixture{t, e.c.Kube}
	f.namespace("app")
	f.service("app", ipService("api", "ClusterIP", "100.64.5.5"))
	kubeconfig, err := e.c.ServiceAccountKubeconfig(ctx, planRole)
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("provider \"k8scidr\" {\n  config_path      = %q\n  calico_api_group = %q\n}\n", kubeconfig, e.group) + `
data "k8scidr_cluster_info" "this" {}
data "k8scidr_service_cidrs" "all" {}
data "k8scidr_service_allocations" "this" {}
data "k8scidr_pod_allocations" "this" {
  cidrs = ["10.10.0.0/18"]
}
data "k8scidr_network_overlaps" "this" {}
data "k8scidr_load_balancers" "this" {}
data "k8scidr_calico_ippools" "all" {}

data "k8scidr_preflight" "this" {
  old_service_cidrs = ["100.64.0.0/13"]
  new_service_cidrs = ["172.24.0.0/15"]
  old_pod_cidrs     = ["10.10.0.0/18"]
  new_pod_cidrs     = ["10.20.0.0/16"]
  lifecycle {
    postcondition {
      condition     = length([for f in self.findings : f if f.check == "check_unread"]) == 0
      error_message = join("\n", [for f in self.findings : f.detail if f.check == "check_unread"])
    }
  }
}

resource "k8scidr_service_cidr" "new" {
  name  = "new"
  cidrs = ["172.24.0.0/15"]
}

resource "k8scidr_service_cidr_policy" "this" {
  name          = "restrict"
  allowed_cidrs = ["172.24.0.0/15"]
}

data "k8scidr_service_moves" "this" {
  target_cidrs = ["172.24.0.0/15"]
}

resource "k8scidr_service_recreation" "this" {
  plan       = data.k8scidr_service_moves.this
}

resource "k8scidr_calico_ippool" "new" {
  name = "new"
  cidr = "10.20.0.0/16"
}

data "k8scidr_workload_restarts" "pods" {
  pod_cidrs = ["10.10.0.0/18"]
}

resource "k8scidr_workload_roll" "pods" {
  plan = data.k8scidr_workload_restarts.pods
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    []resource.TestStep{{Config: config, PlanOnly: true, ExpectNonEmptyPlan: true}},
	})
}

// TestAccRBAC_missingVerb: with the apply role less one verb, the apply fails with a diagnostic
// that names the verb, the resource and the namespace, and says where the role is; with the
// whole role the next apply finishes the job.
func TestAccRBAC_missingVerb(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c, before, _ := movingCluster(t, "rbac", 20)
	ctx := context.Background()
	lacking, err := c.ServiceAccountKubeconfig(ctx, applyRole, "services:delete")
	if err != nil {
		t.Fatal(err)
	}
	w := newCLIWorkspace(t, providerBlock(lacking)+recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", faultTarget), ""))
	w.planFile()
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Services Not All Moved",
		`Missing permission: verb "delete" on resource "services" (API group core) in namespace rbac`,
		"system:serviceaccount:kube-system:k8scidr-apply", "examples/rbac/").MatchString(out) {
		t.Errorf("apply without the delete verb: %v\n%s", err, out)
	}
	// The same ServiceAccount, its role whole again.
	if _, err := c.ServiceAccountKubeconfig(ctx, applyRole); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the authorizer's cache of the role
	w.planFile()
	if out := w.applyFile(); strings.Contains(out, "former managers") {
		t.Errorf("the apply role could not give the moved Services' fields back to their managers:\n%s", out)
	}
	w.converged()
	if err := checkNothingLostIn(c.Kube, "rbac", before, faultTarget); err != nil {
		t.Fatal(err)
	}
}
