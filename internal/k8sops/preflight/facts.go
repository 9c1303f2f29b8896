// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The facts a migration's configuration needs from the cluster (its ranges, pools, CNI,
// kube-proxy, DNS and the ServiceCIDR gate), read from it instead of guessed: reported by
// k8scidr_cluster_info, so that examples/migration checks its variables against them.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

// Facts are what the cluster says of itself that a migration depends on. A string left "" (a
// slice nil, a pointer nil) was not found: not run here, not visible (no mirror pod), or not
// readable with the credentials (Unread says which reads were refused).
type Facts struct {
	// APIServerServiceRanges are kube-apiserver's --service-cluster-ip-range, distinct, from its
	// mirror pods in kube-system (none where the control plane runs no static pods it shows).
	APIServerServiceRanges []string
	// ServiceCIDRs are the cluster's ServiceCIDR objects, where the API is served.
	ServiceCIDRs []k8sops.ServiceCIDR
	// ClusterCIDRs are kube-controller-manager's --cluster-cidr, distinct, from its mirror pods.
	ClusterCIDRs []string
	// Pools are Calico's IP pools, where Calico's API is served.
	Pools []calico.IPPool
	// CNI is the first network plugin found running (nil: none this provider knows), and IPAM
	// who hands out its pod addresses where that shows (Calico's CNI configuration or the Tigera
	// operator's Installation: "calico-ipam", "host-local", ...).
	CNI  *k8sops.CNI
	IPAM string
	// PodRangeSteps says, where Calico's IPAM does not hand out the pods' addresses, why the pod
	// stage moves none and how this cluster's pod range moves instead; "" where it does.
	PodRangeSteps string
	// KubeProxyMode (iptables, nftables, ipvs; "" unknown) and KubeProxyClusterCIDR, from
	// kube-proxy's flags where its pods show them, else from its ConfigMap.
	KubeProxyMode, KubeProxyClusterCIDR string
	// DNSService is the cluster DNS Service (kube-system/kube-dns) and DNSServiceIPs its ClusterIPs.
	DNSService    string
	DNSServiceIPs []string
	// Corefile says whether kube-system/coredns's Corefile was read. CoreDNSTTL is its
	// kubernetes plugin's ttl (the plugin's default 5 where the line is absent; 0: no such
	// plugin) and CoreDNSCacheTTL the cache plugin's longest TTL for cluster.local answers (its
	// default 3600 where no number is given; 0: not cached, as kubeadm's Corefile since 1.32).
	Corefile                    bool
	CoreDNSTTL, CoreDNSCacheTTL int
	// NodeLocalDNS says whether NodeLocal DNSCache runs, and NodeLocalCacheTTL its cache's
	// longest TTL for the cluster zone (0: not found).
	NodeLocalDNS      bool
	NodeLocalCacheTTL int
	// ServiceCIDRGate says whether kube-controller-manager runs its ServiceCIDR controller (the
	// MultiCIDRServiceAllocator gate: always on from 1.33); nil when its flags are not visible.
	ServiceCIDRGate *bool
	// Unread are the reads the credentials were refused.
	Unread []string
}

// CoreDNSConfigMap holds the Corefile of kubeadm's and kOps' CoreDNS.
const CoreDNSConfigMap = "coredns"

// factsChecks are the checks whose reads the facts need (pods, DaemonSets, kube-system's
// ConfigMaps, the Tigera operator's Installations, Calico's pools).
var factsChecks = []string{CheckCNIIPAM, CheckServiceCIDRGate, CheckKubeProxyCIDR}

// ReadFacts reads the cluster's facts: the preflight's reads for those checks, the ServiceCIDRs
// and the DNS Service.
func ReadFacts(ctx context.Context, c *k8sops.Client) (Facts, error) {
	s, err := ReadPreflight(ctx, c, factsChecks)
	var calicoGroup k8sops.CalicoGroupError
	switch {
	case errors.As(err, &calicoGroup):
		// The configured calico_api_group serves no pools (k8scidr_cluster_info warns of it):
		// Calico is read last, so everything else is there.
		s.Unread = append(s.Unread, PreflightFinding{Object: ObjectRef{Kind: "ippools." + calicoGroup.Group}})
	case err != nil:
		return Facts{}, err
	}
	scs, err := servedServiceCIDRs(ctx, c)
	if err := s.tolerate("servicecidrs.networking.k8s.io", []string{"service_cidrs"}, err); err != nil {
		return Facts{}, err
	}
	s.ServiceCIDRs = scs
	f := FactsOf(s)
	switch svc, err := c.Kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		f.Unread = append(f.Unread, "service kube-system/kube-dns")
	case err != nil:
		return f, fmt.Errorf("reading kube-system/kube-dns: %w", err)
	default:
		f.DNSService, f.DNSServiceIPs = "kube-system/kube-dns", svc.Spec.ClusterIPs
	}
	return f, nil
}

// FactsOf derives the facts from what the preflight read.
func FactsOf(s PreflightSnapshot) Facts {
	f := Facts{ServiceCIDRs: s.ServiceCIDRs, Pools: s.Pools}
	for _, u := range s.Unread {
		f.Unread = append(f.Unread, u.Object.Kind)
	}
	for _, p := range controlPlanePods(s, "kube-apiserver") {
		f.APIServerServiceRanges = appendDistinct(f.APIServerServiceRanges, k8sops.FlagValues(p, "service-cluster-ip-range")...)
	}
	kcm := controlPlanePods(s, "kube-controller-manager")
	for _, p := range kcm {
		f.ClusterCIDRs = appendDistinct(f.ClusterCIDRs, k8sops.FlagValues(p, "cluster-cidr")...)
	}
	switch {
	case s.ServerMinor >= 33:
		f.ServiceCIDRGate = ptr.To(true)
	case len(kcm) > 0:
		f.ServiceCIDRGate = ptr.To(!slices.ContainsFunc(kcm, func(p *corev1.Pod) bool { return !serviceCIDRGateOn(p) }))
	}
	if cnis := k8sops.KnownCNIs(s.DaemonSets); len(cnis) > 0 {
		f.CNI = &cnis[0]
	}
	f.IPAM = ipamOf(s)
	f.PodRangeSteps = podRangeSteps(s, f.IPAM)
	f.KubeProxyMode, f.KubeProxyClusterCIDR = kubeProxySettings(s)
	if cm := s.ConfigMaps[CoreDNSConfigMap]; cm != nil {
		f.Corefile = true
		f.CoreDNSTTL, f.CoreDNSCacheTTL = corefileTTLs(cm.Data["Corefile"])
	}
	f.NodeLocalDNS = slices.ContainsFunc(s.DaemonSets, isNodeLocalDNS)
	if cm := s.ConfigMaps["node-local-dns"]; cm != nil {
		_, f.NodeLocalCacheTTL = corefileTTLs(cm.Data["Corefile"])
	}
	return f
}

// podRangeSteps is why the pod stage cannot move the pods' addresses and what moves them instead,
// or "" where Calico's IPAM hands them out: Calico's pools served, no other network plugin
// running, and its CNI configuration's IPAM calico-ipam or not shown (checkCNIIPAM's rules).
func podRangeSteps(s PreflightSnapshot, ipam string) string {
	cnis := k8sops.KnownCNIs(s.DaemonSets)
	switch {
	case ipam != "" && ipam != "calico-ipam":
		return fmt.Sprintf("Calico's CNI runs with IPAM %s: each pod takes its address from its node's podCIDR, not from "+
			"Calico's IP pools, so disabling a pool and rolling the pods moves none. %s With host-local IPAM: %s",
			ipam, k8sops.PodStageSupport, k8sops.NodeRangeSteps)
	case !k8sops.RunsCalico(cnis) && (len(cnis) > 0 || !s.CalicoServed):
		detail, fix := k8sops.PodStageRefusal(cnis)
		return detail + " " + fix
	}
	return ""
}

// appendDistinct appends the values not yet in dst.
func appendDistinct(dst []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(dst, v) {
			dst = append(dst, v)
		}
	}
	return dst
}

// serviceCIDRGateOn says whether a control-plane pod runs with MultiCIDRServiceAllocator=true.
func serviceCIDRGateOn(p *corev1.Pod) bool {
	gates := strings.Join(k8sops.FlagValues(p, "feature-gates"), ",")
	return slices.Contains(strings.Split(strings.ReplaceAll(gates, " ", ""), ","), "MultiCIDRServiceAllocator=true")
}

// ipamEntry is one ipam object of a CNI configuration.
type ipamEntry struct {
	Type       string
	UsePodCIDR bool
}

// cniConfigIPAMs are the ipam objects of calico-config's CNI configuration template.
func cniConfigIPAMs(cm *corev1.ConfigMap) []ipamEntry {
	var out []ipamEntry
	for _, m := range ipamInCNI.FindAllStringSubmatch(cm.Data["cni_network_config"], -1) {
		e := ipamEntry{UsePodCIDR: strings.Contains(m[1], "usePodCidr")}
		if t := ipamTypeInCNI.FindStringSubmatch(m[1]); t != nil {
			e.Type = t[1]
		}
		out = append(out, e)
	}
	return out
}

// ipamOf is who hands out pod addresses where the CNI's configuration shows it: calico-config's
// ipam type, or the Tigera operator's Installation (Calico: calico-ipam, HostLocal: host-local).
func ipamOf(s PreflightSnapshot) string {
	if cm := s.ConfigMaps["calico-config"]; cm != nil {
		if entries := cniConfigIPAMs(cm); len(entries) > 0 {
			if entries[0].UsePodCIDR {
				return entries[0].Type + " (usePodCidr)"
			}
			return entries[0].Type
		}
	}
	for _, in := range s.Installations {
		switch ipam, _, _ := unstructured.NestedString(in.Object, "spec", "cni", "ipam", "type"); ipam {
		case "Calico":
			return "calico-ipam"
		case "HostLocal":
			return "host-local"
		case "":
		default:
			return ipam
		}
	}
	return ""
}

// kubeProxySettings are kube-proxy's mode and clusterCIDR: a flag on its pods (kOps runs it as
// a static pod with flags) wins over its ConfigMap's configuration (kubeadm's DaemonSet).
func kubeProxySettings(s PreflightSnapshot) (mode, clusterCIDR string) {
	if cm := s.ConfigMaps["kube-proxy"]; cm != nil {
		var kc struct {
			Mode        string `json:"mode"`
			ClusterCIDR string `json:"clusterCIDR"`
		}
		for _, key := range []string{"config.conf", "config"} {
			if cm.Data[key] != "" && yaml.Unmarshal([]byte(cm.Data[key]), &kc) == nil {
				mode, clusterCIDR = kc.Mode, kc.ClusterCIDR
				break
			}
		}
	}
	for _, p := range controlPlanePods(s, "kube-proxy") {
		if v := k8sops.FlagValues(p, "proxy-mode"); len(v) > 0 {
			mode = v[0]
		}
		if v := k8sops.FlagValues(p, "cluster-cidr"); len(v) > 0 {
			clusterCIDR = v[0]
		}
	}
	return mode, clusterCIDR
}

// corefileDirective is one line of a Corefile with the block it opens.
type corefileDirective struct {
	args  []string
	block []*corefileDirective
}

// parseCorefile reads a Corefile's server blocks and their directives (comments dropped).
func parseCorefile(text string) []*corefileDirective {
	root := &corefileDirective{}
	stack := []*corefileDirective{root}
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.NewReplacer("{", " { ", "}", " } ").Replace(line)
		var words []string
		for _, w := range strings.Fields(line) {
			switch w {
			case "{":
				d := &corefileDirective{args: words}
				top := stack[len(stack)-1]
				top.block = append(top.block, d)
				stack, words = append(stack, d), nil
			case "}":
				if len(words) > 0 {
					top := stack[len(stack)-1]
					top.block = append(top.block, &corefileDirective{args: words})
					words = nil
				}
				if len(stack) > 1 {
					stack = stack[:len(stack)-1]
				}
			default:
				words = append(words, w)
			}
		}
		if len(words) > 0 {
			top := stack[len(stack)-1]
			top.block = append(top.block, &corefileDirective{args: words})
		}
	}
	return root.block
}

// CoreDNS's defaults: the kubernetes plugin's ttl, and the cache plugin's longest TTL.
const (
	coreDNSDefaultTTL      = 5
	coreDNSDefaultCacheTTL = 3600
)

// corefileTTLs are the kubernetes plugin's ttl and the cache plugin's longest TTL for
// cluster.local answers, each of the first server block that has the plugin (0: no such plugin,
// or the cache disabled for cluster.local's answers).
func corefileTTLs(text string) (kubernetesTTL, cacheTTL int) {
	cacheSeen, uncached := false, false
	for _, server := range parseCorefile(text) {
		for _, d := range server.block {
			switch {
			case d.args[0] == "kubernetes" && kubernetesTTL == 0:
				kubernetesTTL = coreDNSDefaultTTL
				for _, o := range d.block {
					if o.args[0] == "ttl" && len(o.args) > 1 {
						kubernetesTTL = atoiOr(o.args[1], kubernetesTTL)
					}
				}
			case d.args[0] == "cache" && !cacheSeen:
				cacheSeen, cacheTTL = true, coreDNSDefaultCacheTTL
				if len(d.args) > 1 {
					cacheTTL = atoiOr(d.args[1], cacheTTL)
				}
				for _, o := range d.block {
					switch {
					case o.args[0] == "success" && len(o.args) > 2: // success CAPACITY [TTL [MINTTL]]
						cacheTTL = atoiOr(o.args[2], cacheTTL)
					case o.args[0] == "disable" && len(o.args) > 1 && o.args[1] == "success" && // disable success [ZONES...]
						(len(o.args) == 2 || slices.ContainsFunc(o.args[2:], func(z string) bool { return strings.TrimSuffix(z, ".") == "cluster.local" })):
						uncached = true
					}
				}
			}
		}
	}
	if uncached {
		cacheTTL = 0
	}
	return kubernetesTTL, cacheTTL
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
