// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// Pods are counted per range and, outside every range, by workload; node podCIDRs are checked
// against a cluster CIDR that no longer holds one of them.
func TestAccPodAllocationsDataSource_poolMove(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	e.deployment("web", 3)
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: map[string]string{"app": "bare"}}, Spec: podTemplate("bare").Spec}
	if _, err := e.c.Kube.CoreV1().Pods("default").Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPods("bare", 1)
	if err := e.c.CreateCalicoPool(ctx, e.group, "new", map[string]any{"cidr": "10.20.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	e.setPool(oldPoolName, true)
	e.deployment("moved", 2)
	config := e.provider() + fmt.Sprintf(`
data "k8scidr_pod_allocations" "both" {
  cidrs        = [%q, "10.20.0.0/16"]
  cluster_cidr = ["100.96.0.0/24"]
}

data "k8scidr_pod_allocations" "old" {
  cidrs = [%q]
}
`, oldPoolCIDR, oldPoolCIDR)
	both, old := "data.k8scidr_pod_allocations.both", "data.k8scidr_pod_allocations.old"
	node := func(name, cidr string, inside knownvalue.Check) knownvalue.Check {
		return knownvalue.ObjectExact(map[string]knownvalue.Check{"name": knownvalue.StringExact(name),
			"pod_cidrs": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(cidr)}), "inside_cluster_cidr": inside})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(both, tfjsonpath.New("ranges"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{"cidr": knownvalue.StringExact(oldPoolCIDR), "pods": knownvalue.Int64Exact(4)}),
					knownvalue.ObjectExact(map[string]knownvalue.Check{"cidr": knownvalue.StringExact("10.20.0.0/16"), "pods": knownvalue.Int64Exact(2)}),
				})),
				statecheck.ExpectKnownValue(both, tfjsonpath.New("outside"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				statecheck.ExpectKnownValue(both, tfjsonpath.New("nodes"), knownvalue.ListExact([]knownvalue.Check{
					node("kwok-node-0", "100.96.0.0/24", knownvalue.ListExact([]knownvalue.Check{knownvalue.Bool(true)})),
					node("kwok-node-1", "100.96.1.0/24", knownvalue.ListExact([]knownvalue.Check{knownvalue.Bool(false)})),
				})),
				statecheck.ExpectKnownValue(old, tfjsonpath.New("outside"), knownvalue.MapExact(map[string]knownvalue.Check{
					"default/deployment/moved": knownvalue.Int64Exact(2),
				})),
				statecheck.ExpectKnownValue(old, tfjsonpath.New("nodes"), knownvalue.ListPartial(map[int]knownvalue.Check{
					0: node("kwok-node-0", "100.96.0.0/24", knownvalue.Null()),
				})),
			},
		}},
	})
}
