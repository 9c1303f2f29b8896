// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The TestAccMatrix_ tests run a focused subset on each older Kubernetes release named in
// K8SCIDR_MATRIX (make test: 1.29 1.32 1.33; make test-matrix: every release) and on the
// suite's own, the newest, which the rest of the suite runs on. Each release gets a cluster of
// its own per test.

// forEachRelease runs f as a subtest on a fresh cluster of each release of the matrix, started
// with opts applied. A release that is not built fails the test under make (which builds them)
// and is skipped, with the reason, otherwise.
func forEachRelease(t *testing.T, opts func(*testcluster.Options), f func(*testing.T, testcluster.Release, *testcluster.Cluster)) {
	t.Helper()
	testAccPreCheck(t)
	requireOwnCluster(t)
	names := strings.Fields(strings.ReplaceAll(os.Getenv("K8SCIDR_MATRIX"), ",", " "))
	if len(names) == 0 {
		t.Skip("K8SCIDR_MATRIX names no release (make test sets it)")
	}
	if !slices.Contains(names, testcluster.NewestRelease) {
		names = append(names, testcluster.NewestRelease) // and always the suite's own
	}
	for _, name := range names {
		r, err := testcluster.ReleaseNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			if err := r.Built(); err != nil {
				if os.Getenv("K8SCIDR_REQUIRE_CLUSTER") != "" {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			o := r.Options()
			if opts != nil {
				opts(&o)
			}
			f(t, r, startCluster(t, o))
		})
	}
}

// TestAccMatrix_clusterInfo: version and ServiceCIDR API discovery.
func TestAccMatrix_clusterInfo(t *testing.T) {
	forEachRelease(t, nil, func(t *testing.T, r testcluster.Release, c *testcluster.Cluster) {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			Steps: []resource.TestStep{{
				Config: providerBlock(c.Kubeconfig) + clusterInfoConfig,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("server_version"),
						knownvalue.StringRegexp(regexp.MustCompile(`^v`+regexp.QuoteMeta(r.Name)+`\.\d+$`))),
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("service_cidr_api_version"), knownvalue.StringExact(r.ServiceCIDRVersion)),
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("default_service_cidrs"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(c.ServiceCIDRs[0])})),
				},
			}},
		})
	})
}

// TestAccMatrix_serviceCIDR: a range's lifecycle through the release's API version: create
// (Ready), import, the ServiceCIDRs data source, appending the IPv6 family (in place from 1.33,
// a replacement before), destroy (gone from the cluster).
func TestAccMatrix_serviceCIDR(t *testing.T) {
	dualStack := func(o *testcluster.Options) { o.ServiceCIDRs = []string{"100.64.0.0/13", "fd00:10:96::/108"} }
	forEachRelease(t, dualStack, func(t *testing.T, r testcluster.Release, c *testcluster.Cluster) {
		config := func(cidrs ...string) string {
			return providerBlock(c.Kubeconfig) + serviceCIDRBlock("acc-matrix", cidrs...) +
				"data \"k8scidr_service_cidrs\" \"all\" {\n  depends_on = [k8scidr_service_cidr.this]\n}\n"
		}
		appendAction := plancheck.ResourceActionUpdate
		if r.ServiceCIDRVersion != "networking.k8s.io/v1" {
			appendAction = plancheck.ResourceActionDestroyBeforeCreate
		}
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			CheckDestroy:             serviceCIDRsDestroyedIn(c),
			Steps: []resource.TestStep{
				{
					Config: config("172.24.0.0/15"),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("api_version"), knownvalue.StringExact(r.ServiceCIDRVersion)),
						statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("ready"), knownvalue.Bool(true)),
						statecheck.ExpectKnownValue("data.k8scidr_service_cidrs.all", tfjsonpath.New("service_cidrs"), knownvalue.ListSizeExact(2)),
					},
					ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				},
				{
					ResourceName: serviceCIDRAddr, ImportState: true, ImportStateId: "acc-matrix",
					ImportStateVerify: true, ImportStateVerifyIdentifierAttribute: "name",
				},
				{
					Config: config("172.24.0.0/15", "fd00:24::/108"),
					ConfigPlanChecks: resource.ConfigPlanChecks{
						PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(serviceCIDRAddr, appendAction)},
						PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
					},
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue(serviceCIDRAddr, tfjsonpath.New("ready"), knownvalue.Bool(true)),
					},
				},
			},
		})
	})
}

// TestAccMatrix_recreation: a small move with the defaults, through a saved plan: kube-dns
// first, the DNS bridge on its old IP and app/web's old-IP bridge on its, then the DNS bridge
// switched off.
func TestAccMatrix_recreation(t *testing.T) {
	forEachRelease(t, nil, func(t *testing.T, _ testcluster.Release, c *testcluster.Cluster) {
		f := fixture{t, c.Kube}
		f.namespace("app")
		f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
		dns := ipService("kube-dns", "ClusterIP", "100.64.0.10")
		dns.Spec.Selector = map[string]string{"k8s-app": "kube-dns"}
		f.service("kube-system", dns)
		f.service("app", ipService("web", "ClusterIP", "100.64.7.200"))
		f.service("app", ipService("lb", "LoadBalancer", "100.64.12.7"))
		f.waitReadySlice("kube-system", "kube-dns")
		moves := map[string][2][]string{
			"kube-system/kube-dns": {{"100.64.0.10"}, {"172.24.0.10"}},
			"app/web":              {{"100.64.7.200"}, {"172.24.7.200"}},
		}
		w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", bridgesDefault, "172.24.0.0/15"))
		w.planFile()
		expect(t, "planned moves", w.planned(recreationAddr, "plan.moves"), movesCheck(moves))
		w.applyFile()
		w.converged()
		expect(t, "recreated", w.stateValue(recreationAddr, "recreated"), recreatedCheck(moves))
		now := servicesIn(t, c.Kube, "")
		for k, mv := range moves {
			if got := now[k].Spec.ClusterIP; got != mv[1][0] {
				t.Errorf("%s at %s, planned %s", k, got, mv[1][0])
			}
		}
		if bridge := now["kube-system/"+recreation.DefaultDNSBridgeName]; bridge.Spec.ClusterIP != "100.64.0.10" {
			t.Errorf("the DNS bridge is not on kube-dns's old IP: %+v", bridge.Spec)
		}
		if bridges, err := recreation.ListOldIPBridges(context.Background(), clientFor(c), ""); err != nil || len(bridges) != 1 ||
			bridges[0].For != "app/web" || !slices.Equal(bridges[0].IPs, []string{"100.64.7.200"}) {
			t.Errorf("old-IP bridges after the move: %+v (%v), want app/web's on 100.64.7.200", bridges, err)
		}
		if ip := now["app/lb"].Spec.ClusterIP; ip != "100.64.12.7" {
			t.Errorf("the LoadBalancer moved to %s", ip)
		}
		kubeletsOnDNSService(t, c, w)
		w.write(recreationConfig(c.Kubeconfig, "  dns_bridge = false", bridgesDefault, "172.24.0.0/15"))
		w.planFile()
		w.applyFile()
		w.converged()
		if _, ok := servicesIn(t, c.Kube, "kube-system")["kube-system/"+recreation.DefaultDNSBridgeName]; ok {
			t.Error("the DNS bridge is still there after dns_bridge = false")
		}
	})
}

// TestAccMatrix_roll: the pods started before a time are restarted, through a saved plan.
func TestAccMatrix_roll(t *testing.T) {
	forEachRelease(t, nil, func(t *testing.T, _ testcluster.Release, c *testcluster.Cluster) {
		ctx := context.Background()
		f := fixture{t, c.Kube}
		f.namespace("app")
		f.deployment("app", "web", map[string]string{"app": "web"})
		running := func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }
		old, err := c.WaitPods(ctx, "app", "app=web", 1, running)
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().Add(time.Second).UTC().Truncate(time.Second)
		time.Sleep(time.Until(before) + 100*time.Millisecond)
		w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+rollHCL("app",
			fmt.Sprintf("  namespaces     = [\"app\"]\n  started_before = %q", before.Format(time.RFC3339)), ""))
		w.planFile()
		expect(t, "planned workloads", w.planned("k8scidr_workload_roll.app", "plan.workloads"), strListCheck("app/deployment/web"))
		w.applyFile()
		w.converged()
		expect(t, "rolled", w.stateValue("k8scidr_workload_roll.app", "rolled"),
			knownvalue.MapExact(map[string]knownvalue.Check{"app/deployment/web": knownvalue.NotNull()}))
		pods, err := c.WaitPods(ctx, "app", "app=web", 1, running)
		if err != nil {
			t.Fatal(err)
		}
		// Creation times have whole seconds: a fast roll makes the new pod in the second of before.
		if pods[0].UID == old[0].UID || pods[0].CreationTimestamp.Time.Before(before) {
			t.Errorf("web's pod %s (created %v) is not a new one made by the roll at %v (the old one was %s)",
				pods[0].Name, pods[0].CreationTimestamp, before, old[0].Name)
		}
	})
}

// TestAccMatrix_defaultRange: what making the default range Terminating does to dynamic
// ClusterIP allocation on each release, checked on the real server, and the plan warning for
// destroying it where (and only where) that breaks Service creation.
func TestAccMatrix_defaultRange(t *testing.T) {
	forEachRelease(t, nil, func(t *testing.T, r testcluster.Release, c *testcluster.Cluster) {
		ctx := context.Background()
		w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+`
resource "k8scidr_service_cidr" "new" {
  name  = "new"
  cidrs = ["172.24.0.0/15"]
}

import {
  to = k8scidr_service_cidr.default
  id = "kubernetes"
}

resource "k8scidr_service_cidr" "default" {
  name  = "kubernetes"
  cidrs = ["100.64.0.0/13"]
}
`)
		w.planFile()
		w.applyFile()
		w.write(providerBlock(c.Kubeconfig) + `
resource "k8scidr_service_cidr" "new" {
  name  = "new"
  cidrs = ["172.24.0.0/15"]
}
`)
		out := w.planFile()
		warned := diagRE("Deleting the Default ServiceCIDR Stops Service Creation").MatchString(out)
		if warned != r.DualWrite {
			t.Errorf("Kubernetes %s: destroy of the default range warned = %t, want %t:\n%s", r.Name, warned, r.DualWrite, out)
		}
		// The fact behind the warning: with the default range Terminating (default/kubernetes
		// holds its first IP, so it stays) and another range Ready, create a Service without an IP.
		if err := servicecidr.DeleteServiceCIDR(ctx, clientFor(c), k8sops.DefaultServiceCIDRName, false); err != nil {
			t.Fatal(err)
		}
		svc := clusterIPService("dynamic", "")
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		got, err := c.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		switch {
		case r.DualWrite && err == nil:
			t.Errorf("Kubernetes %s: a dynamic ClusterIP was allocated (%s) while the default range is Terminating: the warning is wrong", r.Name, got.Spec.ClusterIP)
		case !r.DualWrite && err != nil:
			t.Errorf("Kubernetes %s: no dynamic ClusterIP while the default range is Terminating (%v): this release needs the warning too", r.Name, err)
		default:
			t.Logf("Kubernetes %s, default range Terminating: dynamic allocation %v", r.Name, describeAllocation(got, err))
		}
	})
}

func describeAllocation(s *corev1.Service, err error) string {
	if err != nil {
		return "refused: " + err.Error()
	}
	return "gave " + s.Spec.ClusterIP
}

// TestAccMatrix_serviceCIDRGate: before 1.33 the preflight refuses to start while
// kube-controller-manager (its mirror pod, as kubeadm and kOps run it) lacks the
// MultiCIDRServiceAllocator gate, and passes once it has it; from 1.33 the gate is on by default.
func TestAccMatrix_serviceCIDRGate(t *testing.T) {
	forEachRelease(t, nil, func(t *testing.T, r testcluster.Release, c *testcluster.Cluster) {
		ctx := context.Background()
		// Each kube-controller-manager pod has its own name: a grace-0 delete first writes a
		// deletionTimestamp, kwok's pod-delete stage answers it with a delete by name (no UID
		// precondition), and that delete can land on a replacement of the same name.
		prev := ""
		kcm := func(name, gates string) {
			pods := c.Kube.CoreV1().Pods("kube-system")
			if prev != "" {
				_ = pods.Delete(ctx, prev, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
					_, err := pods.Get(ctx, prev, metav1.GetOptions{})
					return apierrors.IsNotFound(err), nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			prev = name
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"component": "kube-controller-manager"}},
				Spec: corev1.PodSpec{NodeName: "kwok-node-0", HostNetwork: true, Containers: []corev1.Container{{Name: "kube-controller-manager", Image: "kcm:1",
					Command: []string{"kube-controller-manager", "--feature-gates=" + gates}}}}}
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+`
data "k8scidr_preflight" "this" {
  old_service_cidrs = ["100.64.0.0/13"]
  new_service_cidrs = ["172.24.0.0/15"]
}
`)
		gateFindings := func() []string {
			if out, err := w.run("apply", "-auto-approve", "-refresh-only"); err != nil {
				t.Fatalf("preflight: %v\n%s", err, out)
			}
			var got []string
			for _, f := range list(w.stateValue("data.k8scidr_preflight.this", "findings")) {
				if dig(f, "check") == "service_cidr_gate" {
					got = append(got, fmt.Sprint(dig(f, "severity"), " ", dig(f, "object", "name")))
				}
			}
			return got
		}
		kcm("kube-controller-manager-kwok-node-0", "RotateKubeletServerCertificate=true")
		got := gateFindings()
		want := []string{"blocker kube-controller-manager-kwok-node-0"}
		if minor, _ := strconv.Atoi(strings.TrimPrefix(r.Name, "1.")); minor >= 33 { // on by default
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("Kubernetes %s, kube-controller-manager without the gate: findings %v, want %v", r.Name, got, want)
		}
		kcm("kube-controller-manager-kwok-node-0-gated", "RotateKubeletServerCertificate=true,MultiCIDRServiceAllocator=true")
		if got := gateFindings(); len(got) > 0 {
			t.Errorf("Kubernetes %s, kube-controller-manager with the gate: findings %v, want none", r.Name, got)
		}
	})
}

// TestAccMatrix_serviceCIDRPolicy: the ServiceCIDR policy through the ValidatingAdmissionPolicy
// API each release serves: admissionregistration.k8s.io/v1 from 1.30; on 1.29 v1beta1 where
// kube-apiserver serves it (its gate and runtime-config on), and a plan-time error naming both
// where it serves neither (1.29's default). From 1.30: create, a range outside refused, one inside
// admitted, import. On 1.29, whose CEL has no cidr(), allowed_cidrs is refused at plan and
// deny_new is enforced.
func TestAccMatrix_serviceCIDRPolicy(t *testing.T) {
	forEachRelease(t, nil, func(t *testing.T, r testcluster.Release, c *testcluster.Cluster) {
		allowed := policyBlock("  allowed_cidrs = [\"172.24.0.0/15\"]\n")
		if r.Name == "1.29" {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: providerBlock(c.Kubeconfig) + allowed,
					ExpectError: diagRE("ValidatingAdmissionPolicy Not Served", "serves no ValidatingAdmissionPolicy API",
						"--feature-gates=ValidatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true"),
				}},
			})
			o := r.Options()
			o.APIServerFlags = append(o.APIServerFlags, "--feature-gates=ValidatingAdmissionPolicy=true",
				"--runtime-config=admissionregistration.k8s.io/v1beta1=true")
			// Its status controller (type checking, which the apply waits for) too.
			o.ControllerManagerFlags = append(o.ControllerManagerFlags, "--feature-gates=ValidatingAdmissionPolicy=true")
			c = startCluster(t, o)
			caps, err := clientFor(c).Capabilities()
			if err != nil || caps.AdmissionPolicyV1 || !caps.AdmissionPolicyV1beta1 {
				t.Fatalf("the 1.29 cluster with the gate serves v1 %v, v1beta1 %v (%v): want only v1beta1", caps.AdmissionPolicyV1, caps.AdmissionPolicyV1beta1, err)
			}
			// Its CEL has no cidr(): allowed_cidrs is refused at plan; deny_new works through v1beta1.
			provider := providerBlock(c.Kubeconfig)
			denyNew := policyBlock("  deny_new = true\n")
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{
					{
						Config:      provider + allowed,
						ExpectError: diagRE("Allowed CIDRs Need Kubernetes 1.30", "cidr() library", "deny_new = true"),
					},
					{
						// The new range first, then no other.
						Config: provider + serviceCIDRBlock("services-172-24", "172.24.0.0/15"),
					},
					{
						Config: provider + serviceCIDRBlock("services-172-24", "172.24.0.0/15") + denyNew,
						ConfigStateChecks: []statecheck.StateCheck{
							statecheck.ExpectKnownValue(policyAddr, tfjsonpath.New("in_sync"), knownvalue.Bool(true)),
						},
						ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
					},
					{
						Config:      provider + serviceCIDRBlock("services-172-24", "172.24.0.0/15") + denyNew + rangeBlock("more", "more", "172.26.0.0/16"),
						ExpectError: diagRE("ServiceCIDR Not Created", "denied request", "no new ServiceCIDR may be created"),
					},
					{
						ResourceName: policyAddr, ImportState: true, ImportStateVerify: true,
						ImportStateId: policyName, ImportStateVerifyIdentifierAttribute: "name", ImportStateVerifyIgnore: []string{"timeouts"},
					},
				},
			})
			return
		}
		provider := providerBlock(c.Kubeconfig)
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			Steps: []resource.TestStep{
				{
					Config: provider + allowed,
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue(policyAddr, tfjsonpath.New("in_sync"), knownvalue.Bool(true)),
					},
					ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				},
				{
					Config:      provider + allowed + rangeBlock("outside", "outside", "10.99.0.0/24"),
					ExpectError: diagRE("ServiceCIDR Not Created", "denied request", "is not inside the allowed ranges 172.24.0.0/15"),
				},
				{
					Config: provider + allowed + rangeBlock("new", "services-172-24", "172.24.0.0/15"),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("k8scidr_service_cidr.new", tfjsonpath.New("ready"), knownvalue.Bool(true)),
					},
				},
				{
					ResourceName: policyAddr, ImportState: true, ImportStateVerify: true,
					ImportStateId: policyName, ImportStateVerifyIdentifierAttribute: "name", ImportStateVerifyIgnore: []string{"timeouts"},
				},
			},
		})
	})
}
