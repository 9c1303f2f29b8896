// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// What every stage reads of a Service the same way: its key and its ClusterIPs.
package k8sops

import (
	"encoding/json"
	"fmt"
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

// Labels of addon managers that reconcile a Service from a template of their own: kOps' (its
// cluster spec sets the IP) and the addon manager's (mode Reconcile).
const (
	KopsAddonLabel  = "addon.kops.k8s.io/name"
	AddonModeLabel  = "addonmanager.kubernetes.io/mode"
	AddonReconciled = "Reconcile"
)

// LastAppliedAnnotation is kubectl's client-side apply record of what it applied.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ClusterIPPinners names the tools that set the Service's clusterIP and apply it again (own,
// the provider's field manager, left out).
func ClusterIPPinners(svc *corev1.Service, own string) []string {
	var out []string
	for _, e := range svc.ManagedFields {
		if e.Manager == own || e.FieldsV1 == nil {
			continue
		}
		if !Reapplies(e) {
			continue // set once, by hand or by a controller that created it: nothing puts it back
		}
		var f struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		if _, ip := f.Spec["f:clusterIP"]; ip || f.Spec["f:clusterIPs"] != nil {
			out = append(out, fmt.Sprintf("%s (%s)", e.Manager, strings.ToLower(string(e.Operation))))
		}
	}
	if raw := svc.Annotations[LastAppliedAnnotation]; raw != "" {
		var last corev1.Service
		if json.Unmarshal([]byte(raw), &last) == nil &&
			(last.Spec.ClusterIP != "" && last.Spec.ClusterIP != corev1.ClusterIPNone || len(last.Spec.ClusterIPs) > 0) {
			out = append(out, "kubectl apply (its last-applied-configuration sets clusterIP "+last.Spec.ClusterIP+")")
		}
	}
	return slices.Compact(out)
}
