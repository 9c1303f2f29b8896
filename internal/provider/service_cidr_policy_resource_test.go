// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

const policyName = "restrict-service-cidrs"

func policyBlock(body string) string {
	return fmt.Sprintf("\nresource \"k8scidr_service_cidr_policy\" \"this\" {\n  name = %q\n%s}\n", policyName, body)
}

// rangeBlock is a k8scidr_service_cidr created after the policy.
func rangeBlock(label, name, cidr string) string {
	return fmt.Sprintf("\nresource \"k8scidr_service_cidr\" %q {\n  name  = %q\n  cidrs = [%q]\n  depends_on = [k8scidr_service_cidr_policy.this]\n}\n", label, name, cidr)
}

// policyCluster is a cluster of the test's own: the policy governs every ServiceCIDR in it.
func policyCluster(t *testing.T) (*testcluster.Cluster, string) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13"}})
	return c, providerBlock(c.Kubeconfig)
}

const policyAddr = "k8scidr_service_cidr_policy.this"

// deletePolicyObjects deletes the policy's binding, and with policy the policy too, as another
// client would.
func deletePolicyObjects(t *testing.T, kube kubernetes.Interface, policy bool) {
	t.Helper()
	api := kube.AdmissionregistrationV1()
	if err := api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), policyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !policy {
		return
	}
	if err := api.ValidatingAdmissionPolicies().Delete(context.Background(), policyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createRange(kube kubernetes.Interface, name, cidr string) error {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{cidr}}}
	_, err := kube.NetworkingV1().ServiceCIDRs().Create(context.Background(), sc, metav1.CreateOptions{})
	return err
}

// expectRefused checks that creating a range fails with the policy's message.
func expectRefused(kube kubernetes.Interface, name, cidr string, message ...string) error {
	err := createRange(kube, name, cidr)
	if err == nil {
		_ = kube.NetworkingV1().ServiceCIDRs().Delete(context.Background(), name, metav1.DeleteOptions{})
		return fmt.Errorf("ServiceCIDR %s (%s) was admitted", name, cidr)
	}
	for _, m := range message {
		if !strings.Contains(err.Error(), m) {
			return fmt.Errorf("ServiceCIDR %s (%s): error %q lacks %q", name, cidr, err, m)
		}
	}
	return nil
}

// asAPIServer is a client that acts as kube-apiserver's own identity (the admin may impersonate).
func asAPIServer(t *testing.T, c *testcluster.Cluster) kubernetes.Interface {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: servicecidr.APIServerUser, Groups: []string{"system:masters"}}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// TestAccServiceCIDRPolicy_allowed is write-up 002's policy with allowed ranges, against the
// real apiserver: outside ranges are refused with the policy's message (also through
// k8scidr_service_cidr), inside ones admitted, the default range is kube-apiserver's alone, a
// hand edit is repaired, and destroy removes both objects.
func TestAccServiceCIDRPolicy_allowed(t *testing.T) {
	c, provider := policyCluster(t)
	ctx := context.Background()
	allowed := policyBlock("  allowed_cidrs = [\"172.24.0.0/15\", \"100.64.10.0/28\"]\n")
	outsideMsg := "is not inside the allowed ranges 172.24.0.0/15, 100.64.10.0/28 (policy " + policyName + ")"
	defaultMsg := `only kube-apiserver (system:apiserver) may create the default ServiceCIDR "kubernetes" or change its ranges`
	apiserver := asAPIServer(t, c)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			api := c.Kube.AdmissionregistrationV1()
			if _, err := api.ValidatingAdmissionPolicies().Get(ctx, policyName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the policy is still there (%v)", err)
			}
			if _, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, policyName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the binding is still there (%v)", err)
			}
			return createRange(c.Kube, "after-destroy", "10.99.0.0/24") // admitted again
		},
		Steps: []resource.TestStep{
			{
				Config: provider + allowed,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("k8scidr_service_cidr_policy.this", tfjsonpath.New("in_sync"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("k8scidr_service_cidr_policy.this", tfjsonpath.New("validation_actions"),
						knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact("Deny")})),
				},
				Check: func(*terraform.State) error {
					if err := expectRefused(c.Kube, "outside", "10.99.0.0/24", "denied request", "ServiceCIDR outside (10.99.0.0/24) "+outsideMsg); err != nil {
						return err
					}
					// Partly inside is still outside: every CIDR must lie inside an allowed range.
					if err := expectRefused(c.Kube, "wider", "172.24.0.0/14", outsideMsg); err != nil {
						return err
					}
					if err := createRange(c.Kube, "inside", "172.24.0.0/16"); err != nil {
						return fmt.Errorf("a range inside 172.24.0.0/15 was refused: %w", err)
					}
					// The name "kubernetes" exempts nobody: the admin's create is refused by the
					// policy before the apiserver would say it exists.
					if err := expectRefused(c.Kube, k8sops.DefaultServiceCIDRName, "10.99.0.0/24", defaultMsg); err != nil {
						return err
					}
					// kube-apiserver's identity passes the policy (and then meets AlreadyExists).
					if err := createRange(apiserver, k8sops.DefaultServiceCIDRName, "10.99.0.0/24"); !apierrors.IsAlreadyExists(err) {
						return fmt.Errorf("as system:apiserver, creating the default range: got %v, want AlreadyExists", err)
					}
					if err := createRange(apiserver, "by-apiserver", "10.98.0.0/24"); err != nil {
						return fmt.Errorf("as system:apiserver, a range outside the policy was refused: %w", err)
					}
					// Updates that keep the ranges (labels, finalizers) pass, on the default range too.
					def, err := c.Kube.NetworkingV1().ServiceCIDRs().Get(ctx, k8sops.DefaultServiceCIDRName, metav1.GetOptions{})
					if err != nil {
						return err
					}
					def.Labels = map[string]string{"checked-by": "policy-test"}
					if _, err := c.Kube.NetworkingV1().ServiceCIDRs().Update(ctx, def, metav1.UpdateOptions{}); err != nil {
						return fmt.Errorf("labelling the default range was refused: %w", err)
					}
					// A range outside the policy can still be retired: kube-controller-manager
					// removes its finalizer with an update that keeps the ranges.
					if err := c.Kube.NetworkingV1().ServiceCIDRs().Delete(ctx, "by-apiserver", metav1.DeleteOptions{}); err != nil {
						return err
					}
					return waitRangeGone(ctx, c.Kube, "by-apiserver")
				},
			},
			{
				ResourceName: "k8scidr_service_cidr_policy.this", ImportState: true, ImportStateVerify: true,
				ImportStateId: policyName, ImportStateVerifyIdentifierAttribute: "name", ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				// The binding deleted out of band: the next plan binds the policy again in place.
				PreConfig: func() { deletePolicyObjects(t, c.Kube, false) },
				Config:    provider + allowed,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(policyAddr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: func(*terraform.State) error { return expectRefused(c.Kube, "outside", "10.99.0.0/24", outsideMsg) },
			},
			{
				// Policy and binding deleted out of band (disappears): the next plan creates them again.
				PreConfig: func() { deletePolicyObjects(t, c.Kube, true) },
				Config:    provider + allowed,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(policyAddr, plancheck.ResourceActionCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: func(*terraform.State) error { return expectRefused(c.Kube, "outside", "10.99.0.0/24", outsideMsg) },
			},
			{
				// Through the provider: the diagnostic carries the apiserver's reason.
				Config:      provider + allowed + rangeBlock("outside", "outside", "10.99.0.0/24"),
				ExpectError: diagRE("ServiceCIDR Not Created", "denied request", outsideMsg, "add the range to its allowed_cidrs"),
			},
			{
				Config: provider + allowed + rangeBlock("new", "services-172-24", "172.24.0.0/15"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("k8scidr_service_cidr.new", tfjsonpath.New("ready"), knownvalue.Bool(true)),
				},
			},
			{
				// A hand edit that drops the CIDR check: the plan repairs it.
				PreConfig: func() {
					api := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
					p, err := api.Get(ctx, policyName, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					p.Spec.Validations = p.Spec.Validations[:1]
					if _, err := api.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: provider + allowed + rangeBlock("new", "services-172-24", "172.24.0.0/15"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("k8scidr_service_cidr_policy.this", plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error { return expectRefused(c.Kube, "outside", "10.99.0.0/24", outsideMsg) },
			},
			{
				Config:           provider + allowed + rangeBlock("new", "services-172-24", "172.24.0.0/15"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// deny_new: no new range at all; existing ones and the default stay usable.
				Config: provider + policyBlock("  deny_new = true\n") + rangeBlock("new", "services-172-24", "172.24.0.0/15"),
				Check: func(*terraform.State) error {
					if err := expectRefused(c.Kube, "inside-too", "172.25.0.0/16", "no new ServiceCIDR may be created", "deny_new"); err != nil {
						return err
					}
					if err := createRange(apiserver, "by-apiserver-2", "10.97.0.0/24"); err != nil {
						return fmt.Errorf("deny_new refused kube-apiserver's identity: %w", err)
					}
					return nil
				},
			},
		},
	})
}

// waitRangeGone waits until kube-controller-manager has removed the range's finalizer.
func waitRangeGone(ctx context.Context, kube kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		_, err := kube.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ServiceCIDR %s was not deleted: %w (last: %v)", name, ctx.Err(), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestAccServiceCIDRPolicy_warn admits a range outside the policy in Warn mode and shows the
// apiserver's warning in terraform's output, through the real CLI.
func TestAccServiceCIDRPolicy_warn(t *testing.T) {
	c, provider := policyCluster(t)
	policy := policyBlock("  allowed_cidrs      = [\"172.24.0.0/15\"]\n  validation_actions = [\"Warn\", \"Audit\"]\n")
	w := newCLIWorkspace(t, provider+policy)
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	w.write(provider + policy + rangeBlock("warned", "warned", "10.99.0.0/24"))
	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("in Warn mode the range must be admitted: %v\n%s", err, out)
	}
	if !diagRE("Warning: Kubernetes API Warning", "ServiceCIDR warned (10.99.0.0/24) is not inside the allowed ranges 172.24.0.0/15").MatchString(out) {
		t.Errorf("the policy's warning is not in terraform's output:\n%s", out)
	}
	if _, err := c.Kube.NetworkingV1().ServiceCIDRs().Get(context.Background(), "warned", metav1.GetOptions{}); err != nil {
		t.Errorf("the warned range does not exist: %v", err)
	}
	if out, err := w.run("destroy", "-auto-approve"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
}

// TestAccServiceCIDRPolicy_invalid covers the plan-time checks.
func TestAccServiceCIDRPolicy_invalid(t *testing.T) {
	testAccPreCheck(t)
	for name, c := range map[string]struct{ body, want string }{
		"both":          {"  allowed_cidrs = [\"172.24.0.0/15\"]\n  deny_new = true\n", "Conflicting Policy Settings"},
		"neither":       {"", "Missing Policy Setting"},
		"host bits":     {"  allowed_cidrs = [\"172.24.0.1/15\"]\n", `"172.24.0.1/15" has host bits set: use 172.24.0.0/15`},
		"not a CIDR":    {"  allowed_cidrs = [\"services\"]\n", "Invalid CIDR"},
		"empty":         {"  allowed_cidrs = []\n", "@allowed_cidrs"},
		"deny and warn": {"  deny_new = true\n  validation_actions = [\"Deny\", \"Warn\"]\n", "Deny and Warn cannot be combined"},
		"bad action":    {"  deny_new = true\n  validation_actions = [\"Block\"]\n", "@validation_actions"},
	} {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: testAccProviderConfig() + policyBlock(c.body), PlanOnly: true, ExpectError: diagRE(c.want),
				}},
			})
		})
	}
}
