// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
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

// TestAccServiceAllocationsDataSource_keepRanges: before the Services move, the report shows
// which are outside the new range and the keep-ranges for the IPs that stay: the LoadBalancer's
// 100.64.12.7 (broadcast address of its /30 and /29, so a /28) and the DNS bridge's 100.64.0.10.
func TestAccServiceAllocationsDataSource_keepRanges(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	ns := "apps"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(s *corev1.Service) {
		if _, err := c.Kube.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", s.Name, err)
		}
	}
	lb := clusterIPService("lb", "100.64.12.7")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	bridge := clusterIPService("bridge", "100.64.0.10")
	bridge.Labels = map[string]string{k8sops.DNSBridgeLabel: "true"}
	headless := clusterIPService("headless", "None")
	headless.Spec.ClusterIPs = nil
	for _, s := range []*corev1.Service{lb, bridge, headless, clusterIPService("plain", "100.64.0.20")} {
		create(s)
	}
	config := providerBlock(c.Kubeconfig) + serviceCIDRBlock("new", "172.24.0.0/15") + `
data "k8scidr_service_allocations" "this" {
  cidrs = k8scidr_service_cidr.this.cidrs
}
`
	addr := "data.k8scidr_service_allocations.this"
	strs := func(v ...string) knownvalue.Check {
		checks := make([]knownvalue.Check, len(v))
		for i, s := range v {
			checks[i] = knownvalue.StringExact(s)
		}
		return knownvalue.ListExact(checks)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("covering_cidrs"), strs("100.64.0.8/30", "100.64.12.0/28")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("outside"), strs("apps/bridge", "apps/lb", "apps/plain", "default/kubernetes")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("ranges"), knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
						"cidr": knownvalue.StringExact("172.24.0.0/15"), "capacity": knownvalue.Int64Exact(131070),
						"used": knownvalue.Int64Exact(0), "free": knownvalue.Int64Exact(131070),
					})})),
				},
			},
			{
				// A Service moved into the new range is counted there; the keep-ranges do not change.
				PreConfig: func() {
					deleteService(t, c.Kube, ns, "plain")
					create(clusterIPService("plain", "172.24.0.9"))
				},
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("covering_cidrs"), strs("100.64.0.8/30", "100.64.12.0/28")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("outside"), strs("apps/bridge", "apps/lb", "default/kubernetes")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("ranges").AtSliceIndex(0).AtMapKey("used"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("services"), knownvalue.ListPartial(map[int]knownvalue.Check{
						2: knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"name": knownvalue.StringExact("plain"), "cluster_ips": strs("172.24.0.9"), "ranges": strs("172.24.0.0/15"),
							"stays": knownvalue.Bool(false),
						}),
					})),
				},
			},
			{
				// Let the final destroy of the new range finish: nothing may hold it.
				PreConfig: func() { deleteService(t, c.Kube, ns, "plain") },
				Config:    config,
			},
		},
	})
}
