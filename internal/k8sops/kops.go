// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The kOps cluster-spec values that follow a range move (write-ups 000/001): what a user sets
// with `kops edit cluster`, step by step, in an order kOps' own validation accepts.
//
// The rules restated here are kOps' (kubernetes/kops@268927e, research/kops-validation.md):
// V = pkg/apis/kops/validation/validation.go, L = pkg/apis/kops/validation/legacy.go. kOps
// validates the whole completed spec on every `kops edit`/`update cluster`, so each step's
// fragment must leave a spec that passes on its own.
package k8sops

import (
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
)

// KopsInput is what the function kops_networking takes. Arguments, in order: 0 ServiceCIDR,
// 1 PodCIDR, 2 NonMasqueradeCIDR, 3 NetworkCIDR, 4 ClusterDNSIP, 5 OldServiceCIDR, 6 options.
type KopsInput struct {
	ServiceCIDR, PodCIDR, NonMasqueradeCIDR string
	// NetworkCIDR is the cloud network's range (AWS VPC, default 172.20.0.0/16); "" when the cloud
	// has none (GCE, DigitalOcean, Hetzner, OpenStack, …).
	NetworkCIDR string
	// ClusterDNSIP is the IP the cluster DNS Service got in the move (the moves data source's
	// dns_service_ips): kOps' kubeDNS.serverIP, never assumed to be the range's tenth address.
	ClusterDNSIP string
	// OldServiceCIDR is the range the apiserver served before; its first address (the old
	// default/kubernetes IP) stays in the apiserver certificate while the bridge serves it.
	OldServiceCIDR string
	// NodeLocalDNSIP is nodeLocalDNS.localIP when NodeLocal DNSCache runs: kubelet clusterDNS keeps it.
	NodeLocalDNSIP string
	// KubernetesVersion ("1.31", "v1.31.4"; "" unknown) adds the MultiCIDRServiceAllocator step on 1.29–1.32.
	KubernetesVersion string
	// CalicoIPAM is true when Calico hands out pod addresses: kube-controller-manager must then
	// not allocate node podCIDRs.
	CalicoIPAM bool
}

// KopsStep is one `kops edit cluster` change, when it belongs, and the rolling update it needs.
type KopsStep struct {
	Name, When, Roll, YAML string
}

// KopsNetworking is the cluster spec's networking after the move, and the steps that get there.
type KopsNetworking struct {
	ServiceClusterIPRange string
	PodCIDR               string
	NonMasqueradeCIDR     string
	// KubeDNSServerIP is kubeDNS.serverIP: the DNS Service's IP after the move.
	KubeDNSServerIP string
	// KubeletClusterDNS is kubelet (and masterKubelet) clusterDNS: the DNS Service's IP, or
	// NodeLocal DNSCache's local IP.
	KubeletClusterDNS string
	// AdditionalSANs keep the old default/kubernetes IP in the apiserver certificate, so clients
	// still using it through the bridge verify TLS; empty when the old IP is inside the new range.
	AdditionalSANs []string
	// AllocateNodeCIDRs is false when Calico does IPAM: kube-controller-manager must then not
	// hand out node podCIDRs (with them outside its new cluster CIDR it crash-loops, write-up 003).
	AllocateNodeCIDRs bool
	Steps             []KopsStep
	// YAML is every step's fragment in order, each under a comment saying when.
	YAML string
}

// kube-apiserver's limits on the Service range: it refuses IPv4 ranges wider than /12, and the
// range must hold more than the network, .1 and the DNS address.
const (
	maxServiceBitsV4 = 28
	minServiceBitsV4 = 12
	minServiceBitsV6 = 64
	maxServiceBitsV6 = 124
	maxPodBitsV4     = 24
	maxPodBitsV6     = 112
)

// Kops step names, in the order they are applied.
const (
	KopsStepGates        = "gates"
	KopsStepServiceRange = "service_range"
	KopsStepPodRange     = "pod_range"
)

// KopsOptions are the keys the options argument takes.
var KopsOptions = []string{"node_local_dns_ip", "kubernetes_version", "calico_ipam"}

// ParseKopsOptions fills in the options argument (argument 6): each key once, values as documented.
func (in *KopsInput) ParseKopsOptions(opts map[string]string) error {
	for k, v := range opts {
		switch k {
		case "node_local_dns_ip":
			in.NodeLocalDNSIP = v
		case "kubernetes_version":
			in.KubernetesVersion = v
		case "calico_ipam":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return argError(6, fmt.Errorf("calico_ipam is %q: want true or false", v))
			}
			in.CalicoIPAM = b
		default:
			return argError(6, fmt.Errorf("unknown option %q: the options are %s", k, strings.Join(KopsOptions, ", ")))
		}
	}
	return nil
}

// NewKopsNetworking checks the ranges against kOps' validation and the apiserver's limits and
// returns the spec values and the steps. Errors are Findings naming the argument (KopsInput).
func NewKopsNetworking(in KopsInput) (KopsNetworking, error) {
	svc, pod, nm, err := parseKopsRanges(in)
	if err != nil {
		return KopsNetworking{}, err
	}
	v4 := svc.Addr().Is4()
	dns, err := netip.ParseAddr(strings.TrimSpace(in.ClusterDNSIP))
	switch {
	case err != nil:
		return KopsNetworking{}, argError(4, fmt.Errorf("%q is not an IP address: pass the DNS Service's new IP (the moves data source's dns_service_ips)", in.ClusterDNSIP))
	case !svc.Contains(dns): // L:105-112
		return KopsNetworking{}, argError(4, fmt.Errorf("%s is outside the Service range %s: kOps refuses it (\"ServiceClusterIPRange must contain the DNS Server IP\"); pass the DNS Service's IP after the move", dns, svc))
	case !Allocatable(svc, dns) || dns == firstHost(svc):
		return KopsNetworking{}, argError(4, fmt.Errorf("%s cannot be a Service IP in %s (network, broadcast or the apiserver's first address)", dns, svc))
	}
	k := KopsNetworking{ServiceClusterIPRange: svc.String(), PodCIDR: pod.String(), NonMasqueradeCIDR: nm.String(),
		KubeDNSServerIP: dns.String(), KubeletClusterDNS: dns.String(), AllocateNodeCIDRs: !in.CalicoIPAM}
	if s := strings.TrimSpace(in.NodeLocalDNSIP); s != "" {
		local, err := netip.ParseAddr(s)
		if err != nil || local.Is4() != v4 { // V:2065-2087
			return KopsNetworking{}, argError(6, fmt.Errorf("node_local_dns_ip %q is not an IP address of the ranges' family (kOps: \"invalid kubeDNS.nodeLocalDNS.localIP\")", s))
		}
		k.KubeletClusterDNS = local.String() // L:314-315: clusterDNS may be the local IP
	}
	old, err := ParseCIDR(in.OldServiceCIDR)
	if err != nil {
		return KopsNetworking{}, argError(5, err)
	}
	if old.Addr().Is4() != v4 {
		return KopsNetworking{}, argError(5, fmt.Errorf("%s is of another IP family than the Service range %s", old, svc))
	}
	if oldAPI := firstHost(old); !svc.Contains(oldAPI) {
		k.AdditionalSANs = []string{oldAPI.String()}
	}
	gates, err := kopsGatesStep(in.KubernetesVersion)
	if err != nil {
		return KopsNetworking{}, err
	}
	if gates != nil {
		k.Steps = append(k.Steps, *gates)
	}
	k.Steps = append(k.Steps, k.serviceRangeStep(), k.podRangeStep())
	var doc []string
	for _, s := range k.Steps {
		doc = append(doc, "# "+s.Name+": "+s.When+"\n"+s.YAML)
	}
	k.YAML = strings.Join(doc, "---\n")
	return k, nil
}

// parseKopsRanges parses and checks the ranges: kOps' networking rules and the apiserver's sizes.
func parseKopsRanges(in KopsInput) (svc, pod, nm netip.Prefix, err error) {
	var prefixes [3]netip.Prefix
	for i, s := range []string{in.ServiceCIDR, in.PodCIDR, in.NonMasqueradeCIDR} {
		p, err := ParseCIDR(s) // V:500-524: parses, no host bits
		if err != nil {
			return svc, pod, nm, argError(i, err)
		}
		prefixes[i] = p
	}
	svc, pod, nm = prefixes[0], prefixes[1], prefixes[2]
	v4 := svc.Addr().Is4()
	for i, p := range prefixes[1:] {
		if p.Addr().Is4() != v4 {
			return svc, pod, nm, argError(i+1, fmt.Errorf("%s is of another IP family than the Service range %s", p, svc))
		}
	}
	minSvc, maxSvc, maxPod := minServiceBitsV4, maxServiceBitsV4, maxPodBitsV4
	if !v4 {
		minSvc, maxSvc, maxPod = minServiceBitsV6, maxServiceBitsV6, maxPodBitsV6
	}
	switch {
	case svc.Bits() < minSvc:
		return svc, pod, nm, argError(0, fmt.Errorf("%s is too large: kube-apiserver takes Service ranges up to /%d", svc, minSvc))
	case svc.Bits() > maxSvc:
		return svc, pod, nm, argError(0, fmt.Errorf("%s is too small: the Service range must hold the apiserver's and the DNS Service's addresses (/%d at most)", svc, maxSvc))
	case pod.Bits() > maxPod:
		return svc, pod, nm, argError(1, fmt.Errorf("%s is too small for a pod range (/%d at most)", pod, maxPod))
	case svc.Overlaps(pod):
		return svc, pod, nm, argError(1, fmt.Errorf("the pod range %s overlaps the Service range %s", pod, svc))
	case !v4 && nm != netip.MustParsePrefix("::/0"): // V:1189-1190
		return svc, pod, nm, argError(2, fmt.Errorf("%s: kOps requires IPv6 clusters to have nonMasqueradeCIDR ::/0", nm))
	case !Within(nm, pod): // V:1218-1219
		return svc, pod, nm, argError(2, fmt.Errorf("%s does not contain the pod range %s: kOps requires podCIDR inside nonMasqueradeCIDR", nm, pod))
	}
	// kOps has not tied serviceClusterIPRange to nonMasqueradeCIDR since 1.28 (V:1236-1240).
	if strings.TrimSpace(in.NetworkCIDR) == "" {
		return svc, pod, nm, nil
	}
	network, err := ParseCIDR(in.NetworkCIDR)
	if err != nil {
		return svc, pod, nm, argError(3, err)
	}
	switch {
	case network.Addr().Is4() != v4:
		return svc, pod, nm, argError(3, fmt.Errorf("%s is of another IP family than the Service range %s", network, svc))
	case v4 && nm.Overlaps(network): // V:1193-1199
		return svc, pod, nm, argError(3, fmt.Errorf("the network CIDR %s overlaps nonMasqueradeCIDR %s: kOps refuses it (\"nonMasqueradeCIDR cannot overlap with networkCIDR\"); "+
			"choose pod and nonMasquerade ranges outside the cloud network", network, nm))
	case svc.Overlaps(network): // V:723-724: no subnet (inside networkCIDR) may overlap serviceClusterIPRange
		return svc, pod, nm, argError(3, fmt.Errorf("the network CIDR %s overlaps the Service range %s: kOps refuses subnets that overlap serviceClusterIPRange; "+
			"choose a Service range outside the cloud network", network, svc))
	}
	return svc, pod, nm, nil
}

// kopsGatesStep is the MultiCIDRServiceAllocator step for 1.29–1.32, where the ServiceCIDR API
// is off by default: the apiserver needs the gate and the API version, kube-controller-manager
// the gate for its ServiceCIDR controller (without it no deleted range's finalizer is removed).
// kOps validates neither map (research/kops-validation.md).
func kopsGatesStep(version string) (*KopsStep, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	if v == "" {
		return nil, nil
	}
	parts := strings.SplitN(v, ".", 3)
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := -1, error(nil)
	if len(parts) > 1 {
		minor, err2 = strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	}
	switch {
	case err1 != nil || err2 != nil || len(parts) < 2 || major != 1:
		return nil, argError(6, fmt.Errorf("kubernetes_version %q: want the cluster's version, e.g. 1.31 or v1.31.4", version))
	case minor < 29:
		return nil, argError(6, fmt.Errorf("kubernetes_version %s: the ServiceCIDR API this migration needs starts with Kubernetes 1.29; upgrade first", version))
	case minor >= 33:
		return nil, nil // GA and on by default
	}
	api := "networking.k8s.io/v1beta1"
	if minor < 31 {
		api = "networking.k8s.io/v1alpha1"
	}
	return &KopsStep{Name: KopsStepGates,
		When: fmt.Sprintf("before stage 1 (Kubernetes 1.%d serves ServiceCIDRs only with the gate)", minor),
		Roll: "kops update cluster --yes; kops rolling-update cluster --instance-group-roles=control-plane --yes",
		YAML: kopsYAML(
			"kubeAPIServer:", "  featureGates:", `    MultiCIDRServiceAllocator: "true"`,
			"  runtimeConfig:", "    "+api+`: "true"`,
			"kubeControllerManager:", "  featureGates:", `    MultiCIDRServiceAllocator: "true"`),
	}, nil
}

// serviceRangeStep moves the apiserver's range and the DNS settings together: kOps accepts
// kubeDNS.serverIP only inside serviceClusterIPRange (L:105-112) and clusterDNS only equal to
// serverIP or nodeLocalDNS.localIP (L:114-119), so neither can change before the other.
func (k KopsNetworking) serviceRangeStep() KopsStep {
	lines := []string{"serviceClusterIPRange: " + k.ServiceClusterIPRange}
	if len(k.AdditionalSANs) > 0 {
		lines = append(lines, "additionalSans: # keep any you have")
		for _, s := range k.AdditionalSANs {
			lines = append(lines, "- "+s)
		}
	}
	lines = append(lines, "kubeDNS:", "  serverIP: "+k.KubeDNSServerIP,
		"kubelet:", "  clusterDNS: "+k.KubeletClusterDNS, "masterKubelet:", "  clusterDNS: "+k.KubeletClusterDNS)
	return KopsStep{Name: KopsStepServiceRange,
		When: "after stage 1 moved the Services, before the apiserver's own Service moves",
		Roll: "kops update cluster --yes; kops rolling-update cluster --instance-group-roles=control-plane --yes; " +
			"then, after the apiserver Service moved, kops rolling-update cluster --instance-group-roles=node --yes",
		YAML: kopsYAML(lines...)}
}

// podRangeStep retires the old pod range from the spec once the old pool is gone: podCIDR and
// kube-controller-manager's clusterCIDR inside nonMasqueradeCIDR (V:1218-1219, L:90-98).
func (k KopsNetworking) podRangeStep() KopsStep {
	lines := []string{"nonMasqueradeCIDR: " + k.NonMasqueradeCIDR, "podCIDR: " + k.PodCIDR,
		"kubeControllerManager:", "  clusterCIDR: " + k.PodCIDR, fmt.Sprintf("  allocateNodeCIDRs: %t", k.AllocateNodeCIDRs)}
	when := "after the old pool is deleted"
	if len(k.AdditionalSANs) > 0 {
		when += "; drop " + strings.Join(k.AdditionalSANs, ", ") + " from additionalSans once the apiserver bridge is gone"
	}
	return KopsStep{Name: KopsStepPodRange, When: when,
		Roll: "kops update cluster --yes; kops rolling-update cluster --yes (control plane first, then the nodes are replaced)",
		YAML: kopsYAML(lines...)}
}

// kopsYAML indents lines under spec: (kops.k8s.io/v1alpha2 field names, as kops edit shows them).
func kopsYAML(lines ...string) string {
	var b strings.Builder
	b.WriteString("spec:\n")
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// firstHost is a range's first address after the network address: the apiserver's own Service IP.
func firstHost(p netip.Prefix) netip.Addr {
	return intAddr(new(big.Int).Add(addrInt(p.Masked().Addr()), big.NewInt(1)), p.Addr().Is4())
}
