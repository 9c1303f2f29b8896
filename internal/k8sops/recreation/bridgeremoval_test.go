// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

func TestResolvesThroughAndNamesIP(t *testing.T) {
	bridge := []string{"100.64.0.10", "fd00:64::a"}
	for _, c := range []struct {
		name         string
		policy       corev1.DNSPolicy
		host         bool
		ns           []string
		through, pin bool
	}{
		{"default policy", "", false, nil, true, false},
		{"ClusterFirst", corev1.DNSClusterFirst, false, nil, true, false},
		{"ClusterFirst on the host network falls back to the node", corev1.DNSClusterFirst, true, nil, false, false},
		{"ClusterFirstWithHostNet on the host network", corev1.DNSClusterFirstWithHostNet, true, nil, true, false},
		{"Default", corev1.DNSDefault, false, nil, false, false},
		{"None naming the bridge", corev1.DNSNone, false, []string{"8.8.8.8", "100.64.0.10"}, false, true},
		{"None naming the bridge's IPv6 spelled long", corev1.DNSNone, false, []string{"fd00:64:0:0::000a"}, false, true},
		{"None naming others", corev1.DNSNone, false, []string{"172.24.0.10"}, false, false},
		{"Default adding the bridge", corev1.DNSDefault, false, []string{"100.64.0.10"}, false, true},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{DNSPolicy: c.policy, HostNetwork: c.host}}
		if c.ns != nil {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: c.ns}
		}
		if got := resolvesThrough(p); got != c.through {
			t.Errorf("%s: resolvesThrough = %v, want %v", c.name, got, c.through)
		}
		if got := namesIP(p, bridge); got != c.pin {
			t.Errorf("%s: namesIP = %v, want %v", c.name, got, c.pin)
		}
	}
}

func TestFirstOf(t *testing.T) {
	names := []string{"b", "a", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	if got, want := k8sops.FirstOf(names), "a, b, c, d, e, f, g, h, i, j and 2 more"; got != want {
		t.Errorf("firstOf = %q, want %q", got, want)
	}
}

// TestCheckBridgeRemovalNodes: without kube-system/kubelet-config (kOps, EKS, GKE) the kubelets'
// clusterDNS cannot be read, so a Ready node registered before the DNS move (the bridge's
// creation) refuses the removal, naming it; one NotReady or registered after does not. Only
// apiserver times (creation timestamps) are compared.
func TestCheckBridgeRemovalNodes(t *testing.T) {
	moved := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	bridge := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-bridge", CreationTimestamp: metav1.NewTime(moved)},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"100.64.0.10"}}}
	node := func(name string, created time.Time, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	c := &k8sops.Client{Kube: fake.NewClientset(node("old", moved.Add(-time.Hour), corev1.ConditionTrue),
		node("same-second", moved, corev1.ConditionTrue), node("gone", moved.Add(-time.Hour), corev1.ConditionFalse),
		node("new", moved.Add(time.Minute), corev1.ConditionTrue))}
	findings, _, err := CheckBridgeRemoval(context.Background(), c, []*corev1.Service{bridge}, []string{"172.24.0.10"})
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || findings[0].Summary != "Nodes From Before the DNS Move" ||
		!strings.Contains(findings[0].Detail, "2 Ready nodes registered before the DNS move") ||
		!strings.Contains(findings[0].Detail, "old, same-second") || strings.Contains(findings[0].Detail, "gone") {
		t.Errorf("findings %+v", findings)
	}
	c = &k8sops.Client{Kube: fake.NewClientset(node("gone", moved.Add(-time.Hour), corev1.ConditionFalse),
		node("new", moved.Add(time.Minute), corev1.ConditionTrue))}
	findings, notes, err := CheckBridgeRemoval(context.Background(), c, []*corev1.Service{bridge}, []string{"172.24.0.10"})
	if err != nil || len(findings) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "every Ready node registered after the DNS move") {
		t.Errorf("with only nodes registered since: findings %+v, notes %q, %v", findings, notes, err)
	}
}
