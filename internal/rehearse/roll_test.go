// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// TestPointKubeletConfig: the roll of a kubeadm cluster points kubelet-config's clusterDNS from
// the bridge's IP at the DNS Service's new IP of the same family, and keeps the rest of it.
func TestPointKubeletConfig(t *testing.T) {
	svc := func(name string, labels map[string]string, ips ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
			Spec: corev1.ServiceSpec{ClusterIP: ips[0], ClusterIPs: ips}}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: recreation.KubeletConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" +
			"clusterDNS:\n- 100.64.0.10\nclusterDomain: cluster.local\nmaxPods: 57\n"}}
	kube := fake.NewClientset(cm,
		svc("kube-dns", map[string]string{recreation.DNSServiceLabel: "kube-dns"}, "fd00:10::a", "172.24.0.10"),
		svc("kube-dns-bridge", map[string]string{recreation.DNSServiceLabel: "kube-dns", k8sops.DNSBridgeLabel: "true"}, "100.64.0.10"),
		svc("metrics", nil, "172.24.0.20"))
	ips, err := pointKubeletConfig(t.Context(), kube, cm.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ips, []string{"172.24.0.10"}) {
		t.Errorf("clusterDNS set to %v, want the DNS Service's IPv4 only", ips)
	}
	got, err := kube.CoreV1().ConfigMaps("kube-system").Get(t.Context(), recreation.KubeletConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dns, err := recreation.KubeletClusterDNS(got); err != nil || !slices.Equal(dns, []string{"172.24.0.10"}) {
		t.Errorf("kubelet-config's clusterDNS is %v (%v), want [172.24.0.10]:\n%s", dns, err, got.Data["kubelet"])
	}
	for _, kept := range []string{"clusterDomain: cluster.local", "maxPods: 57", "kind: KubeletConfiguration"} {
		if !slices.Contains(strings.Split(got.Data["kubelet"], "\n"), kept) {
			t.Errorf("kubelet-config lost %q:\n%s", kept, got.Data["kubelet"])
		}
	}
}

// TestWithServiceRange: the twin's kube-apiserver mirror pod says the new range in each form its
// command line may have; nothing else changes.
func TestWithServiceRange(t *testing.T) {
	ranges := []string{"172.24.0.0/15", "fd00:24::/108"}
	for _, tc := range []struct{ words, want []string }{
		{[]string{"kube-apiserver", "--service-cluster-ip-range=100.64.0.0/13", "--secure-port=6443"},
			[]string{"kube-apiserver", "--service-cluster-ip-range=172.24.0.0/15,fd00:24::/108", "--secure-port=6443"}},
		{[]string{"--service-cluster-ip-range", "100.64.0.0/13"}, []string{"--service-cluster-ip-range", "172.24.0.0/15,fd00:24::/108"}},
		{[]string{"/bin/sh", "-c", "kube-apiserver --service-cluster-ip-range=100.64.0.0/13 2>&1 | tee x"},
			[]string{"/bin/sh", "-c", "kube-apiserver --service-cluster-ip-range=172.24.0.0/15,fd00:24::/108 2>&1 | tee x"}},
		{nil, nil},
	} {
		if got := withServiceRange(tc.words, ranges); !slices.Equal(got, tc.want) {
			t.Errorf("withServiceRange(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}
