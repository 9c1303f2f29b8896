// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// IsControlPlanePod reports whether p is kube-system's pod of component (kube-apiserver,
// kube-controller-manager, kube-proxy): kubeadm labels its static pods component=, kOps
// k8s-app=; both show through their mirror pods.
func IsControlPlanePod(p *corev1.Pod, component string) bool {
	return p.Namespace == "kube-system" && (p.Labels["component"] == component || p.Labels["k8s-app"] == component)
}

// FlagValues returns the values of a --name flag (--name=v or --name v) in a pod's containers'
// command lines. kOps runs its components under a shell, one word holding the whole line: such
// words are split at white space.
func FlagValues(p *corev1.Pod, name string) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		var words []string
		for _, w := range slices.Concat(c.Command, c.Args) {
			if strings.Contains(w, "--") && strings.ContainsAny(w, " \t\n") {
				words = append(words, strings.Fields(w)...)
				continue
			}
			words = append(words, w)
		}
		for i, a := range words {
			switch {
			case strings.HasPrefix(a, "--"+name+"="):
				out = append(out, strings.TrimPrefix(a, "--"+name+"="))
			case a == "--"+name && i+1 < len(words):
				out = append(out, words[i+1])
			}
		}
	}
	return out
}

// DefaultProxySync is how long after a Service change kube-proxy has it programmed on every
// node, by default: its --min-sync-period (1 s in both the nftables and iptables modes) with a
// second for the sync itself. The recreation's hand-over and the apiserver move wait it.
const DefaultProxySync = 2 * time.Second
