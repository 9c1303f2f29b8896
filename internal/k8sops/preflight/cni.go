// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The preflight checks on what the stages need from the rest of the cluster: a CNI whose pod
// addresses come from Calico's pools; on 1.29–1.32, kube-controller-manager running its
// ServiceCIDR controller; kubeadm's own record of the ranges; room for the nodes in the new pod
// range; and workloads a roll would take down with their single replica.
package preflight

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// ipamInCNI finds the ipam object of a CNI configuration template (calico-config's
// cni_network_config holds __PLACEHOLDERS__, so it is not always valid JSON).
var (
	ipamInCNI     = regexp.MustCompile(`"ipam"\s*:\s*\{([^{}]*)\}`)
	ipamTypeInCNI = regexp.MustCompile(`"type"\s*:\s*"([^"]+)"`)
)

// checkCNIIPAM: the pod stage disables a Calico pool and rolls the pods, which moves their
// addresses only when Calico's IPAM hands them out. With host-local (or Calico's CNI plugin on
// host-local IPAM, subnet usePodCidr) each pod takes an address from its node's podCIDR, and
// with another CNI the pools decide nothing.
func checkCNIIPAM(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	if len(r.OldPod) == 0 && len(r.NewPod) == 0 {
		return nil
	}
	var out []PreflightFinding
	blocker := func(ref ObjectRef, why string) {
		out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckCNIIPAM, Object: ref,
			Detail: why + ": each pod takes its address from its node's podCIDR or from another CNI, not from Calico's IP pools, " +
				"so disabling the old pool and rolling the pods moves no pod address.",
			Fix: "Move the pods by the nodes instead (new --cluster-cidr, nodes replaced with podCIDRs in the new range), or switch " +
				"the CNI to Calico IPAM (ipam type calico-ipam; the Tigera operator's Installation spec.cni.ipam.type Calico) " +
				"before the pod stage."})
	}
	// The network plugin itself, by the DaemonSet that runs it: another CNI moves no address by
	// the pools; none known (kubenet, a CNI on the hosts) neither, where nothing of Calico shows.
	cnis := k8sops.KnownCNIs(s.DaemonSets)
	if !k8sops.RunsCalico(cnis) {
		detail, fix := k8sops.PodStageRefusal(cnis)
		switch {
		case len(cnis) > 0:
			out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckCNIIPAM,
				Object: ObjectRef{"DaemonSet", cnis[0].Namespace, cnis[0].DaemonSet}, Detail: detail, Fix: fix})
		case len(s.DaemonSets) > 0 && !s.CalicoServed && s.ConfigMaps["calico-config"] == nil && len(s.Installations) == 0:
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckCNIIPAM,
				Object: ObjectRef{Kind: "CNI", Name: "unknown"}, Detail: detail, Fix: fix})
		}
	}
	if cm := s.ConfigMaps["calico-config"]; cm != nil {
		for _, e := range cniConfigIPAMs(cm) {
			switch {
			case e.UsePodCIDR:
				blocker(ObjectRef{"ConfigMap", "kube-system", "calico-config"}, fmt.Sprintf("The CNI configuration's ipam is %q with subnet usePodCidr", e.Type))
			case e.Type != "calico-ipam":
				blocker(ObjectRef{"ConfigMap", "kube-system", "calico-config"}, fmt.Sprintf("The CNI configuration's ipam is %q, not calico-ipam", e.Type))
			}
		}
	}
	for _, in := range s.Installations {
		cni, _, _ := unstructured.NestedString(in.Object, "spec", "cni", "type")
		ipam, _, _ := unstructured.NestedString(in.Object, "spec", "cni", "ipam", "type")
		ref := ObjectRef{"Installation", "", in.GetName()}
		switch {
		case cni != "" && cni != "Calico":
			blocker(ref, fmt.Sprintf("The Tigera operator's Installation runs CNI %s", cni))
		case ipam != "" && ipam != "Calico":
			blocker(ref, fmt.Sprintf("The Tigera operator's Installation runs IPAM %s", ipam))
		}
	}
	return out
}

// checkServiceCIDRGate: before 1.33 the ServiceCIDR API is off by default, and
// kube-controller-manager's ServiceCIDR controller runs only with the MultiCIDRServiceAllocator
// gate. Without it a new ServiceCIDR gets no finalizer (deleting one, a keep-range included,
// leaves the Service IPs in it in no range) and no deleted range is released (the old default
// range stays Terminating).
func checkServiceCIDRGate(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	if len(r.NewService) == 0 || s.ServerMinor < 29 || s.ServerMinor > 32 {
		return nil
	}
	fix := "Run kube-controller-manager (and kube-apiserver) with --feature-gates=MultiCIDRServiceAllocator=true (kOps: " +
		"kubeControllerManager.featureGates, the gates step of provider::k8scidr::kops_networking with kubernetes_version; " +
		"kubeadm: controllerManager.extraArgs), roll the control plane, then plan again."
	pods := controlPlanePods(s, "kube-controller-manager")
	if len(pods) == 0 {
		return []PreflightFinding{{Severity: SeverityWarning, Check: CheckServiceCIDRGate, Object: ObjectRef{Kind: "kube-controller-manager"},
			Detail: fmt.Sprintf("Kubernetes 1.%d runs kube-controller-manager's ServiceCIDR controller only with the MultiCIDRServiceAllocator "+
				"feature gate, and its flags are not visible here (no mirror pod in kube-system).", s.ServerMinor),
			Fix: "Make sure it runs with the gate. " + fix}}
	}
	var out []PreflightFinding
	for _, p := range pods {
		if serviceCIDRGateOn(p) {
			continue
		}
		gates := strings.Join(k8sops.FlagValues(p, "feature-gates"), ",")
		out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckServiceCIDRGate, Object: ObjectRef{"Pod", p.Namespace, p.Name},
			Detail: fmt.Sprintf("kube-controller-manager runs without the MultiCIDRServiceAllocator feature gate (--feature-gates=%q), off by "+
				"default on 1.%d: its ServiceCIDR controller does not run, so new ServiceCIDRs get no finalizer (deleting one, a keep-range "+
				"included, leaves the Service IPs in it in no range) and no deleted range is released (the old default range stays Terminating).",
				gates, s.ServerMinor),
			Fix: fix})
	}
	return out
}

// KubeadmConfigMap is kubeadm's ClusterConfiguration in kube-system.
const KubeadmConfigMap = "kubeadm-config"

// checkKubeadmConfig: kubeadm keeps the ranges in kube-system/kubeadm-config
// (ClusterConfiguration networking.serviceSubnet and podSubnet), and every later kubeadm upgrade,
// control-plane join and certificate renewal writes the flags and the apiserver certificate from
// them: left on the old ranges, the next upgrade moves the apiserver back.
func checkKubeadmConfig(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	cm := s.KubeadmConfig
	if cm == nil {
		return nil
	}
	var cfg struct {
		Networking struct{ ServiceSubnet, PodSubnet string }
	}
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg); err != nil {
		return nil
	}
	ref := ObjectRef{"ConfigMap", "kube-system", KubeadmConfigMap}
	var out []PreflightFinding
	if len(r.NewService) > 0 && cfg.Networking.ServiceSubnet != "" && !containedIn(r.NewService, prefixList(cfg.Networking.ServiceSubnet)) {
		out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckKubeadmConfig, Object: ref,
			Detail: fmt.Sprintf("Its ClusterConfiguration says networking.serviceSubnet: %s, which does not hold the new Service range %s. "+
				"kubeadm upgrade, kubeadm join --control-plane and kubeadm certs renew write kube-apiserver's --service-cluster-ip-range "+
				"and its certificate from it: left there, the next upgrade moves the apiserver back to the old range.",
				cfg.Networking.ServiceSubnet, prefixesString(r.NewService)),
			Fix: "Set networking.serviceSubnet to the new range when kube-apiserver's flag changes (before the apiserver Service moves), " +
				"with apiServer.certSANs keeping the old first address while its bridge runs; regenerate the apiserver certificate."})
	}
	if len(r.NewPod) > 0 && cfg.Networking.PodSubnet != "" && !containedIn(r.NewPod, prefixList(cfg.Networking.PodSubnet)) {
		out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckKubeadmConfig, Object: ref,
			Detail: fmt.Sprintf("Its ClusterConfiguration says networking.podSubnet: %s, which does not hold the new pod range %s: "+
				"the next kubeadm upgrade writes kube-controller-manager's --cluster-cidr from it.", cfg.Networking.PodSubnet, prefixesString(r.NewPod)),
			Fix: "Set networking.podSubnet to the new range once no node holds a podCIDR outside it (kube-controller-manager " +
				"crash-loops otherwise), or keep node IPAM off (--allocate-node-cidrs=false) where Calico does IPAM."})
	}
	return out
}

// nodeCapacity: where kube-controller-manager hands out node podCIDRs, how many nodes the new pod
// range holds at its --node-cidr-mask-size (24 for IPv4 and 64 for IPv6 by default).
func nodeCapacity(s PreflightSnapshot, r PreflightRanges, kcm *corev1.Pod) []PreflightFinding {
	if !slices.Contains(k8sops.FlagValues(kcm, "allocate-node-cidrs"), "true") || len(s.Nodes) == 0 { // off by default; kubeadm turns it on
		return nil
	}
	var out []PreflightFinding
	for _, p := range r.NewPod {
		mask := 24
		names := []string{"node-cidr-mask-size", "node-cidr-mask-size-ipv4"}
		if !p.Addr().Is4() {
			mask, names = 64, []string{"node-cidr-mask-size", "node-cidr-mask-size-ipv6"}
		}
		for _, n := range names {
			for _, v := range k8sops.FlagValues(kcm, n) {
				if m, err := strconv.Atoi(v); err == nil {
					mask = m
				}
			}
		}
		capacity := 0
		if mask >= p.Bits() && mask-p.Bits() < 31 {
			capacity = 1 << (mask - p.Bits())
		}
		if capacity >= len(s.Nodes) {
			continue
		}
		out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckPoolPlacement, Object: ObjectRef{"Pod", kcm.Namespace, kcm.Name},
			Detail: fmt.Sprintf("kube-controller-manager hands out a /%d podCIDR per node: the new pod range %s holds %d of them, and the "+
				"cluster has %d nodes, so nodes beyond that get no podCIDR once it allocates from the new range.", mask, p, capacity, len(s.Nodes)),
			Fix: "Choose a larger pod range, a longer --node-cidr-mask-size, or run it with --allocate-node-cidrs=false where Calico does IPAM."})
	}
	return out
}

// checkRollAvailability: the roll restarts every workload with a pod in the old range, and the
// node rolls the guide asks for between stages drain every node. CoreDNS on one replica leaves
// the cluster without DNS while it restarts, and so does a fail-closed webhook's single backend
// for every create the webhook covers (the roll's own new pods too). On two or more replicas
// without a PodDisruptionBudget, a drain evicts them without asking how many are left: two
// replicas on one node go at once.
func checkRollAvailability(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	if len(r.OldPod) == 0 {
		return nil
	}
	// critical: the Deployment and why the cluster needs it up, in a sentence's middle.
	type critical struct {
		d   *appsv1.Deployment
		why string
		fix string
	}
	var crit []critical
	for i := range s.Deployments {
		d := &s.Deployments[i]
		if d.Namespace == "kube-system" && (d.Name == "coredns" || d.Spec.Template.Labels["k8s-app"] == "kube-dns") {
			crit = append(crit, critical{d, "the cluster DNS: no name resolves", "as write-up 001 does"})
		}
	}
	type backend struct{ hook, ns, name string }
	var backends []backend
	for _, c := range s.ValidatingWebhooks {
		for _, w := range c.Webhooks {
			if (w.FailurePolicy == nil || *w.FailurePolicy == admissionv1.Fail) && w.ClientConfig.Service != nil {
				backends = append(backends, backend{c.Name, w.ClientConfig.Service.Namespace, w.ClientConfig.Service.Name})
			}
		}
	}
	for _, c := range s.MutatingWebhooks {
		for _, w := range c.Webhooks {
			if (w.FailurePolicy == nil || *w.FailurePolicy == admissionv1.Fail) && w.ClientConfig.Service != nil {
				backends = append(backends, backend{c.Name, w.ClientConfig.Service.Namespace, w.ClientConfig.Service.Name})
			}
		}
	}
	for _, b := range backends {
		i := slices.IndexFunc(s.Services, func(x corev1.Service) bool { return x.Namespace == b.ns && x.Name == b.name })
		if i < 0 || len(s.Services[i].Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(s.Services[i].Spec.Selector)
		for j := range s.Deployments {
			d := &s.Deployments[j]
			if d.Namespace == b.ns && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				crit = append(crit, critical{d, fmt.Sprintf("the backend of the fail-closed webhook %s (Service %s/%s): "+
					"every create the webhook covers is refused, the roll's own new pods among them,", b.hook, b.ns, b.name),
					"or set the webhook's failurePolicy to Ignore for the migration"})
			}
		}
	}
	var out []PreflightFinding
	for _, c := range crit {
		ref := ObjectRef{"Deployment", c.d.Namespace, c.d.Name}
		switch {
		case c.d.Spec.Replicas == nil || *c.d.Spec.Replicas <= 1:
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckRollAvailability, Object: ref,
				Detail: fmt.Sprintf("It runs one replica and is %s while the roll restarts it, until the new pod is ready.", c.why),
				Fix:    fmt.Sprintf("Scale it to two or more replicas with a PodDisruptionBudget before the roll, %s.", c.fix)})
		case !coveredByPDB(s.PodDisruptionBudgets, c.d):
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckRollAvailability, Object: ref,
				Detail: fmt.Sprintf("No PodDisruptionBudget covers its %d replicas: a node drain of the migration's node rolls evicts them "+
					"without counting how many are left, and with all of them gone it is %s until one is ready again.", *c.d.Spec.Replicas, c.why),
				Fix: fmt.Sprintf("Create a PodDisruptionBudget selecting its pods (maxUnavailable: 1) before the node rolls, %s.", c.fix)})
		}
	}
	return out
}

// coveredByPDB: a PodDisruptionBudget of the Deployment's namespace selects its pods' labels.
func coveredByPDB(pdbs []policyv1.PodDisruptionBudget, d *appsv1.Deployment) bool {
	return slices.ContainsFunc(pdbs, func(p policyv1.PodDisruptionBudget) bool {
		if p.Namespace != d.Namespace || p.Spec.Selector == nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		return err == nil && sel.Matches(labels.Set(d.Spec.Template.Labels))
	})
}

// checkServiceCIDRLeftover: KEP-1880's last step. Once kube-apiserver has recreated the default
// range on the new flags, a ServiceCIDR made for the move inside it is no longer needed: the
// default range holds its addresses. While the default range still overlaps the old Service
// range, kube-apiserver has not moved: a keep-range inside it (the old DNS or apiserver IPs a
// bridge holds) is what keeps those IPs valid once it does, so it is not reported. After the
// move, a keep-range in the old range is needed only while a Service (a bridge) holds an address
// in it; once none does, the bridges are gone and so is its purpose.
func checkServiceCIDRLeftover(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	i := slices.IndexFunc(s.ServiceCIDRs, func(sc k8sops.ServiceCIDR) bool { return sc.Name == k8sops.DefaultServiceCIDRName })
	if i < 0 || !s.ServiceCIDRs[i].Ready || s.ServiceCIDRs[i].Terminating {
		return nil
	}
	def := k8sops.ParsePrefixes(s.ServiceCIDRs[i].CIDRs)
	for _, p := range def {
		if slices.ContainsFunc(r.OldService, p.Overlaps) {
			return nil
		}
	}
	held := func(cidrs []netip.Prefix) bool {
		return slices.ContainsFunc(s.Services, func(svc corev1.Service) bool {
			return slices.ContainsFunc(k8sops.ClusterIPs(&svc), func(a netip.Addr) bool {
				return slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) })
			})
		})
	}
	var out []PreflightFinding
	for _, sc := range s.ServiceCIDRs {
		if sc.Name == k8sops.DefaultServiceCIDRName || sc.Terminating {
			continue
		}
		ref := ObjectRef{"ServiceCIDR", "", sc.Name}
		cidrs := k8sops.ParsePrefixes(sc.CIDRs)
		switch {
		case containedIn(cidrs, def):
			out = append(out, PreflightFinding{Severity: SeverityInfo, Check: CheckServiceCIDRLeftover, Object: ref,
				Detail: fmt.Sprintf("It lies inside the default range kubernetes (%s), which kube-apiserver made from its flags: that range "+
					"holds its addresses, so it is no longer needed (KEP-1880's last step).", strings.Join(s.ServiceCIDRs[i].CIDRs, ", ")),
				Fix: "Remove it once the migration is done (its k8scidr_service_cidr from the configuration); its Services keep their IPs."})
		case len(cidrs) > 0 && !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return slices.ContainsFunc(def, p.Overlaps) }) &&
			slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return slices.ContainsFunc(r.OldService, p.Overlaps) }) && !held(cidrs):
			out = append(out, PreflightFinding{Severity: SeverityInfo, Check: CheckServiceCIDRLeftover, Object: ref,
				Detail: fmt.Sprintf("It (%s) lies in the old Service range and no Service holds an address in it: the bridges it kept "+
					"old IPs valid for are gone, so it is no longer needed (KEP-1880's last step).", strings.Join(sc.CIDRs, ", ")),
				Fix: "Remove it (its k8scidr_service_cidr from the configuration, or the resource that made it); nothing is allocated from it."})
		}
	}
	return out
}
