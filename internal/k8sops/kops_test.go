package k8sops

import (
	"strings"
	"testing"
)

func TestNewKopsNetworking(t *testing.T) {
	k, err := NewKopsNetworking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", true)
	if err != nil {
		t.Fatal(err)
	}
	if k.KubeDNSServerIP != "172.24.0.10" || k.AllocateNodeCIDRs || k.ServiceClusterIPRange != "172.24.0.0/15" ||
		k.PodCIDR != "172.16.0.0/13" || k.NonMasqueradeCIDR != "172.16.0.0/12" {
		t.Errorf("got %+v", k)
	}
	for _, line := range []string{"  serviceClusterIPRange: 172.24.0.0/15\n", "  nonMasqueradeCIDR: 172.16.0.0/12\n", "  podCIDR: 172.16.0.0/13\n",
		"  kubeDNS:\n    serverIP: 172.24.0.10\n", "  kubelet:\n    clusterDNS: 172.24.0.10\n", "  kubeControllerManager:\n    allocateNodeCIDRs: false\n"} {
		if !strings.Contains(k.YAML, line) {
			t.Errorf("YAML lacks %q:\n%s", line, k.YAML)
		}
	}
	if k, err := NewKopsNetworking("fd00:24::/112", "fd00:16::/64", "fd00::/16", false); err != nil || k.KubeDNSServerIP != "fd00:24::a" || !k.AllocateNodeCIDRs {
		t.Errorf("IPv6: %+v, %v", k, err)
	}
	// kOps' own defaults are consistent too: the starting point of write-up 000.
	if k, err := NewKopsNetworking("100.64.0.0/13", "100.96.0.0/11", "100.64.0.0/10", true); err != nil || k.KubeDNSServerIP != "100.64.0.10" {
		t.Errorf("kOps defaults: %+v, %v", k, err)
	}
	for _, c := range []struct {
		svc, pod, nm, err string
		arg               int
	}{
		{"172.24.0.0/15", "172.16.0.0/13", "10.0.0.0/8", "does not contain the Service range", 2},
		{"10.96.0.0/16", "172.16.0.0/13", "172.16.0.0/12", "does not contain the Service range", 2},
		{"172.24.0.0/15", "10.0.0.0/13", "172.16.0.0/12", "does not contain the pod range", 2},
		{"172.24.0.0/15", "172.24.0.0/13", "172.16.0.0/12", "overlaps the Service range", 1},
		{"172.24.0.0/15", "172.16.0.0/25", "172.16.0.0/12", "too small for a pod range", 1},
		{"172.32.0.0/11", "172.0.0.0/13", "172.0.0.0/8", "too large", 0},
		{"172.24.0.0/29", "172.16.0.0/13", "172.16.0.0/12", "too small", 0},
		{"fd00:24::/126", "fd00:16::/64", "fd00::/16", "too small", 0},
		{"172.24.0.0/15", "fd00:16::/64", "172.16.0.0/12", "another IP family", 1},
		{"172.24.0.1/15", "172.16.0.0/13", "172.16.0.0/12", "host bits set", 0},
		{"172.24.0.0/15", "pods", "172.16.0.0/12", "not a CIDR", 1},
		{"172.24.0.0/15", "172.16.0.0/13", "", "not a CIDR", 2},
	} {
		_, err := NewKopsNetworking(c.svc, c.pod, c.nm, true)
		if err == nil || !strings.Contains(err.Error(), c.err) || argOf(err) != c.arg {
			t.Errorf("NewKopsNetworking(%s, %s, %s) = %v (argument %d); want %q on argument %d", c.svc, c.pod, c.nm, err, argOf(err), c.err, c.arg)
		}
	}
}
