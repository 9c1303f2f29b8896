// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package preflight

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

// The Corefiles the distributions ship (kubeadm's since 1.32, kOps' CoreDNS addon, NodeLocal
// DNSCache's node-cache) and one with the plugins' defaults.
const (
	corefileKubeadm = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`
	corefileKOps = `.:53 {
    errors
    health {
      lameduck 5s
    }
    ready
    kubernetes cluster.local. in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
      ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
      max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`
	corefileNodeLocal = `cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 100.64.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health 169.254.20.10:8080
    }
in-addr.arpa:53 {
    errors
    cache 30
    forward . __PILLAR__UPSTREAM__SERVERS__
    }
`
	corefileDefaults = `# defaults
.:53 {
    kubernetes cluster.local # no block: ttl 5
    cache
}
`
)

func TestCorefileTTLs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		text          string
		ttl, cacheTTL int
	}{
		{"kubeadm: cluster.local not cached", corefileKubeadm, 30, 0},
		{"kOps", corefileKOps, 30, 30},
		{"NodeLocal DNSCache", corefileNodeLocal, 0, 30},
		{"defaults", corefileDefaults, 5, 3600},
		{"empty", "", 0, 0},
		{"unbalanced", "}\n.:53 { kubernetes { ttl 7 }\ncache 9 {\n success 10 12\n", 7, 12},
	} {
		ttl, cacheTTL := corefileTTLs(tc.text)
		if ttl != tc.ttl || cacheTTL != tc.cacheTTL {
			t.Errorf("%s: ttl %d cache %d, want %d and %d", tc.name, ttl, cacheTTL, tc.ttl, tc.cacheTTL)
		}
	}
}

func TestFactsOf(t *testing.T) {
	withLabel := func(p corev1.Pod, k, v string) corev1.Pod { p.Labels = map[string]string{k: v}; return p }
	kOps := PreflightSnapshot{
		ServerMinor: 32,
		Pods: []corev1.Pod{
			staticPod("kube-apiserver", "kube-apiserver-a", "--service-cluster-ip-range=100.64.0.0/13"),
			staticPod("kube-apiserver", "kube-apiserver-b", "--service-cluster-ip-range=100.64.0.0/13"),
			staticPod("kube-controller-manager", "kcm-a", "--cluster-cidr=100.96.0.0/11", "--feature-gates=MultiCIDRServiceAllocator=true"),
			staticPod("kube-controller-manager", "kcm-b", "--cluster-cidr=100.96.0.0/11"),
			// kOps: kube-proxy a static pod, its flags in one shell line.
			withLabel(staticPod("kube-proxy", "kube-proxy-a", "/bin/sh", "-c", "exec /usr/local/bin/kube-proxy --cluster-cidr=100.96.0.0/11 --proxy-mode=nftables --v=2"), "k8s-app", "kube-proxy"),
		},
		DaemonSets: []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "calico-node"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-local-dns"}}},
		ConfigMaps: map[string]*corev1.ConfigMap{
			"calico-config":  {Data: map[string]string{"cni_network_config": `{"plugins":[{"type":"calico","ipam":{"type":"calico-ipam"}}]}`}},
			CoreDNSConfigMap: {Data: map[string]string{"Corefile": corefileKOps}},
			"node-local-dns": {Data: map[string]string{"Corefile": corefileNodeLocal}},
		},
		Pools:  []calico.IPPool{{Name: "default-ipv4-ippool", Settings: calico.PoolSettings{CIDR: "100.96.0.0/11"}}},
		Unread: []PreflightFinding{{Object: ObjectRef{Kind: "installations.operator.tigera.io"}}},
	}
	got := FactsOf(kOps)
	got.Pools = nil
	want := Facts{APIServerServiceRanges: []string{"100.64.0.0/13"}, ClusterCIDRs: []string{"100.96.0.0/11"},
		CNI: &k8sops.CNI{Name: "Calico", Namespace: "kube-system", DaemonSet: "calico-node", CalicoIPAM: true}, IPAM: "calico-ipam",
		KubeProxyMode: "nftables", KubeProxyClusterCIDR: "100.96.0.0/11", Corefile: true, CoreDNSTTL: 30, CoreDNSCacheTTL: 30,
		NodeLocalDNS: true, NodeLocalCacheTTL: 30, ServiceCIDRGate: ptr.To(false), Unread: []string{"installations.operator.tigera.io"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kOps-like cluster (-want +got):\n%s", d)
	}

	// kubeadm: kube-proxy a DaemonSet reading its ConfigMap, the operator's Installation on
	// host-local IPAM; 1.33 has the ServiceCIDR controller whatever the flags.
	kubeadm := PreflightSnapshot{
		ServerMinor: 33,
		Pods:        []corev1.Pod{staticPod("kube-controller-manager", "kcm-a", "--cluster-cidr=10.244.0.0/16")},
		ConfigMaps: map[string]*corev1.ConfigMap{
			"kube-proxy":     {Data: map[string]string{"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: 10.244.0.0/16\nmode: \"\"\n"}},
			CoreDNSConfigMap: {Data: map[string]string{"Corefile": corefileKubeadm}},
		},
		Installations: []unstructured.Unstructured{installation("Calico", "HostLocal")},
	}
	got = FactsOf(kubeadm)
	want = Facts{ClusterCIDRs: []string{"10.244.0.0/16"}, IPAM: "host-local", KubeProxyClusterCIDR: "10.244.0.0/16",
		Corefile: true, CoreDNSTTL: 30, ServiceCIDRGate: ptr.To(true), PodRangeSteps: got.PodRangeSteps}
	if !strings.HasPrefix(got.PodRangeSteps, "Calico's CNI runs with IPAM host-local") {
		t.Errorf("kubeadm-like cluster on host-local IPAM: pod range steps %q", got.PodRangeSteps)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kubeadm-like cluster (-want +got):\n%s", d)
	}

	// Where Calico's IPAM hands out no address, how the pod range moves instead.
	ds := func(ns, name string) appsv1.DaemonSet {
		return appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	for _, c := range []struct {
		name string
		s    PreflightSnapshot
		want string // a prefix; "" for none
	}{
		{"Calico's pools, no CNI DaemonSet visible", PreflightSnapshot{CalicoServed: true}, ""},
		{"calico-node", PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{ds("calico-system", "calico-node")}}, ""},
		{"kubenet: no CNI, no Calico", PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{ds("kube-system", "kube-proxy")}},
			"No network plugin this provider knows runs here"},
		{"Flannel", PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{ds("kube-flannel", "kube-flannel-ds")}},
			"The cluster runs Flannel (DaemonSet kube-flannel/kube-flannel-ds), not Calico"},
		{"the AWS VPC CNI with Calico's CRDs left over", PreflightSnapshot{CalicoServed: true, DaemonSets: []appsv1.DaemonSet{ds("kube-system", "aws-node")}},
			"The cluster runs the AWS VPC CNI"},
	} {
		got := FactsOf(c.s).PodRangeSteps
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: pod range steps %q, want %q…", c.name, got, c.want)
		}
	}

	// Nothing visible: no gate known before 1.33, nothing guessed.
	if got := FactsOf(PreflightSnapshot{ServerMinor: 31}); got.ServiceCIDRGate != nil || got.Corefile || got.CNI != nil {
		t.Errorf("an empty snapshot gave facts: %+v", got)
	}
}
