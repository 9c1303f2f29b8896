// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// KEP-1880's retirement of the default Service range, steps 5–7, as the demo harness does it:
// with a new range Ready, restart kube-apiserver on it, delete the old default ServiceCIDR and
// default/kubernetes; the apiserver recreates both in the new range.
func TestCluster_restartAPIServerMovesTheDefaultRange(t *testing.T) {
	requireBinaries(t)
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	scs := dyn.Resource(schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"})
	newRange := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": map[string]any{"name": "new"},
		"spec": map[string]any{"cidrs": []any{"172.24.0.0/15"}},
	}}
	if _, err := scs.Create(ctx, newRange, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartAPIServer(ctx, []string{"172.24.0.0/15"}); err != nil {
		t.Fatal(err)
	}
	if err := scs.Delete(ctx, k8sops.DefaultServiceCIDRName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Kube.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	var cidrs []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		svc, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not recreated yet
		}
		ip = svc.Spec.ClusterIP
		sc, err := scs.Get(ctx, k8sops.DefaultServiceCIDRName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not recreated yet
		}
		cidrs, _, _ = unstructured.NestedStringSlice(sc.Object, "spec", "cidrs")
		return ip == "172.24.0.1" && slices.Equal(cidrs, []string{"172.24.0.0/15"}) && k8sops.ConditionTrue(sc, "Ready"), nil
	})
	if err != nil {
		t.Fatalf("default/kubernetes at %q and the default ServiceCIDR %v after the restart: %v", ip, cidrs, err)
	}
	// The rest of the control plane still works: a new Service gets an address.
	svc := newService("after-restart")
	got, err := c.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClusterIP == "" || got.Spec.ClusterIP[:4] != "172." {
		t.Errorf("new Service got %q, want an address in 172.24.0.0/15", got.Spec.ClusterIP)
	}
}

func newService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
}
