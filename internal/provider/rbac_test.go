// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
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
		"app/api": moveCheck([]string{"100.64.5.5"}, []string{"172.24.5.5"}),
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
	if err := waitAllowed(lacking, authorizationv1.ResourceAttributes{Verb: "delete", Resource: "services"}, true); err != nil {
		t.Fatal(err)
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

// TestAccRBAC_endpointsWithoutWatch: with the apply role less watch on endpoints, a recreation
// of Services among which selector-less ones still moves them all with their Endpoints: the run
// says it reads Endpoints one by one instead of from its watch, and nothing is lost. With the
// whole role the run watches them (the log says nothing of it).
func TestAccRBAC_endpointsWithoutWatch(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c, before, _ := movingCluster(t, "nowatch", 20)
	ctx := context.Background()
	const oneByOne = "Endpoints are read one by one: watching them failed"
	for _, role := range []struct {
		lacking []string
		target  netip.Prefix
	}{{[]string{"endpoints:watch"}, faultTarget}, {nil, pingPong[1]}} {
		kubeconfig, err := c.ServiceAccountKubeconfig(ctx, applyRole, role.lacking...)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitAllowed(kubeconfig, authorizationv1.ResourceAttributes{Verb: "watch", Resource: "endpoints"}, len(role.lacking) == 0); err != nil {
			t.Fatal(err)
		}
		w := newCLIWorkspace(t, providerBlock(kubeconfig)+recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", role.target), ""))
		w.planFile()
		logPath := filepath.Join(t.TempDir(), "apply.log")
		if out, err := w.command([]string{"TF_LOG=INFO", "TF_LOG_PATH=" + logPath}, "apply", "-no-color", "tfplan").CombinedOutput(); err != nil {
			t.Fatalf("apply with the role lacking %v: %v\n%s", role.lacking, err, out)
		}
		log, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if said := strings.Contains(string(log), oneByOne); said != (len(role.lacking) > 0) {
			t.Errorf("role lacking %v: the apply log says %q: %v", role.lacking, oneByOne, said)
		}
		if err := checkNothingLostIn(c.Kube, "nowatch", before, role.target); err != nil {
			t.Fatalf("role lacking %v: %v", role.lacking, err)
		}
		w.converged()
	}
}

// waitAllowed waits until the authorizer allows (or, with allowed false, denies) the kubeconfig's
// user what a asks (a namespace of "" meaning every namespace): a role just changed takes a
// moment to apply.
func waitAllowed(kubeconfig string, a authorizationv1.ResourceAttributes, allowed bool) error {
	kube, err := kubeFor(kubeconfig)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := allowedTo(ctx, kube, a)
		return err == nil && got == allowed, nil
	})
	if err != nil {
		return fmt.Errorf("the authorizer never said %v to %+v: %w", allowed, a, err)
	}
	return nil
}

// allowedTo asks the authorizer whether kube's identity may do what a asks.
func allowedTo(ctx context.Context, kube kubernetes.Interface, a authorizationv1.ResourceAttributes) (bool, error) {
	r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// kubeFor is a clientset with the kubeconfig's current credentials.
func kubeFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// TestAccRBAC_leastPrivilege: examples/rbac's roles, bound as the file says, deny what the
// provider must never do (the ways from its credentials to a cluster-admin, another team's
// policy or a node's heartbeat) and allow what it does; TestAccMigrationExample applies the whole
// migration under the same apply role, and TestAccRBAC_planReadOnly plans everything under the
// plan role. The allowed reviews are waited for first: once the authorizer says yes to them, the
// bindings are in its cache and a no is the role's, not the cache's.
func TestAccRBAC_leastPrivilege(t *testing.T) {
	testAccPreCheck(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	type review struct {
		verb, resource, namespace, name, group string
		allowed                                bool
	}
	attributes := func(r review) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: r.verb, Resource: r.resource, Namespace: r.namespace, Name: r.name, Group: r.group}
	}
	journal := recreation.DefaultJournalNamespace
	for _, role := range []struct {
		file    string
		reviews []review
	}{
		{applyRole, []review{
			// what the provider does
			{"create", "configmaps", journal, "", "", true},
			{"delete", "configmaps", journal, "k8scidr-journal-x", "", true},
			{"update", "leases", journal, "k8scidr-journal-default", "coordination.k8s.io", true},
			{"create", "events", journal, "", "", true},
			{"create", "pods", "default", "", "", true}, // the canary
			{"get", "configmaps", "kube-system", "kubelet-config", "", true},
			{"delete", "services", "app", "web", "", true},
			{"update", "validatingadmissionpolicies", "", "restrict-service-cidrs", "admissionregistration.k8s.io", true},
			// what it must not: a pod in kube-system runs as any of its ServiceAccounts
			{"create", "pods", "kube-system", "", "", false},
			{"create", "pods", "app", "", "", false},
			{"delete", "pods", "kube-system", "kube-apiserver-kwok-node-0", "", false},
			{"get", "configmaps", "kube-system", "aws-auth", "", false},
			{"update", "configmaps", "kube-system", "aws-auth", "", false},
			{"update", "configmaps", "kube-system", "coredns", "", false},
			{"create", "configmaps", "kube-system", "", "", false},
			{"list", "configmaps", "", "", "", false},
			{"update", "leases", "kube-node-lease", "kwok-node-0", "coordination.k8s.io", false},
			{"delete", "leases", "kube-system", "kube-controller-manager", "coordination.k8s.io", false},
			{"create", "events", "kube-system", "", "", false},
			{"update", "validatingadmissionpolicies", "", "another-teams-policy", "admissionregistration.k8s.io", false},
			{"delete", "validatingadmissionpolicybindings", "", "another-teams-policy", "admissionregistration.k8s.io", false},
			{"create", "namespaces", "", "", "", false},
		}},
		{planRole, []review{
			{"list", "configmaps", journal, "", "", true},
			{"get", "configmaps", "kube-system", "kubeadm-config", "", true},
			{"get", "configmaps", "kube-system", "coredns", "", true}, // the Corefile's TTLs (k8scidr_cluster_info)
			{"list", "services", "", "", "", true},
			{"get", "configmaps", "kube-system", "aws-auth", "", false},
			{"list", "configmaps", "kube-system", "", "", false},
			{"list", "secrets", "", "", "", false},
			{"create", "configmaps", journal, "", "", false},
			{"update", "services", "app", "web", "", false},
		}},
	} {
		kubeconfig, err := c.ServiceAccountKubeconfig(ctx, role.file)
		if err != nil {
			t.Fatal(err)
		}
		kube, err := kubeFor(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range role.reviews {
			if r.allowed {
				if err := waitAllowed(kubeconfig, attributes(r), true); err != nil {
					t.Errorf("%s: the provider needs it: %v", filepath.Base(role.file), err)
				}
			}
		}
		for _, r := range role.reviews {
			if r.allowed {
				continue
			}
			if got, err := allowedTo(ctx, kube, attributes(r)); err != nil || got {
				t.Errorf("%s: %s %s %s/%s (group %q) allowed=%v (%v): the role grants more than the provider needs", filepath.Base(role.file), r.verb, r.resource, r.namespace, r.name, r.group, got, err)
			}
		}
	}
}

// TestAccRBAC_journalNamespaceMissing: the apply role may not create namespaces, and its grant
// in the journal's namespace is a Role there; where that namespace is missing (the role file not
// applied whole), the plan says so instead of only naming the verb refused; once it exists with
// its Role, the recreation applies.
func TestAccRBAC_journalNamespaceMissing(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c, before, _ := movingCluster(t, "nojournal", 4)
	ctx := context.Background()
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, applyRole)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, recreation.DefaultJournalNamespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, recreation.DefaultJournalNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its Role went with it: the plan says the namespace is missing, before anything is changed.
	w := newCLIWorkspace(t, providerBlock(kubeconfig)+recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", faultTarget), ""))
	out, err := w.run("plan")
	if err == nil || !diagRE("the journal's namespace "+recreation.DefaultJournalNamespace+" does not exist",
		"create the namespace with its Roles", `cannot list resource "configmaps"`).MatchString(out) {
		t.Errorf("plan without the journal's namespace: %v\n%s", err, out)
	}
	sameServices(t, "after the refused plan", before, servicesIn(t, c.Kube, "nojournal"))
	if _, err := c.ServiceAccountKubeconfig(ctx, applyRole); err != nil { // the file whole: the namespace and its Role
		t.Fatal(err)
	}
	if err := waitAllowed(kubeconfig, authorizationv1.ResourceAttributes{Verb: "create", Resource: "leases",
		Group: "coordination.k8s.io", Namespace: recreation.DefaultJournalNamespace}, true); err != nil {
		t.Fatal(err)
	}
	w.planFile()
	w.applyFile()
	w.converged()
	if err := checkNothingLostIn(c.Kube, "nojournal", before, faultTarget); err != nil {
		t.Fatal(err)
	}
}
