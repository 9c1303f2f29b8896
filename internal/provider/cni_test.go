// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// cniConfig plans the pod stage's first step (a new Calico pool) beside the preflight data
// source with the pod ranges, and outputs the preflight's cni_ipam findings.
func cniConfig(kubeconfig string) string {
	return providerBlock(kubeconfig) + `
data "k8scidr_preflight" "this" {
  old_pod_cidrs = ["100.96.0.0/11"]
  new_pod_cidrs = ["172.16.0.0/13"]
}

output "cni" {
  value = [for f in data.k8scidr_preflight.this.findings : "${f.severity} ${f.summary}: ${f.detail} Fix: ${f.fix}" if f.check == "cni_ipam"]
}
`
}

const cniPool = `
resource "k8scidr_calico_ippool" "new" {
  name = "pods-172-16"
  cidr = "172.16.0.0/13"
}
`

// notScheduled is a kube-system DaemonSet that runs no pod (its node selector matches no node):
// the test needs only the object, as the preflight and the pool stage read DaemonSets.
func notScheduled(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	const ns = "kube-system"
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"k8scidr.io/no-such-node": "true"},
					Containers: []corev1.Container{{Name: "agent", Image: "agent"}}}}}}
	if _, err := c.Kube.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAccCNI_saidUpFront: the pod stage works only where Calico's IPAM hands out pod addresses.
// On a cluster with no network plugin the provider knows (kubenet: a DaemonSet that is no CNI,
// no Calico API), the preflight warns that it found none, and the pool plan fails saying so
// and what to do instead; once Cilium's DaemonSet runs, both name Cilium (a blocker) instead of
// the generic "serves no Calico IPPool API".
func TestAccCNI_saidUpFront(t *testing.T) {
	testAccPreCheck(t)
	c := startCluster(t, testcluster.Options{})
	notScheduled(t, c, "ebs-csi-node")

	w := newCLIWorkspace(t, cniConfig(c.Kubeconfig))
	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("preflight: %v\n%s", err, out)
	}
	if !diagRE("warning cni_ipam on CNI unknown", "No network plugin this provider knows runs here", "kubenet",
		"The pod stage", "only where Calico's IPAM hands them out").MatchString(out) {
		t.Errorf("the preflight on a kubenet-like cluster did not say it found no known CNI:\n%s", out)
	}
	w.write(cniConfig(c.Kubeconfig) + cniPool)
	out, err = w.run("plan")
	if err == nil || !diagRE("Error: Pod Stage Needs Calico IPAM", "No network plugin this provider knows runs here",
		"With kubenet or host-local IPAM").MatchString(out) {
		t.Errorf("the pool plan on a kubenet-like cluster: %v\n%s", err, out)
	}

	notScheduled(t, c, "cilium")
	w.write(cniConfig(c.Kubeconfig))
	if out, err = w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("preflight: %v\n%s", err, out)
	}
	outputs := out[strings.LastIndex(out, "Outputs:"):] // the diff before it shows the old value too
	if !diagRE("blocker cni_ipam on DaemonSet kube-system/cilium", "The cluster runs Cilium (DaemonSet kube-system/cilium), not Calico",
		"With Cilium", "clusterPoolIPv4PodCIDRList").MatchString(outputs) || strings.Contains(outputs, "No network plugin this provider knows") {
		t.Errorf("the preflight on a Cilium cluster did not name Cilium as a blocker:\n%s", out)
	}
	w.write(cniConfig(c.Kubeconfig) + cniPool)
	out, err = w.run("plan")
	if err == nil || !diagRE("Error: Pod Stage Needs Calico IPAM", "The cluster runs Cilium").MatchString(out) ||
		strings.Contains(out, "Calico Not Readable") {
		t.Errorf("the pool plan on a Cilium cluster: %v\n%s", err, out)
	}
}
