// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The preflight checks that concern Services and DNS, and the run of every check over a
// PreflightSnapshot. Pure: unit tests build the hazards as objects.
package preflight

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// CheckPreflight runs every check.
func CheckPreflight(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	out := slices.Clone(s.Unread)
	r = r.indexed()
	for _, check := range []func(PreflightSnapshot, PreflightRanges) []PreflightFinding{
		checkClusterIPPinned, checkDNSPinned, checkPodsPinned, checkPoolPlacement, checkKubeProxy,
		checkPolicies, checkAdmission, checkDisruption, checkRangeOverlap, checkCNIIPAM, checkServiceCIDRGate,
		checkKubeadmConfig, checkRollAvailability, checkServiceCIDRLeftover,
	} {
		out = append(out, check(s, r)...)
	}
	SortFindings(out)
	return out
}

// containsAddr reports whether ip lies in one of the prefixes.
func containsAddr(ranges []netip.Prefix, ip netip.Addr) bool {
	return slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// overlapsAny reports whether p overlaps one of the prefixes.
func overlapsAny(p netip.Prefix, ranges []netip.Prefix) bool {
	return slices.ContainsFunc(ranges, func(q netip.Prefix) bool { return q.Overlaps(p) })
}

// oldIPs are the Service's ClusterIPs inside the old Service ranges.
func oldIPs(svc *corev1.Service, r PreflightRanges) []string {
	var out []string
	for _, ip := range k8sops.ClusterIPs(svc) {
		if r.inOldService(ip) {
			out = append(out, ip.String())
		}
	}
	return out
}

const lastAppliedAnnotation = k8sops.LastAppliedAnnotation

// Labels of addon managers that reconcile a Service from a template of their own.
const (
	kopsAddonLabel  = k8sops.KopsAddonLabel
	addonModeLabel  = k8sops.AddonModeLabel
	addonReconciled = k8sops.AddonReconciled
)

// checkClusterIPPinned: a Service to move whose clusterIP a re-applying tool owns. After the
// move that tool applies the old IP again: the update fails (clusterIP is immutable), or a tool
// that replaces on conflict puts the Service back in the old range.
func checkClusterIPPinned(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	var out []PreflightFinding
	for i := range s.Services {
		svc := &s.Services[i]
		old := oldIPs(svc, r)
		if len(old) == 0 || k8sops.SvcKey(svc) == "default/kubernetes" || svc.Labels[kopsAddonLabel] != "" ||
			svc.Labels[addonModeLabel] == addonReconciled { // those are dns_pinned's, with their own fix
			continue
		}
		pinners := k8sops.ClusterIPPinners(svc, s.FieldManager)
		if len(pinners) == 0 {
			continue
		}
		out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckClusterIPPinned,
			Object: ObjectRef{"Service", svc.Namespace, svc.Name},
			Detail: fmt.Sprintf("spec.clusterIP %s is set by %s, which applies it again: after the move its next sync "+
				"fails (clusterIP is immutable) or, where it replaces on conflict, puts the Service back at its old IP.",
				strings.Join(old, ", "), strings.Join(pinners, ", ")),
			Fix: "Remove clusterIP/clusterIPs from what that tool applies (Helm values, the Git manifest, the Terraform " +
				"kubernetes_service's cluster_ip) before the move, then list it in the moves data source's include_pinned " +
				"(a tool's update keeps its ownership of the field); or leave the Service out and move it with its tool."})
	}
	return out
}

// checkDNSPinned: DNS settings outside the Services that keep the old DNS IP.
func checkDNSPinned(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	var out []PreflightFinding
	for i := range s.Services {
		svc := &s.Services[i]
		old := oldIPs(svc, r)
		if len(old) == 0 {
			continue
		}
		ref := ObjectRef{"Service", svc.Namespace, svc.Name}
		if addon := svc.Labels[kopsAddonLabel]; addon != "" {
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckDNSPinned, Object: ref,
				Detail: fmt.Sprintf("kOps manages it as addon %s from the cluster spec (kubeDNS.serverIP, %s): the next "+
					"kops update cluster applies the old IP again unless the spec moved with it.", addon, strings.Join(old, ", ")),
				Fix: "Set the cluster spec's serviceClusterIPRange, kubeDNS.serverIP and kubelet.clusterDNS to the new values " +
					"(provider::k8scidr::kops_networking gives the fragment) before the next kops update cluster."})
		}
		if svc.Labels[addonModeLabel] == addonReconciled {
			out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckDNSPinned, Object: ref,
				Detail: fmt.Sprintf("The addon manager reconciles it from a manifest on the control-plane nodes (%s=%s): "+
					"between the delete and the create it can recreate it at %s, and afterwards it applies the old IP again.",
					addonModeLabel, addonReconciled, strings.Join(old, ", ")),
				Fix: "Change the manifest's clusterIP to the new IP (or its mode to EnsureExists) on every control-plane node first."})
		}
	}
	if cm := s.ConfigMaps[recreation.KubeletConfigMap]; cm != nil {
		if dns, err := recreation.KubeletClusterDNS(cm); err == nil {
			if old := addrsIn(dns, r.inOldService); len(old) > 0 {
				out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckDNSPinned,
					Object: ObjectRef{"ConfigMap", "kube-system", recreation.KubeletConfigMap},
					Detail: fmt.Sprintf("The kubelets hand every new pod the DNS server %s, in the old Service range: pods keep "+
						"resolving through the old IP until the kubelets' clusterDNS changes.", strings.Join(old, ", ")),
					Fix: "Keep the recreation's DNS bridge until clusterDNS is the new DNS IP in this ConfigMap and in every node's " +
						"kubelet configuration (kubeadm upgrade node phase kubelet-config, then restart the kubelets); then roll the pods."})
			}
		}
	}
	out = append(out, nodeLocalDNS(s, r)...)
	return out
}

// ipLike finds IPv4 and IPv6 literals in configuration text.
var ipLike = regexp.MustCompile(`[0-9a-fA-F:.]*[0-9a-fA-F][.:][0-9a-fA-F:.]+`)

// nodeLocalDNS: NodeLocal DNSCache binds and forwards to addresses fixed when its pods start.
// isNodeLocalDNS says whether d is NodeLocal DNSCache's DaemonSet.
func isNodeLocalDNS(d appsv1.DaemonSet) bool {
	return d.Namespace == "kube-system" && (d.Name == "node-local-dns" || d.Spec.Template.Labels["k8s-app"] == "node-local-dns")
}

func nodeLocalDNS(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	idx := slices.IndexFunc(s.DaemonSets, isNodeLocalDNS)
	if idx < 0 {
		return nil
	}
	ds := &s.DaemonSets[idx]
	var text []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		text = append(text, c.Args...)
		text = append(text, c.Command...)
	}
	if cm := s.ConfigMaps["node-local-dns"]; cm != nil {
		text = append(text, cm.Data["Corefile"])
	}
	var old []string
	for _, m := range ipLike.FindAllString(strings.Join(text, "\n"), -1) {
		old = append(old, addrsIn(strings.Split(m, ","), r.inOldService)...)
	}
	slices.Sort(old)
	old = slices.Compact(old)
	detail := "NodeLocal DNSCache runs on every node: it forwards to the cluster DNS through the kube-dns-upstream " +
		"Service's IP, taken when its pods start, so after that Service moves it forwards to the old IP until restarted."
	if len(old) > 0 {
		detail += fmt.Sprintf(" Its configuration names %s, in the old Service range.", strings.Join(old, ", "))
	}
	return []PreflightFinding{{Severity: SeverityWarning, Check: CheckDNSPinned, Object: ObjectRef{"DaemonSet", ds.Namespace, ds.Name},
		Detail: detail,
		Fix: "Keep the DNS bridge until it restarted: put kube-system/daemonset/" + ds.Name + " in the workload roll's include, " +
			"and change any old IP in its Corefile and -localip argument to the new one."}}
}

// addrsIn returns the strings that are IP addresses in a range (in).
func addrsIn(values []string, in func(netip.Addr) bool) []string {
	var out []string
	for _, v := range values {
		if ip, err := netip.ParseAddr(strings.TrimSpace(v)); err == nil && in(ip) {
			out = append(out, ip.String())
		}
	}
	return out
}
