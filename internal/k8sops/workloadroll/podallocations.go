// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Pod addresses by range, and node podCIDRs against a cluster CIDR: where the pods stand
// before and after a pool move, and the kubeadm trap of seed 003.
package workloadroll

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// PodAllocations is the answer of ListPodAllocations.
type PodAllocations struct {
	Ranges  []RangePods
	Outside map[string]int // workload key (bare pods "namespace/pod/name") → pods outside every range
	Nodes   []NodePodCIDRs
}

// RangePods counts the pods with an address in a range.
type RangePods struct {
	CIDR string
	Pods int
}

// NodePodCIDRs is a node's spec.podCIDRs and, per range, whether it lies inside the cluster CIDR
// (nil when none was given).
type NodePodCIDRs struct {
	Name     string
	PodCIDRs []string
	Inside   []*bool
}

// ListPodAllocations counts pod addresses (hostNetwork pods excluded) per range of cidrs and
// groups those outside every range by workload; it reads every node's podCIDRs and checks them
// against clusterCIDRs. Paginated lists of pods, ReplicaSets and nodes.
func ListPodAllocations(ctx context.Context, c *k8sops.Client, cidrs, clusterCIDRs []netip.Prefix) (*PodAllocations, error) {
	out := &PodAllocations{Outside: map[string]int{}}
	var nodes []corev1.Node
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Nodes().List), func(n *corev1.Node) error { nodes = append(nodes, *n); return nil })
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		np := NodePodCIDRs{Name: n.Name, PodCIDRs: n.Spec.PodCIDRs}
		if len(np.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
			np.PodCIDRs = []string{n.Spec.PodCIDR}
		}
		for _, s := range np.PodCIDRs {
			var inside *bool
			if len(clusterCIDRs) > 0 {
				p, err := netip.ParsePrefix(s)
				in := err == nil && slices.ContainsFunc(clusterCIDRs, func(cc netip.Prefix) bool { return cc.Bits() <= p.Bits() && cc.Contains(p.Addr()) })
				inside = &in
			}
			np.Inside = append(np.Inside, inside)
		}
		out.Nodes = append(out.Nodes, np)
	}
	counts := make([]int, len(cidrs))
	pods, err := c.PlanPods(ctx) // a data source's: the plan's one pod list
	if err != nil {
		return nil, err
	}
	var rss []appsv1.ReplicaSet
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.AppsV1().ReplicaSets("").List), func(rs *appsv1.ReplicaSet) error {
		rss = append(rss, appsv1.ReplicaSet{ObjectMeta: metaForPlan(&rs.ObjectMeta)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	rsOwner := replicaSetOwners(rss)
	for _, pod := range pods {
		if pod.Spec.HostNetwork || pod.DeletionTimestamp != nil || len(pod.Status.PodIPs) == 0 {
			continue
		}
		inSome := false
		for _, s := range pod.Status.PodIPs {
			ip, err := netip.ParseAddr(s.IP)
			if err != nil {
				continue
			}
			for i, r := range cidrs {
				if r.Contains(ip) {
					counts[i]++
					inSome = true
				}
			}
		}
		if !inSome {
			key, _ := podWorkload(&pod, rsOwner)
			if key == "" {
				key = pod.Namespace + "/pod/" + pod.Name
				if ref := metav1.GetControllerOf(&pod); ref != nil {
					key = pod.Namespace + "/" + strings.ToLower(ref.Kind) + "/" + ref.Name
				}
			}
			out.Outside[key]++
		}
	}
	for i, r := range cidrs {
		out.Ranges = append(out.Ranges, RangePods{CIDR: r.String(), Pods: counts[i]})
	}
	return out, nil
}
