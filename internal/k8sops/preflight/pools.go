// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The preflight checks that concern the pod move: pods pinned to the old Calico pool, where the
// new pool sits against kube-controller-manager's and kube-proxy's cluster CIDR, and how its
// encapsulation and NAT compare with the pools pods leave.
package preflight

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

// Calico's per-pod and per-namespace IPAM annotations.
const (
	annIPv4Pools = "cni.projectcalico.org/ipv4pools"
	annIPv6Pools = "cni.projectcalico.org/ipv6pools"
	annIPAddrs   = "cni.projectcalico.org/ipAddrs"
)

// poolsIn are the pools whose CIDR overlaps one of the ranges.
func poolsIn(pools []calico.IPPool, ranges []netip.Prefix) []calico.IPPool {
	var out []calico.IPPool
	for _, p := range pools {
		if pfx := p.Prefix(); pfx.IsValid() && overlapsAny(pfx, ranges) {
			out = append(out, p)
		}
	}
	return out
}

// pinnedToOld says which of Calico's annotations tie an object's pods to the old pools: a pool
// named by name or by a CIDR in the old pod ranges, or a fixed address inside them.
func pinnedToOld(ann map[string]string, oldPools []calico.IPPool, r PreflightRanges) []string {
	var out []string
	for _, key := range []string{annIPv4Pools, annIPv6Pools, annIPAddrs} {
		var values []string
		if ann[key] == "" || json.Unmarshal([]byte(ann[key]), &values) != nil {
			continue
		}
		for _, v := range values {
			if namesOldPool(v, oldPools, r, key == annIPAddrs) {
				out = append(out, fmt.Sprintf("%s names %s", key, v))
			}
		}
	}
	return out
}

// namesOldPool: v is an old pool's name, a CIDR overlapping the old pod ranges or (addresses) an
// address in them.
func namesOldPool(v string, oldPools []calico.IPPool, r PreflightRanges, address bool) bool {
	v = strings.TrimSpace(v)
	if address {
		ip, err := netip.ParseAddr(v)
		return err == nil && containsAddr(r.OldPod, ip)
	}
	if p, err := netip.ParsePrefix(v); err == nil {
		return overlapsAny(p.Masked(), r.OldPod)
	}
	return slices.ContainsFunc(oldPools, func(p calico.IPPool) bool { return p.Name == v })
}

// poolListInCNI finds ipv4_pools / ipv6_pools in the CNI configuration template (not JSON: it
// holds placeholders such as __CNI_MTU__).
var poolListInCNI = regexp.MustCompile(`"ipv[46]_pools"\s*:\s*\[([^\]]*)\]`)

// checkPodsPinned: once the old pool is disabled Calico refuses an address to any pod whose
// annotations ask for it, so the roll stalls on those pods.
func checkPodsPinned(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	if len(r.OldPod) == 0 {
		return nil
	}
	old := poolsIn(s.Pools, r.OldPod)
	var out []PreflightFinding
	add := func(ref ObjectRef, what string, reasons []string) {
		if len(reasons) == 0 {
			return
		}
		out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckPodsPinnedToOldPool, Object: ref,
			Detail: fmt.Sprintf("%s: %s. Once the old pool is disabled Calico gives these pods no address, so the roll "+
				"stalls on them.", what, strings.Join(reasons, "; ")),
			Fix: "Change the annotation to name the new pool (or remove it) before the old pool is disabled."})
	}
	for _, ns := range s.Namespaces {
		add(ObjectRef{"Namespace", "", ns.Name}, "Its annotation applies to every pod in it", pinnedToOld(ns.Annotations, old, r))
	}
	for _, d := range s.Deployments {
		add(ObjectRef{"Deployment", d.Namespace, d.Name}, "Its pod template", pinnedToOld(d.Spec.Template.Annotations, old, r))
	}
	for _, d := range s.StatefulSets {
		add(ObjectRef{"StatefulSet", d.Namespace, d.Name}, "Its pod template", pinnedToOld(d.Spec.Template.Annotations, old, r))
	}
	for _, d := range s.DaemonSets {
		add(ObjectRef{"DaemonSet", d.Namespace, d.Name}, "Its pod template", pinnedToOld(d.Spec.Template.Annotations, old, r))
	}
	for _, p := range s.Pods {
		if c := metav1.GetControllerOf(&p); c != nil && (c.Kind == "ReplicaSet" || c.Kind == "StatefulSet" || c.Kind == "DaemonSet") {
			continue // reported on its template
		}
		add(ObjectRef{"Pod", p.Namespace, p.Name}, "Its annotations", pinnedToOld(p.Annotations, old, r))
	}
	if cm := s.ConfigMaps["calico-config"]; cm != nil {
		var reasons []string
		for _, m := range poolListInCNI.FindAllStringSubmatch(cm.Data["cni_network_config"], -1) {
			for _, v := range strings.Split(m[1], ",") {
				if v = strings.Trim(strings.TrimSpace(v), `"`); v != "" && namesOldPool(v, old, r, false) {
					reasons = append(reasons, "the CNI configuration's ipam pools list names "+v)
				}
			}
		}
		add(ObjectRef{"ConfigMap", "kube-system", "calico-config"}, "Every pod without a pool annotation", reasons)
	}
	return out
}

// prefixList parses a comma-separated list of CIDRs, skipping what does not parse.
func prefixList(s string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range strings.Split(s, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(v)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// containedIn reports whether every prefix lies inside one of outer.
func containedIn(inner, outer []netip.Prefix) bool {
	for _, p := range inner {
		if !slices.ContainsFunc(outer, func(o netip.Prefix) bool { return k8sops.Within(o, p) }) {
			return false
		}
	}
	return true
}

// controlPlanePods are kube-system's pods of one component (kubeadm and kOps run them as static
// pods, visible through their mirror pods).
func controlPlanePods(s PreflightSnapshot, component string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range s.Pods {
		p := &s.Pods[i]
		if k8sops.IsControlPlanePod(p, component) {
			out = append(out, p)
		}
	}
	return out
}

// checkPoolPlacement: the new pod range against kube-controller-manager's cluster CIDR, the new
// pools' encapsulation and NAT against the old ones', and node podCIDRs outside the new range.
func checkPoolPlacement(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	if len(r.NewPod) == 0 {
		return nil
	}
	var out []PreflightFinding
	allocates := true
	for _, p := range controlPlanePods(s, "kube-controller-manager") {
		if slices.Contains(k8sops.FlagValues(p, "allocate-node-cidrs"), "false") {
			allocates = false
		}
		out = append(out, nodeCapacity(s, r, p)...)
		for _, v := range k8sops.FlagValues(p, "cluster-cidr") {
			if cidrs := prefixList(v); !containedIn(r.NewPod, cidrs) {
				out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckPoolPlacement, Object: ObjectRef{"Pod", p.Namespace, p.Name},
					Detail: fmt.Sprintf("kube-controller-manager runs with --cluster-cidr=%s, which does not contain the new pod range %s: "+
						"node podCIDRs and anything keyed on the cluster CIDR stay on the old range.", v, prefixesString(r.NewPod)),
					Fix: "Plan the --cluster-cidr change with the pod move; where Calico does IPAM run it with --allocate-node-cidrs=false " +
						"(changing --cluster-cidr while nodes hold podCIDRs outside it crash-loops it)."})
			}
		}
	}
	oldPools, newPools := poolsIn(s.Pools, r.OldPod), poolsIn(s.Pools, r.NewPod)
	for _, np := range newPools {
		if diffs := calico.PoolDifferences(np.Settings, np.Name, oldPools); len(diffs) > 0 {
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckPoolPlacement, Object: ObjectRef{"IPPool", "", np.Name},
				Detail: fmt.Sprintf("Its encapsulation or NAT differs from the pools pods leave: %s. Moved pods reach other nodes "+
					"and the outside differently from the pods still in the old pool.", strings.Join(diffs, "; ")),
				Fix: "Give the new pool the old pool's encapsulation and natOutgoing unless the change is intended."})
		}
	}
	if allocates {
		out = append(out, nodesOutside(s, r)...)
	}
	return out
}

// nodesOutside: node podCIDRs outside the new pod range, as one finding.
func nodesOutside(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	var names []string
	for _, n := range s.Nodes {
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		if ps := k8sops.ParsePrefixes(cidrs); len(ps) > 0 && !containedIn(ps, r.NewPod) {
			names = append(names, n.Name+" "+strings.Join(cidrs, ","))
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return []PreflightFinding{{Severity: SeverityWarning, Check: CheckPoolPlacement, Object: ObjectRef{"Node", "", strings.Fields(names[0])[0]},
		Detail: fmt.Sprintf("%d node(s) hold podCIDRs outside the new pod range %s (%s): kube-controller-manager crash-loops "+
			"if its --cluster-cidr changes to the new range while they exist.", len(names), prefixesString(r.NewPod), k8sops.FirstOf(names)),
		Fix: "Leave --cluster-cidr as it is until the nodes are replaced, or run kube-controller-manager with " +
			"--allocate-node-cidrs=false where Calico does IPAM."}}
}

// checkKubeProxy: kube-proxy masquerades traffic to Services from outside its clusterCIDR, so
// pods in the new range lose their source address on every Service connection.
func checkKubeProxy(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	if len(r.NewPod) == 0 {
		return nil
	}
	type source struct {
		ref   ObjectRef
		value string
	}
	var sources []source
	if cm := s.ConfigMaps["kube-proxy"]; cm != nil {
		var kc struct {
			ClusterCIDR string `json:"clusterCIDR"`
		}
		for _, key := range []string{"config.conf", "config"} {
			if yaml.Unmarshal([]byte(cm.Data[key]), &kc) == nil && kc.ClusterCIDR != "" {
				sources = append(sources, source{ObjectRef{"ConfigMap", "kube-system", "kube-proxy"}, kc.ClusterCIDR})
				break
			}
		}
	}
	for _, p := range controlPlanePods(s, "kube-proxy") {
		for _, v := range k8sops.FlagValues(p, "cluster-cidr") {
			sources = append(sources, source{ObjectRef{"Pod", p.Namespace, p.Name}, v})
		}
	}
	var out []PreflightFinding
	for _, src := range sources {
		cidrs := prefixList(src.value)
		if len(cidrs) == 0 || containedIn(r.NewPod, cidrs) {
			continue
		}
		out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckKubeProxyCIDR, Object: src.ref,
			Detail: fmt.Sprintf("kube-proxy's clusterCIDR is %s, which does not contain the new pod range %s: it masquerades "+
				"Service traffic from outside it, so pods in the new range reach Services with their node's address "+
				"(NetworkPolicies and logs see the node).", src.value, prefixesString(r.NewPod)),
			Fix: "Set kube-proxy's clusterCIDR to a range holding both pod ranges (kOps: nonMasqueradeCIDR) and restart " +
				"kube-proxy before pods move."})
	}
	return out
}

func prefixesString(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
