// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

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
