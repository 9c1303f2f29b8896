package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
	w := newCLIWorkspace(t, config)
	out := w.planFile()
	// A read the role lacks is a warning, not an error, in most data sources: none may appear.
	unread := regexp.MustCompile(`(?i)forbidden|not readable|cannot (get|list|watch)|missing permission|could not be (read|checked)`)
	for _, warning := range cliWarnings(out) {
		if unread.MatchString(warning) {
			t.Errorf("plan warning %q: the plan role lacks a read", warning)
		}
	}
	if unread.MatchString(out) {
		t.Errorf("the plan reports a read it could not make:\n%s", out)
	}
	// And the values are the cluster's, read through the role.
	expect(t, "cluster_info server_version", w.readAtPlan("data.k8scidr_cluster_info.this", "server_version"),
		knownvalue.StringRegexp(regexp.MustCompile(`^v1\.`)))
	expect(t, "planned moves", w.planned("k8scidr_service_recreation.this", "plan.moves"), knownvalue.MapPartial(map[string]knownvalue.Check{
		"app/api": knownvalue.ObjectPartial(map[string]knownvalue.Check{"new_ips": strListCheck("172.24.5.5")}),
	}))
	expect(t, "planned restarts", w.planned("k8scidr_workload_roll.pods", "plan.workloads"), strListCheck("default/deployment/web"))
	pools, _ := w.readAtPlan("data.k8scidr_calico_ippools.all", "pools").([]any)
	if !slices.ContainsFunc(pools, func(p any) bool { return dig(p, "name") == oldPoolName && dig(p, "used") != json.Number("0") }) {
		t.Errorf("calico_ippools read through the plan role: %v; want %s with the two pods' addresses", pools, oldPoolName)
	}
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
	// The same ServiceAccount, its role whole again, once the authorizer says so.
	if _, err := c.ServiceAccountKubeconfig(ctx, applyRole); err != nil {
		t.Fatal(err)
	}
	sa, err := clientcmd.BuildConfigFromFlags("", lacking)
	if err != nil {
		t.Fatal(err)
	}
	saKube := kubernetes.NewForConfigOrDie(sa)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := saKube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: "rbac", Verb: "delete", Resource: "services"}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the restored role never allowed deleting services: %v", err)
	}
	w.planFile()
	if out := w.applyFile(); strings.Contains(out, "former managers") {
		t.Errorf("the apply role could not give the moved Services' fields back to their managers:\n%s", out)
	}
	w.converged()
	if err := checkNothingLostIn(c.Kube, "rbac", before, faultTarget); err != nil {
		t.Fatal(err)
	}
}
