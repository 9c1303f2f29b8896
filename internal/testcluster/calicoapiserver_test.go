// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Calico's API server, as the test cluster runs it, serves projectcalico.org/v3 IPPools with
// Calico's defaulting and validation, stores them in the crd.projectcalico.org/v1 CRDs, and
// Calico's IPAM gives pods addresses from a pool created through it.
func TestCalicoAPIServer_servesV3Pools(t *testing.T) {
	requireBinaries(t)
	ctx := context.Background()
	start := time.Now()
	c, err := Start(ctx, Options{Nodes: 1, Calico: Calico331, CalicoAPIServer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	t.Logf("cluster with Calico's API server ready in %s", time.Since(start).Round(time.Millisecond))
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	v3 := dyn.Resource(schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: "ippools"})
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"})

	// Calico's validation refuses what calicoctl refuses.
	err = c.CreateCalicoPool(ctx, k8sops.CalicoV3Group, "bad", map[string]any{"cidr": "10.20.0.0/16", "blockSize": int64(19)})
	if err == nil || !strings.Contains(err.Error(), "BlockSize") {
		t.Errorf("a /19 block size: got %v, want Calico's refusal naming BlockSize", err)
	}

	// Only the CIDR given: Calico fills in the rest.
	if err := c.CreateCalicoPool(ctx, k8sops.CalicoV3Group, "pods", map[string]any{"cidr": "10.20.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	got, err := v3.Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]any{"blockSize": int64(26), "nodeSelector": "all()", "ipipMode": "Never", "vxlanMode": "Never"} {
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", field); v != want {
			t.Errorf("spec.%s = %v, want Calico's default %v", field, v, want)
		}
	}
	stored, err := v1.Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pool is not stored in the v1 CRD: %v", err)
	}
	if cidr, _, _ := unstructured.NestedString(stored.Object, "spec", "cidr"); cidr != "10.20.0.0/16" {
		t.Errorf("stored spec.cidr = %q", cidr)
	}

	ipam, err := c.StartCalicoIPAM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dep := deployment("web", 2)
	if _, err := c.Kube.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := c.WaitPodIPs(ctx, "default", "app=web", 2)
	if err != nil {
		t.Fatalf("%v; calico-ipam's errors: %v", err, ipam.Errors())
	}
	for _, p := range pods {
		if !strings.HasPrefix(p.Status.PodIP, "10.20.") {
			t.Errorf("pod %s has %s, want an address of the pool made through the API server", p.Name, p.Status.PodIP)
		}
	}
}
