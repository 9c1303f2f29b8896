// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// CNI is a network plugin found running: its name, the DaemonSet that runs it, and whether its
// pods' addresses come from Calico's IP pools, which the pod stage moves (only Calico's own
// node agent, and then only with calico-ipam, which the preflight check reads apart).
type CNI struct {
	Name                 string
	Namespace, DaemonSet string
	CalicoIPAM           bool
	// Instead says how that CNI's pod range is changed, since the pod stage cannot.
	Instead string
}

// PodStageSupport says in a sentence which CNI the pod stage works with, for every message
// that refuses another.
const PodStageSupport = "The pod stage (k8scidr_calico_ippool, and k8scidr_workload_roll over the old pool) moves pod " +
	"addresses only where Calico's IPAM hands them out (Calico's CNI plugin with ipam type calico-ipam); the Service stages " +
	"work with any CNI."

// NodeRangeSteps is the way for CNIs that give each pod an address from its node's podCIDR.
const NodeRangeSteps = "pods take addresses from their node's podCIDR: set kube-controller-manager's --cluster-cidr (kOps: " +
	"podCIDR and nonMasqueradeCIDR) to the new range and replace the nodes, which get podCIDRs in it."

// knownCNIs are the DaemonSet names of the network plugins people run, as their own manifests,
// Helm charts and managed add-ons name them.
var knownCNIs = map[string]CNI{
	"calico-node": {Name: "Calico", CalicoIPAM: true},
	"canal": {Name: "Canal (Calico policy on Flannel networking)",
		Instead: "Canal's Flannel networking gives each pod an address from its node's podCIDR (host-local IPAM), so " + NodeRangeSteps},
	"cilium": {Name: "Cilium", Instead: "Cilium's IPAM decides pod addresses: in cluster-pool mode add the new range to " +
		"clusterPoolIPv4PodCIDRList and restart the pods (node by node), in kubernetes mode " + NodeRangeSteps},
	"aws-node": {Name: "the AWS VPC CNI", Instead: "pods take addresses from their nodes' VPC subnets, so there is no pod range " +
		"to move in the cluster: move the subnets (custom networking's ENIConfig) and replace the nodes."},
	"kube-flannel-ds": {Name: "Flannel", Instead: NodeRangeSteps},
	"kube-flannel":    {Name: "Flannel", Instead: NodeRangeSteps},
	"weave-net": {Name: "Weave Net", Instead: "Weave Net allocates pod addresses from its IPALLOC_RANGE, which cannot change " +
		"on a running cluster: replace the network."},
	"kube-router":  {Name: "kube-router", Instead: NodeRangeSteps},
	"antrea-agent": {Name: "Antrea", Instead: NodeRangeSteps},
	"ovnkube-node": {Name: "OVN-Kubernetes", Instead: "OVN-Kubernetes hands out pod subnets from its cluster-subnets setting: " +
		"change it and replace the nodes."},
}

// KnownCNIList names every network plugin KnownCNIs recognises, for a message that found none.
func KnownCNIList() string {
	var names []string
	for _, c := range knownCNIs {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// KnownCNIs are the network plugins the DaemonSets run, in the DaemonSets' order.
func KnownCNIs(daemonSets []appsv1.DaemonSet) []CNI {
	var out []CNI
	for _, d := range daemonSets {
		if c, ok := knownCNIs[d.Name]; ok {
			c.Namespace, c.DaemonSet = d.Namespace, d.Name
			out = append(out, c)
		}
	}
	return out
}

// RunsCalico says whether one of the CNIs is Calico's node agent.
func RunsCalico(cnis []CNI) bool {
	return slices.ContainsFunc(cnis, func(c CNI) bool { return c.CalicoIPAM })
}

// String is the CNI and where it runs: "Cilium (DaemonSet kube-system/cilium)".
func (c CNI) String() string {
	return fmt.Sprintf("%s (DaemonSet %s/%s)", c.Name, c.Namespace, c.DaemonSet)
}

// FindCNIs lists the cluster's DaemonSets and returns the network plugins among them.
func FindCNIs(ctx context.Context, c *Client) ([]CNI, error) {
	var ds []appsv1.DaemonSet
	err := EachItem(ctx, ListPages(c.Kube.AppsV1().DaemonSets("").List), func(d *appsv1.DaemonSet) error {
		ds = append(ds, *d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing DaemonSets to find the CNI: %w", err)
	}
	return KnownCNIs(ds), nil
}

// PodStageRefusal says why the pod stage can do nothing on a cluster whose CNIs (those found
// running) do not include Calico, and what to do instead: the preflight finding's text and the
// pool resource's error are this one.
func PodStageRefusal(cnis []CNI) (detail, fix string) {
	var others []string
	instead := ""
	for _, c := range cnis {
		if !c.CalicoIPAM {
			others = append(others, c.String())
			if instead == "" {
				instead = fmt.Sprintf(" With %s: %s", c.Name, c.Instead)
			}
		}
	}
	if len(others) > 0 {
		return fmt.Sprintf("The cluster runs %s, not Calico: its pods' addresses do not come from Calico's IP pools, so "+
			"disabling a pool and rolling the pods moves none.", strings.Join(others, " and ")), PodStageSupport + instead
	}
	return "No network plugin this provider knows runs here (no DaemonSet of " + KnownCNIList() + "): kubenet (kOps' and " +
			"GKE's route-based networking) or a CNI installed on the hosts, whose pods take addresses from their node's podCIDR " +
			"or its own configuration, not from Calico's IP pools.",
		PodStageSupport + " With kubenet or host-local IPAM: " + NodeRangeSteps
}
