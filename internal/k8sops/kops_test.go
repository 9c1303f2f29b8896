// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// writeup000 is write-up 000's move on an AWS kOps cluster with a VPC outside the new ranges.
func writeup000() KopsInput {
	return KopsInput{ServiceCIDR: "172.24.0.0/15", PodCIDR: "172.16.0.0/13", NonMasqueradeCIDR: "172.16.0.0/12",
		NetworkCIDR: "10.20.0.0/16", ClusterDNSIP: "172.24.0.10", OldServiceCIDR: "100.64.0.0/13", CalicoIPAM: true}
}

func TestNewKopsNetworking(t *testing.T) {
	k, err := NewKopsNetworking(writeup000())
	if err != nil {
		t.Fatal(err)
	}
	if k.KubeDNSServerIP != "172.24.0.10" || k.KubeletClusterDNS != "172.24.0.10" || k.AllocateNodeCIDRs ||
		k.ServiceClusterIPRange != "172.24.0.0/15" || k.PodCIDR != "172.16.0.0/13" || k.NonMasqueradeCIDR != "172.16.0.0/12" ||
		!slices.Equal(k.AdditionalSANs, []string{"100.64.0.1"}) {
		t.Errorf("got %+v", k)
	}
	names := func(k KopsNetworking) (n []string) {
		for _, s := range k.Steps {
			n = append(n, s.Name)
		}
		return n
	}
	if got := names(k); !slices.Equal(got, []string{KopsStepServiceRange, KopsStepPodRange}) {
		t.Errorf("steps %v without a version", got)
	}
	svcStep, podStep := k.Steps[0].YAML, k.Steps[1].YAML
	want := "spec:\n  serviceClusterIPRange: 172.24.0.0/15\n  additionalSans: # keep any you have\n  - 100.64.0.1\n" +
		"  kubeDNS:\n    serverIP: 172.24.0.10\n  kubelet:\n    clusterDNS: 172.24.0.10\n  masterKubelet:\n    clusterDNS: 172.24.0.10\n"
	if svcStep != want {
		t.Errorf("service_range step:\n%s\nwant:\n%s", svcStep, want)
	}
	want = "spec:\n  nonMasqueradeCIDR: 172.16.0.0/12\n  podCIDR: 172.16.0.0/13\n  kubeControllerManager:\n" +
		"    clusterCIDR: 172.16.0.0/13\n    allocateNodeCIDRs: false\n"
	if podStep != want {
		t.Errorf("pod_range step:\n%s\nwant:\n%s", podStep, want)
	}
	if !strings.Contains(k.Steps[1].When, "drop 100.64.0.1 from additionalSans") || !strings.Contains(k.YAML, "# service_range: after stage 1") ||
		!strings.Contains(k.YAML, "---\n# pod_range: after the old pool is deleted") {
		t.Errorf("when/yaml:\n%s\n%s", k.Steps[1].When, k.YAML)
	}

	// NodeLocal DNSCache: kubelet keeps the local IP (L:314-315 accepts it), serverIP moves.
	in := writeup000()
	in.NodeLocalDNSIP = "169.254.20.10"
	in.ClusterDNSIP = "172.24.0.53" // the DNS Service got another IP than .10: taken as given
	if k, err := NewKopsNetworking(in); err != nil || k.KubeDNSServerIP != "172.24.0.53" || k.KubeletClusterDNS != "169.254.20.10" ||
		!strings.Contains(k.Steps[0].YAML, "kubelet:\n    clusterDNS: 169.254.20.10\n  masterKubelet:\n    clusterDNS: 169.254.20.10\n") {
		t.Errorf("NodeLocal DNS: %+v, %v", k, err)
	}
	// The gates on 1.29–1.32 only, with the API version each serves.
	for v, api := range map[string]string{"1.29": "v1alpha1", "v1.30.14": "v1alpha1", "1.31": "v1beta1", "v1.32.13": "v1beta1", "1.33": "", "v1.37.2": ""} {
		in := writeup000()
		in.KubernetesVersion = v
		k, err := NewKopsNetworking(in)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if api == "" {
			if len(k.Steps) != 2 {
				t.Errorf("%s: steps %v, want no gates step", v, names(k))
			}
			continue
		}
		if k.Steps[0].Name != KopsStepGates || !strings.Contains(k.Steps[0].YAML, "runtimeConfig:\n      networking.k8s.io/"+api+`: "true"`) ||
			strings.Count(k.Steps[0].YAML, `MultiCIDRServiceAllocator: "true"`) != 2 || !strings.Contains(k.Steps[0].YAML, "kubeControllerManager:") {
			t.Errorf("%s: gates step %+v", v, k.Steps[0])
		}
	}
	// No cloud network (GCE, Hetzner…): nothing to overlap. Old IP inside the new range: no SAN.
	in = writeup000()
	in.NetworkCIDR, in.OldServiceCIDR = "", "172.24.0.0/16"
	if k, err := NewKopsNetworking(in); err != nil || len(k.AdditionalSANs) != 0 || strings.Contains(k.YAML, "additionalSans") {
		t.Errorf("no network CIDR, old range inside: %+v, %v", k, err)
	}
	// kOps' own defaults are consistent (write-up 000's starting point): AWS networkCIDR
	// 172.20.0.0/16, nonMasqueradeCIDR 100.64.0.0/10 (upup/pkg/fi/cloudup/defaults.go:36-38).
	if _, err := NewKopsNetworking(KopsInput{ServiceCIDR: "100.64.0.0/13", PodCIDR: "100.96.0.0/11", NonMasqueradeCIDR: "100.64.0.0/10",
		NetworkCIDR: "172.20.0.0/16", ClusterDNSIP: "100.64.0.10", OldServiceCIDR: "100.64.0.0/13"}); err != nil {
		t.Errorf("kOps defaults: %v", err)
	}
	// The Service range outside nonMasqueradeCIDR: kOps dropped that rule in 1.28 (V:1236-1240).
	in = writeup000()
	in.ServiceCIDR, in.ClusterDNSIP = "10.96.0.0/16", "10.96.0.10"
	if _, err := NewKopsNetworking(in); err != nil {
		t.Errorf("Service range outside nonMasqueradeCIDR refused: %v", err)
	}
	if k, err := NewKopsNetworking(KopsInput{ServiceCIDR: "fd00:24::/112", PodCIDR: "fd00:16::/64", NonMasqueradeCIDR: "::/0",
		ClusterDNSIP: "fd00:24::a", OldServiceCIDR: "fd00:10::/112"}); err != nil || k.KubeDNSServerIP != "fd00:24::a" ||
		!k.AllocateNodeCIDRs || !slices.Equal(k.AdditionalSANs, []string{"fd00:10::1"}) {
		t.Errorf("IPv6: %+v, %v", k, err)
	}
}

// TestKopsValidationRules restates kOps' rules (kubernetes/kops@268927e) one case each: what
// kOps refuses, the function refuses, naming the argument to change.
func TestKopsValidationRules(t *testing.T) {
	for _, c := range []struct {
		rule string
		edit func(*KopsInput)
		err  string
		arg  int
	}{
		{"V:1193-1199 nonMasqueradeCIDR must not overlap networkCIDR (AWS default 172.20.0.0/16 inside 172.16.0.0/12)",
			func(in *KopsInput) { in.NetworkCIDR = "172.20.0.0/16" }, "cannot overlap with networkCIDR", 3},
		{"V:723-724 no subnet may overlap serviceClusterIPRange",
			func(in *KopsInput) {
				in.ServiceCIDR, in.ClusterDNSIP, in.NetworkCIDR = "10.96.0.0/16", "10.96.0.10", "10.0.0.0/8"
			},
			"overlaps the Service range", 3},
		{"V:1218-1219 podCIDR must be a subnet of nonMasqueradeCIDR",
			func(in *KopsInput) { in.PodCIDR = "10.0.0.0/13" }, "does not contain the pod range", 2},
		{"L:105-112 serviceClusterIPRange must contain the DNS Server IP",
			func(in *KopsInput) { in.ClusterDNSIP = "100.64.0.10" }, "must contain the DNS Server IP", 4},
		{"V:1189-1190 IPv6 clusters need nonMasqueradeCIDR ::/0",
			func(in *KopsInput) {
				in.ServiceCIDR, in.PodCIDR, in.NonMasqueradeCIDR, in.NetworkCIDR = "fd00:24::/112", "fd00:16::/64", "fd00::/8", ""
				in.ClusterDNSIP, in.OldServiceCIDR = "fd00:24::a", "fd00:10::/112"
			}, "::/0", 2},
		{"V:2065-2087 nodeLocalDNS.localIP must parse",
			func(in *KopsInput) { in.NodeLocalDNSIP = "local" }, "invalid kubeDNS.nodeLocalDNS.localIP", 6},
		{"V:500-524 a CIDR with host bits set", func(in *KopsInput) { in.ServiceCIDR = "172.24.0.1/15" }, "host bits set", 0},
		{"V:500-524 networkCIDR must parse", func(in *KopsInput) { in.NetworkCIDR = "vpc" }, "not a CIDR", 3},
		{"kube-apiserver: the Service range at most a /12", func(in *KopsInput) { in.ServiceCIDR = "172.32.0.0/11" }, "too large", 0},
		{"kube-apiserver: the range holds .1 and the DNS IP", func(in *KopsInput) { in.ServiceCIDR = "172.24.0.0/29" }, "too small", 0},
		{"the pod range apart from the Service range", func(in *KopsInput) { in.PodCIDR = "172.24.0.0/13" }, "overlaps the Service range", 1},
		{"a pod range of at least a /24", func(in *KopsInput) { in.PodCIDR = "172.16.0.0/25" }, "too small for a pod range", 1},
		{"one IP family", func(in *KopsInput) { in.PodCIDR = "fd00:16::/64" }, "another IP family", 1},
		{"the DNS IP is not the apiserver's .1", func(in *KopsInput) { in.ClusterDNSIP = "172.24.0.1" }, "cannot be a Service IP", 4},
		{"the DNS IP must parse", func(in *KopsInput) { in.ClusterDNSIP = "" }, "not an IP address", 4},
		{"the old range must parse", func(in *KopsInput) { in.OldServiceCIDR = "old" }, "not a CIDR", 5},
		{"the ServiceCIDR API starts with 1.29", func(in *KopsInput) { in.KubernetesVersion = "1.28" }, "starts with Kubernetes 1.29", 6},
		{"a version that is one", func(in *KopsInput) { in.KubernetesVersion = "latest" }, "e.g. 1.31", 6},
	} {
		in := writeup000()
		c.edit(&in)
		_, err := NewKopsNetworking(in)
		if err == nil || !strings.Contains(err.Error(), c.err) || argOf(err) != c.arg {
			t.Errorf("%s: got %v (argument %d); want %q on argument %d", c.rule, err, argOf(err), c.err, c.arg)
		}
	}
}

func TestParseKopsOptions(t *testing.T) {
	in := writeup000()
	if err := in.ParseKopsOptions(map[string]string{"calico_ipam": "false", "node_local_dns_ip": "169.254.20.10", "kubernetes_version": "1.32"}); err != nil ||
		in.CalicoIPAM || in.NodeLocalDNSIP != "169.254.20.10" || in.KubernetesVersion != "1.32" {
		t.Errorf("%+v, %v", in, err)
	}
	for want, opts := range map[string]map[string]string{
		"unknown option \"nodelocal\"": {"nodelocal": "x"}, "want true or false": {"calico_ipam": "yes please"},
	} {
		if err := in.ParseKopsOptions(opts); err == nil || !strings.Contains(err.Error(), want) || argOf(err) != 6 {
			t.Errorf("%v: %v, want %q on argument 6", opts, err, want)
		}
	}
}

// The fragments are what they claim: each step's YAML names the values of the result.
func TestKopsStepsCarryTheValues(t *testing.T) {
	k, err := NewKopsNetworking(writeup000())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range k.Steps {
		if !strings.HasPrefix(s.YAML, "spec:\n") || s.When == "" || !strings.Contains(s.Roll, "kops rolling-update cluster") {
			t.Errorf("step %+v", s)
		}
	}
	if dns := netip.MustParseAddr(k.KubeDNSServerIP); !netip.MustParsePrefix(k.ServiceClusterIPRange).Contains(dns) {
		t.Errorf("DNS %s outside %s", dns, k.ServiceClusterIPRange)
	}
}
