// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

func testAccServiceCIDRConfig(name string, cidrs ...string) string {
	return testAccProviderConfig() + serviceCIDRBlock(name, cidrs...)
}

func serviceCIDRBlock(name string, cidrs ...string) string {
	return fmt.Sprintf(`
resource "k8scidr_service_cidr" "this" {
  name  = %q
  cidrs = [%s]
}
`, name, quoteJoin(cidrs))
}

func quoteJoin(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// testAccServiceCIDRDestroyed checks in the cluster that no ServiceCIDR of the state remains.
func testAccServiceCIDRDestroyed(s *terraform.State) error {
	return serviceCIDRsDestroyedIn(testAccCluster)(s)
}

func serviceCIDRsDestroyedIn(c *testcluster.Cluster) resource.TestCheckFunc {
	return func(s *terraform.State) error { return checkServiceCIDRsGone(clientFor(c), s) }
}

func checkServiceCIDRsGone(client *k8sops.Client, s *terraform.State) error {
	for _, rs := range s.RootModule().Resources {
		if rs.Type != "k8scidr_service_cidr" {
			continue
		}
		_, err := k8sops.GetServiceCIDR(context.Background(), client, rs.Primary.Attributes["name"])
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("ServiceCIDR %s still exists (or cannot be read: %v)", rs.Primary.Attributes["name"], err)
		}
	}
	return nil
}

func testAccClient() *k8sops.Client { return clientFor(testAccCluster) }

func clientFor(c *testcluster.Cluster) *k8sops.Client {
	client, err := k8sops.NewClient(c.RESTConfig, "", "")
	if err != nil {
		panic(err)
	}
	return client
}

const serviceCIDRAddr = "k8scidr_service_cidr.this"

// TestAccServiceCIDR_basic creates a range, imports it, replaces it on a CIDR change, and
// re-plans empty after each apply.
func TestAccServiceCIDR_basic(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccServiceCIDRDestroyed,
		Steps: []resource.TestStep{
			{
				Config: testAccServiceCIDRConfig("acc-basic", "172.24.0.0/15"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("ready"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("api_version"), knownvalue.StringExact("networking.k8s.io/v1")),
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("capacity"), knownvalue.Int64Exact(131070)),
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("allocated"), knownvalue.Int64Exact(0)),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				ResourceName:                         serviceCIDRAddr,
				ImportState:                          true,
				ImportStateId:                        "acc-basic",
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
			{
				// Deleted out of band (disappears): the next plan creates the range again.
				PreConfig: func() {
					ctx := context.Background()
					if err := testAccCluster.Kube.NetworkingV1().ServiceCIDRs().Delete(ctx, "acc-basic", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					if err := waitRangeGone(ctx, testAccCluster.Kube, "acc-basic"); err != nil {
						t.Fatal(err)
					}
				},
				Config: testAccServiceCIDRConfig("acc-basic", "172.24.0.0/15"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(serviceCIDRAddr, plancheck.ResourceActionCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("ready"), knownvalue.Bool(true)),
				},
			},
			{
				Config: testAccServiceCIDRConfig("acc-basic", "172.26.0.0/24"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(serviceCIDRAddr, plancheck.ResourceActionDestroyBeforeCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("capacity"), knownvalue.Int64Exact(254)),
				},
			},
		},
	})
}

// TestAccServiceCIDR_importDefault imports the apiserver's own range.
func TestAccServiceCIDR_importDefault(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             testAccServiceCIDRConfig("kubernetes", testAccCluster.ServiceCIDRs...),
			ResourceName:       serviceCIDRAddr,
			ImportState:        true,
			ImportStateId:      "kubernetes",
			ImportStatePersist: false,
			ImportStateCheck: func(states []*terraform.InstanceState) error {
				if len(states) != 1 || states[0].Attributes["cidrs.0"] != testAccCluster.ServiceCIDRs[0] || states[0].Attributes["ready"] != "true" {
					return fmt.Errorf("imported default range: %v", states)
				}
				return nil
			},
		}},
	})
}

// TestAccServiceCIDR_invalid: every bad input is a plan-time error on the attribute.
func TestAccServiceCIDR_invalid(t *testing.T) {
	testAccPreCheck(t)
	tests := map[string]struct {
		name  string
		cidrs []string
		want  string
	}{
		"not a CIDR":         {"bad", []string{"172.24.0.0"}, `Invalid CIDR.*not a CIDR prefix`},
		"host bits":          {"bad", []string{"172.25.0.0/15"}, `CIDR Has Host Bits Set.*172\.24\.0\.0/15`},
		"two of one family":  {"bad", []string{"172.24.0.0/15", "10.0.0.0/24"}, `Two CIDRs of One Family`},
		"three":              {"bad", []string{"172.24.0.0/15", "fd00::/108", "10.0.0.0/24"}, `Wrong Number of CIDRs`},
		"IPv4 /32":           {"bad", []string{"100.64.0.10/32"}, `Unusable Service Range.*ClusterIPOutOfRange`},
		"IPv4 /31":           {"bad", []string{"100.64.0.10/31"}, `Unusable Service Range.*use /30 or wider`},
		"IPv6 /128":          {"bad", []string{"fd00::1/128"}, `Unusable Service Range.*IPv6 /128`},
		"IPv6 wider than 64": {"bad", []string{"fd00::/48"}, `Unusable Service Range.*wider\s+than\s+/64`},
		"create kubernetes":  {"kubernetes", []string{"172.24.0.0/15"}, `Cannot Create the Default ServiceCIDR.*Import it instead`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      testAccServiceCIDRConfig(tt.name, tt.cidrs...),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)` + tt.want),
				}},
			})
		})
	}
}

// TestAccServiceCIDR_heldByServices: a range that holds Service IPs cannot be destroyed; the
// error names the addresses and their Services. With wait_for_deletion = false the range is
// left Terminating and takes no new allocations; once its Services go, it disappears.
func TestAccServiceCIDR_heldByServices(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	ctx := context.Background()
	kube := testAccCluster.Kube
	ns := createNamespace(t, "acc-held")
	config := func(wait bool) string {
		return testAccProviderConfig() + fmt.Sprintf(`
resource "k8scidr_service_cidr" "this" {
  name              = "acc-held"
  cidrs             = ["172.28.0.0/29"]
  wait_for_deletion = %t
  timeouts {
    delete = "3s"
  }
}
`, wait)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config(true),
				Check: func(*terraform.State) error {
					_, err := kube.CoreV1().Services(ns).Create(ctx, clusterIPService("held", "172.28.0.3"), metav1.CreateOptions{})
					return err
				},
			},
			{
				Config:      config(true),
				Destroy:     true,
				ExpectError: regexp.MustCompile(`(?s)ServiceCIDR Not Deleted.*172\.28\.0\.3\s+\(` + ns + `/held\)`),
			},
			{
				// Destroy failed, so it is still in state: let the final destroy leave it Terminating.
				Config: config(false),
			},
		},
		CheckDestroy: func(*terraform.State) error {
			sc, err := k8sops.GetServiceCIDR(ctx, testAccClient(), "acc-held")
			if err != nil || !sc.Terminating || sc.Allocated != 1 {
				return fmt.Errorf("want acc-held Terminating with its one IP, got %+v, %v", sc, err)
			}
			_, err = kube.CoreV1().Services(ns).Create(ctx, clusterIPService("refused", "172.28.0.4"), metav1.CreateOptions{})
			if err == nil {
				return fmt.Errorf("a Terminating range still accepted 172.28.0.4")
			}
			return nil
		},
	})
}

func createNamespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	got, err := testAccCluster.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testAccCluster.Kube.CoreV1().Namespaces().Delete(context.Background(), got.Name, metav1.DeleteOptions{})
	})
	return got.Name
}

func clusterIPService(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: ip, ClusterIPs: []string{ip},
			Ports:    []corev1.ServicePort{{Port: 80}},
			Selector: map[string]string{"app": name},
		},
	}
}

// TestAccServiceCIDR_appendFamilyInPlace adds the IPv6 range to an IPv4 ServiceCIDR without
// replacing it (Kubernetes 1.33+), on a dual-stack cluster.
func TestAccServiceCIDR_appendFamilyInPlace(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13", "fd00:10:96::/108"}})
	config := func(cidrs ...string) string {
		return providerBlock(c.Kubeconfig) + serviceCIDRBlock("acc-dual", cidrs...)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config("172.24.0.0/15")},
			{
				Config: config("172.24.0.0/15", "fd00:24::/108"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(serviceCIDRAddr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("capacity"), knownvalue.Int64Exact(131070+1048575)),
					statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("ready"), knownvalue.Bool(true)),
				},
			},
			{
				// Changing a range that is already there replaces the object.
				Config: config("172.24.0.0/16", "fd00:24::/108"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(serviceCIDRAddr, plancheck.ResourceActionDestroyBeforeCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}

// TestAccServiceCIDR_destroyDefaultRange: the imported default range cannot go while the
// apiserver flags still name it (default/kubernetes holds its first IP); destroy says so.
func TestAccServiceCIDR_destroyDefaultRange(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	config := func(wait bool) string {
		return providerBlock(c.Kubeconfig) + fmt.Sprintf(`
resource "k8scidr_service_cidr" "this" {
  name              = "kubernetes"
  cidrs             = [%q]
  wait_for_deletion = %t
  timeouts {
    delete = "3s"
  }
}
`, c.ServiceCIDRs[0], wait)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(true), ResourceName: serviceCIDRAddr, ImportState: true, ImportStateId: "kubernetes", ImportStatePersist: true},
			{Config: config(true)}, // Stores the configured timeouts.
			{
				Config:  config(true),
				Destroy: true,
				ExpectError: regexp.MustCompile(`(?s)ServiceCIDR Not Deleted.*100\.64\.0\.1\s+\(default/kubernetes\).*` +
					`change\s+the\s+apiserver\s+flags\s+first\s+\(KEP-1880\s+procedure\)`),
			},
			{Config: config(false)}, // The final destroy then leaves it Terminating in this throwaway cluster.
		},
	})
}

// TestAccProvider_fieldManager: the provider block's field_manager is the manager of what the
// provider writes ("Field manager name written to `managedFields`"), so a team's objects are
// told apart in managedFields.
func TestAccProvider_fieldManager(t *testing.T) {
	testAccPreCheck(t)
	config := fmt.Sprintf("provider \"k8scidr\" {\n  config_path   = %q\n  field_manager = \"migration-team\"\n}\n", testAccCluster.Kubeconfig) +
		serviceCIDRBlock("field-manager", "172.30.8.0/24")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			Check: func(*terraform.State) error {
				sc, err := testAccCluster.Kube.NetworkingV1().ServiceCIDRs().Get(context.Background(), "field-manager", metav1.GetOptions{})
				if err != nil {
					return err
				}
				var managers []string
				for _, f := range sc.ManagedFields {
					managers = append(managers, f.Manager)
				}
				if !slices.Contains(managers, "migration-team") {
					return fmt.Errorf("ServiceCIDR field-manager is managed by %v, want migration-team (the provider's field_manager)", managers)
				}
				return nil
			},
		}},
	})
}

// TestAccServiceCIDR_defaultRangeReplaced: destroying the imported default range after the
// apiserver moved to a new --service-cluster-ip-range (KEP-1880) waits for the old object only:
// once default/kubernetes leaves it, the apiserver deletes it and creates "kubernetes" again in
// the new range, and the destroy ends, whether it sees the old object gone or already replaced
// by the new one (DeleteServiceCIDR: "gone — or replaced by a new object of the same name, as the
// apiserver recreates the default range"). Which of the two it sees is a race this test does not
// control. A deny_new ServiceCIDR policy in force does not stop the apiserver's recreation.
func TestAccServiceCIDR_defaultRangeReplaced(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13"}})
	ctx := context.Background()
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+"import {\n  to = k8scidr_service_cidr.old\n  id = \"kubernetes\"\n}\n"+
		strings.Replace(serviceCIDRBlock("kubernetes", "100.64.0.0/13"), `"this"`, `"old"`, 1))
	w.planFile()
	w.applyFile()
	old, err := c.Kube.NetworkingV1().ServiceCIDRs().Get(ctx, k8sops.DefaultServiceCIDRName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RestartAPIServer(ctx, []string{"172.24.0.0/15"}); err != nil {
		t.Fatal(err)
	}
	// The destroy deletes the old range, which default/kubernetes (100.64.0.1) holds: it waits.
	cmd, out := w.start(nil, "destroy", "-auto-approve")
	applied := make(chan error, 1)
	go func() { applied <- cmd.Wait() }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sc, err := k8sops.GetServiceCIDR(ctx, clientFor(c), k8sops.DefaultServiceCIDRName)
		return err == nil && sc.Terminating, nil
	})
	if err != nil {
		t.Fatalf("the destroy did not delete the default range: %v\n%s", err, out)
	}
	select {
	case err := <-applied:
		t.Fatalf("the destroy ended (%v) while default/kubernetes held the range:\n%s", err, out)
	default:
	}
	// A deny_new policy (k8scidr_service_cidr_policy) in force, as a locked-down cluster has it
	// at stage 4: no one may create a range, but kube-apiserver its default one.
	if err := servicecidr.ApplyServiceCIDRPolicy(ctx, clientFor(c), servicecidr.ServiceCIDRPolicy{Name: "deny-new", DenyNew: true}); err != nil {
		t.Fatal(err)
	}
	if err := expectRefused(c.Kube, "probe", "10.99.0.0/24", "no new ServiceCIDR may be created"); err != nil {
		t.Fatalf("the deny_new policy is not in force: %v", err)
	}
	// KEP-1880: delete default/kubernetes; the apiserver recreates it, then the range, in 172.24.0.0/15.
	if err := c.Kube.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-applied:
		if err != nil {
			t.Fatalf("destroy: %v\n%s", err, out)
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the destroy did not end once the apiserver replaced the default range:\n%s", out)
	}
	// The apiserver recreates the range in its own time: the destroy may have seen it gone, or
	// already replaced (the UID branch); either way it must not have waited for the new object.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := c.Kube.NetworkingV1().ServiceCIDRs().Get(ctx, k8sops.DefaultServiceCIDRName, metav1.GetOptions{})
		return err == nil && slices.Equal(now.Spec.CIDRs, []string{"172.24.0.0/15"}) && now.UID != old.UID, nil
	})
	if err != nil {
		t.Errorf("the apiserver did not recreate the default range on 172.24.0.0/15: %v", err)
	}
}
