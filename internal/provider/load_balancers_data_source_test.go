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

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccLoadBalancersDataSource_ingress reads LoadBalancer Services whose status the test sets
// through the status subresource, as a cloud controller would, and follows one ClusterIP from
// covered to uncovered when its range is retired (the write-up's ClusterIPOutOfRange).
func TestAccLoadBalancersDataSource_ingress(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13"}})
	ctx := context.Background()
	if err := createRange(c.Kube, "keep", "100.72.0.0/28"); err != nil {
		t.Fatal(err)
	}
	lb := func(name, ip string, policy corev1.ServiceExternalTrafficPolicy, ingress ...corev1.LoadBalancerIngress) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: ip, ClusterIPs: []string{ip}, ExternalTrafficPolicy: policy,
			Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 443}},
		}}
		created, err := c.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.LoadBalancer.Ingress = ingress
		if _, err := c.Kube.CoreV1().Services("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lb("web", "100.64.10.7", corev1.ServiceExternalTrafficPolicyLocal,
		corev1.LoadBalancerIngress{Hostname: "web-1234.elb.example.test"}, corev1.LoadBalancerIngress{IP: "203.0.113.7"})
	lb("kept", "100.72.0.5", corev1.ServiceExternalTrafficPolicyCluster)
	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.Kube.CoreV1().Services("default").Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := providerBlock(c.Kubeconfig) + `
data "k8scidr_load_balancers" "all" {}

output "records" {
  value = { for k, lb in data.k8scidr_load_balancers.all.load_balancers : k => lb.ingress_hostnames if length(lb.ingress_hostnames) > 0 }
}
`
	entry := func(name, ip string, covered bool, policy string, hosts, ips []string) knownvalue.Check {
		strs := func(s []string) knownvalue.Check {
			checks := []knownvalue.Check{}
			for _, v := range s {
				checks = append(checks, knownvalue.StringExact(v))
			}
			return knownvalue.ListExact(checks)
		}
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"namespace": knownvalue.StringExact("default"), "name": knownvalue.StringExact(name),
			"cluster_ips": strs([]string{ip}), "cluster_ips_covered": knownvalue.ListExact([]knownvalue.Check{knownvalue.Bool(covered)}),
			"covered": knownvalue.Bool(covered), "external_traffic_policy": knownvalue.StringExact(policy),
			"ingress_hostnames": strs(hosts), "ingress_ips": strs(ips),
		})
	}
	all := func(keptCovered bool) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("data.k8scidr_load_balancers.all", tfjsonpath.New("load_balancers"), knownvalue.MapExact(map[string]knownvalue.Check{
			"default/web":  entry("web", "100.64.10.7", true, "Local", []string{"web-1234.elb.example.test"}, []string{"203.0.113.7"}),
			"default/kept": entry("kept", "100.72.0.5", keptCovered, "Cluster", nil, nil),
		}))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{all(true),
					statecheck.ExpectKnownOutputValue("records", knownvalue.MapExact(map[string]knownvalue.Check{
						"default/web": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("web-1234.elb.example.test")}),
					})),
				},
			},
			{
				// The keep-range is retired: it stays Terminating (kept holds an IP in it) and no
				// longer covers the address.
				PreConfig: func() {
					if err := c.Kube.NetworkingV1().ServiceCIDRs().Delete(ctx, "keep", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{all(false)},
			},
		},
	})
}
