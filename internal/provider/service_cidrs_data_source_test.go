// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccServiceCIDRsDataSource_fullRange is the story of write-up 002: the apiserver's /28
// holds 14 addresses; default/kubernetes and 13 Services fill it and the next Service fails;
// a k8scidr_service_cidr with a /24 lets it be created there; the data source counts exactly.
func TestAccServiceCIDRsDataSource_fullRange(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"10.96.0.0/28"}})
	ctx := context.Background()
	createService := func(name string) (*corev1.Service, error) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": name}},
		}
		return c.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	}
	config := providerBlock(c.Kubeconfig) + serviceCIDRBlock("extra", "10.97.0.0/24") + `
data "k8scidr_service_cidrs" "all" {
  depends_on = [k8scidr_service_cidr.this]
}
`
	usage := func(extraAllocated, defaultAllocated int64) statecheck.StateCheck {
		item := func(name, cidr string, capacity, allocated int64) knownvalue.Check {
			return knownvalue.ObjectExact(map[string]knownvalue.Check{
				"name": knownvalue.StringExact(name), "cidrs": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(cidr)}),
				"api_version": knownvalue.StringExact("networking.k8s.io/v1"), "ready": knownvalue.Bool(true),
				"terminating": knownvalue.Bool(false), "capacity": knownvalue.Int64Exact(capacity),
				"allocated": knownvalue.Int64Exact(allocated),
			})
		}
		return statecheck.ExpectKnownValue("data.k8scidr_service_cidrs.all", tfjsonpath.New("service_cidrs"), knownvalue.ListExact([]knownvalue.Check{
			item("extra", "10.97.0.0/24", 254, extraAllocated),
			item("kubernetes", "10.96.0.0/28", 14, defaultAllocated),
		}))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		// Once svc-14 is gone, nothing holds the new range and destroy completes.
		CheckDestroy: serviceCIDRsDestroyedIn(c),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					for i := range 13 {
						if _, err := createService(fmt.Sprintf("svc-%02d", i)); err != nil {
							t.Fatalf("Service %d of 13 should fit in the /28: %v", i, err)
						}
					}
					if _, err := createService("svc-14"); err == nil || !strings.Contains(err.Error(), "range is full") {
						t.Fatalf("the 14th Service: got %v, want the range to be full", err)
					}
				},
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{usage(0, 14)},
			},
			{
				PreConfig: func() {
					svc, err := createService("svc-14")
					if err != nil {
						t.Fatalf("with the new range the 14th Service must fit: %v", err)
					}
					if !netip.MustParsePrefix("10.97.0.0/24").Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) {
						t.Fatalf("the 14th Service got %s, outside the new range", svc.Spec.ClusterIP)
					}
				},
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{usage(1, 14)},
			},
			{
				// Nothing but svc-14 holds the new range: remove it so the final destroy can finish.
				PreConfig:         func() { deleteService(t, c.Kube, "default", "svc-14") },
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{usage(0, 14)},
			},
		},
	})
}

func deleteService(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := kube.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
