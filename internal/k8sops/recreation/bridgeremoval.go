// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Removing the DNS bridge safely. A pod's resolv.conf is written once, when the pod starts, with
// the clusterDNS its node's kubelet had then: a pod started before the DNS move (the bridge's
// creation), or before the kubelets were given the new clusterDNS, resolves through the bridge
// until it ends. Deleting the bridge under it takes its DNS away.
package recreation

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// CheckBridgeRemoval says why deleting the DNS bridges (of every migration that moved the
// cluster DNS Service) would take DNS from running pods, as findings on dns_bridge, and what
// could not be checked, as notes. The bound is the later of the newest bridge's creation and the
// last write of kubeadm's kube-system/kubelet-config: a pod that uses the cluster resolver and
// started before it may have a bridge's IP in its resolv.conf. kubelet-config naming a bridge
// IP, or any IP but dnsIPs (the cluster DNS Service's as they are, which may differ from those
// planned when another client took one during the apply) and NodeLocal DNSCache's link-local
// address, refuses the removal outright: pods starting now get it. Without a kubelet-config to
// read, a Ready node registered before the bound refuses it (nodesRegisteredBy).
func CheckBridgeRemoval(ctx context.Context, c *k8sops.Client, bridges []*corev1.Service, dnsIPs []string) (findings []k8sops.Finding, notes []string, err error) {
	var ips []string
	var bound time.Time
	for _, b := range bridges {
		ips = append(ips, b.Spec.ClusterIPs...)
		if b.CreationTimestamp.After(bound) {
			bound = b.CreationTimestamp.Time
		}
	}
	boundWhy := "the DNS move (the bridge's creation)"
	dns, written, unread, err := readKubeletConfig(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	elsewhere := slices.DeleteFunc(slices.Clone(dns), func(ip string) bool {
		a, err := netip.ParseAddr(ip)
		return err != nil || a.IsLinkLocalUnicast() || containsIP(dnsIPs, ip) || containsIP(ips, ip)
	})
	switch {
	case unread != "" || dns == nil:
		// Where the kubelets' clusterDNS cannot be read, a node registered before the DNS move
		// may still run a kubelet that hands new pods the bridge's IP.
		why := fmt.Sprintf("the cluster has no kube-system/%s (not kubeadm: kOps, EKS, GKE)", KubeletConfigMap)
		if unread != "" {
			why = fmt.Sprintf("kube-system/%s could not be read (%s)", KubeletConfigMap, unread)
		}
		older, err := nodesRegisteredBy(ctx, c, bound)
		if err != nil {
			return nil, nil, err
		}
		if len(older) > 0 { // the pods are judged too: both are for the reviewer to see
			findings = append(findings, k8sops.Finding{Path: k8sops.At("dns_bridge"), Summary: "Nodes From Before the DNS Move",
				Detail: fmt.Sprintf("%s, so what clusterDNS each kubelet hands new pods cannot be read, and %d Ready nodes registered "+
					"before the DNS move (%s) may still run a kubelet configured with the bridge's IP %s: every pod that starts "+
					"on them would lose DNS once the bridge is deleted: %s. Set the kubelets' clusterDNS to the DNS Service's new "+
					"IP (dns_service_ips) and replace those nodes (kOps: kops update cluster --yes, then kops rolling-update "+
					"cluster --yes; EKS and GKE: roll the node groups), restart the pods started before, then apply again; or "+
					"set dns_bridge_force_removal = true once every kubelet names the new IP.", why, len(older),
					bound.UTC().Format(time.RFC3339), strings.Join(ips, ", "), k8sops.FirstOf(older))})
			break
		}
		notes = append(notes, fmt.Sprintf("%s: every Ready node registered after the DNS move (%s), so its kubelet was "+
			"configured after it; make sure that configuration names the DNS Service's new IP, not the bridge's (%s).",
			why, bound.UTC().Format(time.RFC3339), strings.Join(ips, ", ")))
	case slices.ContainsFunc(dns, func(ip string) bool { return containsIP(ips, ip) }):
		return []k8sops.Finding{{Path: k8sops.At("dns_bridge"), Summary: "Kubelets Still Use the Bridge",
			Detail: fmt.Sprintf("kube-system/%s gives the kubelets clusterDNS %s, the bridge's IP: every pod that starts now "+
				"resolves through the bridge. Set clusterDNS to the DNS Service's new IP (dns_service_ips), roll it out to "+
				"every kubelet (kubeadm: kubeadm upgrade node phase kubelet-config, then restart the kubelet), restart "+
				"the pods started before, then apply again.", KubeletConfigMap, strings.Join(dns, ", "))}}, notes, nil
	case len(dnsIPs) > 0 && len(elsewhere) > 0:
		return []k8sops.Finding{{Path: k8sops.At("dns_bridge"), Summary: "Kubelets Do Not Name the Cluster DNS Service",
			Detail: fmt.Sprintf("kube-system/%s gives the kubelets clusterDNS %s, which is not the cluster DNS Service's IP %s (if "+
				"another client took the planned IP during the apply, the DNS Service got another one: dns_service_ips of "+
				"k8scidr_service_recreation says which). Pods starting now cannot resolve through it, and those started "+
				"before still need the bridge %s. Set clusterDNS to %s, roll it out to every kubelet, restart the pods "+
				"started before, then apply again; or set dns_bridge_force_removal = true if clusterDNS is meant to name "+
				"another resolver.", KubeletConfigMap, strings.Join(elsewhere, ", "), strings.Join(dnsIPs, ", "),
				strings.Join(ips, ", "), strings.Join(dnsIPs, ", "))}}, notes, nil
	case !written.Before(bound): // timestamps have seconds: in the same second, the write may be the later
		bound, boundWhy = written, "the last change of kube-system/"+KubeletConfigMap
		fallthrough
	default:
		notes = append(notes, fmt.Sprintf("kube-system/%s gives the kubelets clusterDNS %s; whether each node's kubelet "+
			"has been restarted with it cannot be read without nodes/proxy, so pods are judged by %s (%s): a pod "+
			"started since on a kubelet not yet restarted would still resolve through the bridge.",
			KubeletConfigMap, strings.Join(dns, ", "), boundWhy, bound.UTC().Format(time.RFC3339)))
	}
	var users, pinned []string
	nodes := map[string]bool{}
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error {
		// A pod no kubelet has started yet gets its resolv.conf when it starts, from its node's
		// kubelet as it is then.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Status.StartTime == nil {
			return nil
		}
		name := fmt.Sprintf("%s/%s (node %s)", p.Namespace, p.Name, orDash(p.Spec.NodeName))
		switch {
		case namesIP(p, ips): // whenever it started
			pinned = append(pinned, name)
		case resolvesThrough(p) && p.Status.StartTime.Time.Before(bound):
			users = append(users, name)
			nodes[p.Spec.NodeName] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	if len(pinned) > 0 {
		findings = append(findings, k8sops.Finding{Path: k8sops.At("dns_bridge"), Summary: "Pods Name the DNS Bridge",
			Detail: fmt.Sprintf("%d running pods name the bridge's IP %s in their dnsConfig.nameservers: %s. Deleting the bridge "+
				"would take their DNS away whenever they started. Change their nameservers to the DNS Service's new IP "+
				"(dns_service_ips), then apply again; or set dns_bridge_force_removal = true.",
				len(pinned), strings.Join(ips, ", "), k8sops.FirstOf(pinned))})
	}
	if len(users) > 0 {
		findings = append(findings, k8sops.Finding{Path: k8sops.At("dns_bridge"), Summary: "DNS Bridge Still in Use",
			Detail: fmt.Sprintf("%d running pods on %d nodes use the cluster resolver and started before %s (%s), so their "+
				"resolv.conf may name the bridge's IP %s: %s. Deleting the bridge now would take their DNS away. Restart "+
				"them first (k8scidr_workload_roll with started_before = the data source's dns_moved_at; bare pods are not "+
				"restarted by it), then apply again; or set dns_bridge_force_removal = true if you know they resolve no names "+
				"through it.", len(users), len(nodes), boundWhy, bound.UTC().Format(time.RFC3339), strings.Join(ips, ", "),
				k8sops.FirstOf(users))})
	}
	return findings, notes, nil
}

// nodesRegisteredBy names the Ready nodes created no later than bound. Both times are the
// apiserver's (creation timestamps), never a kubelet's: a node's clock may be minutes off. A
// node registered in the same second as bound counts as before it.
func nodesRegisteredBy(ctx context.Context, c *k8sops.Client, bound time.Time) ([]string, error) {
	var out []string
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Nodes().List), func(n *corev1.Node) error {
		if n.CreationTimestamp.After(bound) || n.DeletionTimestamp != nil {
			return nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				out = append(out, n.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// DNSBridges are the DNS bridges beside the cluster DNS Service dnsService ("" for
// kube-system) in the snapshot: one per migration that moved it.
func (s Snapshot) DNSBridges(dnsService string) []*corev1.Service {
	ns, _, ok := strings.Cut(dnsService, "/")
	if !ok {
		ns = "kube-system"
	}
	return dnsBridgesIn(s.Services, ns)
}

// ServiceIPs are the ClusterIPs of Service key (namespace/name) in the snapshot, nil when it is
// not there.
func (s Snapshot) ServiceIPs(key string) []string {
	if svc := s.service(key); svc != nil {
		return ipStrings(k8sops.ClusterIPs(svc))
	}
	return nil
}

// service is Service key (namespace/name) in the snapshot, nil when it is not there.
func (s Snapshot) service(key string) *corev1.Service {
	for i := range s.Services {
		if k8sops.SvcKey(&s.Services[i]) == key {
			return &s.Services[i]
		}
	}
	return nil
}

// resolvesThrough reports whether pod p sends its DNS queries to the cluster resolver (the
// kubelet's clusterDNS). Default uses the node's resolver, None only what dnsConfig names.
func resolvesThrough(p *corev1.Pod) bool {
	switch p.Spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet:
		return true
	case corev1.DNSClusterFirst, "":
		return !p.Spec.HostNetwork // host-network pods fall back to the node's resolver
	}
	return false
}

// namesIP reports whether pod p's dnsConfig names one of ips as a nameserver.
func namesIP(p *corev1.Pod, ips []string) bool {
	return p.Spec.DNSConfig != nil && slices.ContainsFunc(p.Spec.DNSConfig.Nameservers, func(ns string) bool { return containsIP(ips, ns) })
}

// containsIP reports whether ips holds ip, compared as addresses (an IPv6 address has many spellings).
func containsIP(ips []string, ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ips, func(s string) bool { b, err := netip.ParseAddr(s); return err == nil && a == b })
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
