// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"net/netip"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "fake"}}},
			},
		},
	}
}

// Calico's IPAM, as the test cluster runs it, hands out addresses from enabled pools only,
// records them in IPAM blocks with the pods' attributes, and releases them when the pods go.
func TestCalicoIPAM_assignsRecordsAndReleases(t *testing.T) {
	requireBinaries(t)
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 2, Calico: Calico331})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := c.CreateCalicoPool(ctx, k8sops.CalicoCRDV1Group, "old", map[string]any{"cidr": "10.10.0.0/18", "blockSize": int64(26), "ipipMode": "Always", "natOutgoing": true, "nodeSelector": "all()"}); err != nil {
		t.Fatal(err)
	}
	ipam, err := c.StartCalicoIPAM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kube := c.Kube
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, deployment("web", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "host", Namespace: "default", Labels: map[string]string{"app": "host"}},
		Spec:       corev1.PodSpec{HostNetwork: true, NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "c", Image: "fake"}}},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, host, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := netip.MustParsePrefix("10.10.0.0/18")
	pods, err := c.WaitPodIPs(ctx, "default", "app=web", 4)
	if err != nil {
		for _, p := range pods {
			t.Logf("pod %s: node %q phase %s ip %q annotations %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, p.Annotations)
		}
		t.Fatalf("%v; calico-ipam's errors: %v", err, ipam.Errors())
	}
	for _, p := range pods {
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !old.Contains(ip) || p.Annotations[calico.AnnotationPodIP] != ip.String()+"/32" {
			t.Errorf("pod %s: IP %s, annotation %q; want an address of %s in both", p.Name, ip, p.Annotations[calico.AnnotationPodIP], old)
		}
	}
	hostPods, err := c.WaitPods(ctx, "default", "app=host", 1, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		t.Fatal(err)
	}
	if a := hostPods[0].Annotations[calico.AnnotationPodIP]; a != "" {
		t.Errorf("hostNetwork pod got %s from the pool", a)
	}

	client, err := k8sops.NewClient(c.RESTConfig, "test", k8sops.CalicoCRDV1Group)
	if err != nil {
		t.Fatal(err)
	}
	api, err := calico.Calico(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := api.ListBlocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	usage := calico.UsageOf(old, blocks)
	if usage.Used != 4 || usage.Blocks < 1 || usage.Blocks > 2 {
		t.Errorf("usage of %s: %+v, want 4 used in 1 or 2 blocks", old, usage)
	}
	for _, b := range blocks {
		if b.Node == "" || b.CIDR.Bits() != 26 {
			t.Errorf("block %s: node %q, want a /26 affine to a node", b.CIDR, b.Node)
		}
		for _, a := range b.Allocations {
			if a.Namespace != "default" || a.Pod == "" || a.Node != b.Node || a.Handle == "" {
				t.Errorf("allocation %+v lacks its pod attributes", a)
			}
		}
	}

	// Disable the old pool, add a new one: new pods land there.
	if err := c.CreateCalicoPool(ctx, k8sops.CalicoCRDV1Group, "new", map[string]any{"cidr": "10.20.0.0/16", "blockSize": int64(26)}); err != nil {
		t.Fatal(err)
	}
	oldPool, err := api.GetIPPool(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	s := oldPool.Settings
	s.Disabled = true
	if _, err := api.UpdateIPPool(ctx, "test", "old", s, []string{"disabled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, deployment("moved", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moved, err := c.WaitPodIPs(ctx, "default", "app=moved", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range moved {
		if ip := netip.MustParseAddr(p.Status.PodIP); !netip.MustParsePrefix("10.20.0.0/16").Contains(ip) {
			t.Errorf("pod %s got %s while the old pool is disabled", p.Name, ip)
		}
	}

	// The old pool's affinities are released (as its retirement does) while web's pods still
	// hold addresses: the blocks stay, without affinity.
	kept, err := api.ReleasePoolAffinities(ctx, old)
	if err != nil || len(kept) == 0 {
		t.Fatalf("releasing the old pool's affinities kept blocks %v (%v), want web's", kept, err)
	}
	// Deleting the pods releases their addresses, and each block without affinity that becomes
	// empty is deleted, as Calico's release does.
	if err := kube.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPodIPs(ctx, "default", "app=web", 0); err != nil {
		t.Fatal(err)
	}
	var left int
	for range 100 {
		blocks, err = api.ListBlocks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if left = calico.UsageOf(old, blocks).Blocks; left == 0 {
			break
		}
		waitABit()
	}
	if left != 0 {
		t.Errorf("%d blocks left in %s after the pods went: %+v", left, old, blocks)
	}
	if errs := ipam.Errors(); len(errs) > 0 {
		t.Logf("calico-ipam retried: %v", errs)
	}
}

func waitABit() { <-time.After(100 * time.Millisecond) }
