// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPlanPods: the readers of one plan share one list while it is fresh; after that, and
// after a failed list, the next reader lists again. Each pod keeps only PlanPod's part.
func TestPlanPods(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			Annotations: map[string]string{"cni.projectcalico.org/ipv4pools": `["old"]`, "checksum/config": "x"}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "app"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-apiserver-n1"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-apiserver", Command: []string{"kube-apiserver", "--service-cluster-ip-range=100.64.0.0/13"}}}}},
	)
	c := &Client{Kube: kube}
	lists := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	first, err := c.PlanPods(ctx)
	if err != nil || len(first) != 2 {
		t.Fatalf("PlanPods: %d pods, %v; want 2", len(first), err)
	}
	for _, p := range first {
		switch p.Namespace {
		case "app":
			if p.ManagedFields != nil || len(p.Spec.Containers) != 0 || p.Spec.NodeName != "" ||
				len(p.Annotations) != 1 || p.Annotations["cni.projectcalico.org/ipv4pools"] != `["old"]` {
				t.Errorf("app pod kept %+v: want no managedFields, spec or foreign annotations, and Calico's pinning", p)
			}
		case "kube-system":
			if len(p.Spec.Containers) != 1 || len(p.Spec.Containers[0].Command) != 2 {
				t.Errorf("kube-system pod spec %+v: want it whole (the control plane's flags)", p.Spec)
			}
		}
	}
	if _, err := c.PlanPods(ctx); err != nil || lists() != 1 {
		t.Fatalf("second reader: %v, %d lists; want the first list shared", err, lists())
	}
	c.pods.listed = time.Now().Add(-PlanPodsFresh)
	if _, err := c.PlanPods(ctx); err != nil || lists() != 2 {
		t.Fatalf("after %s: %v, %d lists; want a new list", PlanPodsFresh, err, lists())
	}
	c.pods = nil
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.PlanPods(cancelled); err == nil {
		t.Fatal("PlanPods on a cancelled context: no error")
	}
	if c.pods != nil {
		t.Fatal("a failed list was kept for the next reader")
	}
}
