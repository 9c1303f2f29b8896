// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// What every stage reads of a Service the same way: its key and its ClusterIPs.
package k8sops

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func SvcKey(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// ClusterIPs parses a Service's ClusterIPs; none for headless and ExternalName Services.
func ClusterIPs(svc *corev1.Service) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range raw {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// reapplyingManagers are tools that apply a Service's spec again and again, by their field
// manager's name (prefix, lower case).
var reapplyingManagers = []string{"helm", "argocd", "kustomize-controller", "helm-controller", "flux", "terraform",
	"hashicorp", "kubectl-client-side-apply", "pulumi", "kapp", "fleet", "rancher", "spinnaker"}

// Reapplies says whether the managedFields entry e is of a tool that applies what it owns again
// and again: any server-side apply, and the known tools' updates. What such a manager owns is
// what its source sets, so its ownership of spec.clusterIP says the IP is pinned there.
func Reapplies(e metav1.ManagedFieldsEntry) bool {
	return e.Operation == metav1.ManagedFieldsOperationApply || slices.ContainsFunc(reapplyingManagers, func(p string) bool {
		return strings.HasPrefix(strings.ToLower(e.Manager), p)
	})
}
