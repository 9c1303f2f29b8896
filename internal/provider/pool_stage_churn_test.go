// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccCalicoIPPool_savedPlanChurn applies a saved pool-stage plan (a new pool, the old one
// imported and disabled) after pods came and went in the old pool, which changes its IPAM
// usage (allocated, blocks): the apply does what the plan showed, and a refreshed plan is empty.
func TestAccCalicoIPPool_savedPlanChurn(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	e.deployment("web", 3)
	config := e.provider() + poolBlock("new", newPool, "  ipip_mode    = \"Always\"\n  nat_outgoing = true\n") + fmt.Sprintf(`
import {
  to = k8scidr_calico_ippool.old
  id = %[1]q
}

resource "k8scidr_calico_ippool" "old" {
  name       = %[1]q
  cidr       = %[2]q
  disabled   = true
  depends_on = [k8scidr_calico_ippool.new]
}
`, oldPoolName, oldPoolCIDR)
	w := newCLIWorkspace(t, config)
	w.planFile()
	expect(t, "planned disabled", w.planned("k8scidr_calico_ippool.old", "disabled"), knownvalue.Bool(true))

	// Other teams' pods: 70 more addresses (a second block) in the old pool, and one pod gone.
	e.deployment("batch", 70)
	web := e.waitPods("web", 3)
	if err := e.c.Kube.CoreV1().Pods("default").Delete(ctx, web[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	churn := newClusterChurn(t, e.c.Kube)
	churn.round("")

	w.applyFile()
	w.converged()
	old, err := e.api.GetIPPool(ctx, oldPoolName)
	if err != nil || old == nil || !old.Settings.Disabled {
		t.Fatalf("the old pool is not disabled: %+v (%v)", old, err)
	}
	// New pods now land in the new pool only.
	e.restart("web")
	e.waitPodsMoved("web", 3)
	if _, err := e.c.WaitPods(ctx, "default", "app=batch", 70, func(p corev1.Pod) bool { return p.Status.PodIP != "" }); err != nil {
		t.Fatal(err)
	}
}

// TestAccServiceCIDR_savedPlanChurn applies a saved plan of the range stage (a new ServiceCIDR
// and keep-ranges for the LoadBalancer IPs, from covering_cidrs read at plan) after Services
// were created in both ranges, which changes their allocated counts: the apply creates exactly
// the planned ranges, and a refreshed plan is empty. A LoadBalancer created after the plan gets
// its keep-range from the next plan.
func TestAccServiceCIDR_savedPlanChurn(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("lb", "LoadBalancer", "100.64.12.7"))
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+`
resource "k8scidr_service_cidr" "new" {
  name              = "new"
  cidrs             = ["172.24.0.0/15"]
  wait_for_deletion = false
}

data "k8scidr_service_allocations" "staying" {
  cidrs = ["172.24.0.0/15"]
}

resource "k8scidr_service_cidr" "keep" {
  for_each          = toset(data.k8scidr_service_allocations.staying.covering_cidrs)
  name              = "keep-${replace(replace(each.key, ".", "-"), "/", "-")}"
  cidrs             = [each.key]
  wait_for_deletion = false
}
`)
	w.planFile()
	churn := newClusterChurn(t, c.Kube)
	churn.round("100.64.200.1")
	churn.round("100.64.12.9") // inside the planned keep-range
	f.service("app", ipService("lb2", "LoadBalancer", "100.64.30.3"))
	w.applyFile()
	for name, want := range map[string][]string{"new": {"172.24.0.0/15"}, "keep-100-64-12-0-28": {"100.64.12.0/28"}} {
		sc, err := k8sops.GetServiceCIDR(context.Background(), clientFor(c), name)
		if err != nil || !sc.Ready || fmt.Sprint(sc.CIDRs) != fmt.Sprint(want) {
			t.Errorf("ServiceCIDR %s: %+v (%v), want Ready %v", name, sc, err, want)
		}
	}
	if sc, err := k8sops.GetServiceCIDR(context.Background(), clientFor(c), "keep-100-64-30-0-29"); err == nil {
		t.Errorf("the apply created a keep-range the plan did not show: %+v", sc)
	}
	w.planFile()
	if got := w.plannedActions(`k8scidr_service_cidr.keep["100.64.30.0/29"]`); fmt.Sprint(got) != "[create]" {
		t.Errorf("the next plan does not create the keep-range of the LoadBalancer created after the plan: %v", got)
	}
	w.applyFile()
	w.converged()
}
