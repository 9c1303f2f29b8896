// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico IPPool validation as calicoctl does it: crd.projectcalico.org/v1 has no server-side
// validation, so the provider must refuse what Calico itself would.
package calico

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Calico encapsulation modes (ipipMode, vxlanMode).
const (
	EncapNever       = "Never"
	EncapAlways      = "Always"
	EncapCrossSubnet = "CrossSubnet"
)

// EncapModes lists the valid ipipMode and vxlanMode values.
var EncapModes = []string{EncapNever, EncapAlways, EncapCrossSubnet}

// IPPoolSpec is the part of an IPPool that validation looks at.
type IPPoolSpec struct {
	Name      string
	CIDR      string
	BlockSize int // 0: the family's default
	IPIPMode  string
	VXLANMode string
	// AllowedUses as configured; nil: unset.
	AllowedUses []string
}

// Default block sizes and their allowed ranges (calicoctl's).
const (
	DefaultBlockSize4 = 26
	DefaultBlockSize6 = 122
)

// DefaultBlockSize is the family's default block size for cidr, or 0 when cidr is invalid.
func DefaultBlockSize(cidr string) int {
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil:
		return 0
	case p.Addr().Is4():
		return DefaultBlockSize4
	default:
		return DefaultBlockSize6
	}
}

var linkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// ValidateIPPool checks a pool as calicoctl would, and against the other pools for overlap.
// Findings name the attribute: cidr, block_size, ipip_mode, vxlan_mode or allowed_uses.
func ValidateIPPool(pool IPPoolSpec, others []IPPoolSpec) []k8sops.Finding {
	var out []k8sops.Finding
	add := func(attr, summary, format string, args ...any) {
		out = append(out, k8sops.Finding{Path: k8sops.At(attr), Summary: summary, Detail: fmt.Sprintf(format, args...)})
	}
	for _, m := range []struct{ attr, value string }{{"ipip_mode", pool.IPIPMode}, {"vxlan_mode", pool.VXLANMode}} {
		if m.value != "" && !slices.Contains(EncapModes, m.value) {
			add(m.attr, "Unknown Encapsulation Mode", "%q: use one of %v.", m.value, EncapModes)
		}
	}
	if on(pool.IPIPMode) && on(pool.VXLANMode) {
		add("vxlan_mode", "Both Encapsulations Enabled", "ipip_mode = %s and vxlan_mode = %s: Calico allows one encapsulation "+
			"per pool. Set the other to Never.", pool.IPIPMode, pool.VXLANMode)
	}
	lb := string(apiv3.IPPoolAllowedUseLoadBalancer)
	if slices.Contains(pool.AllowedUses, lb) {
		if others := slices.DeleteFunc(slices.Clone(pool.AllowedUses), func(u string) bool { return u == lb }); len(others) > 0 {
			add("allowed_uses", "LoadBalancer Pool Shared With Other Uses", "allowed_uses = %v: Calico refuses a pool that gives "+
				"addresses to LoadBalancer Services and also to %v. Use one pool for LoadBalancer and another for the rest.",
				pool.AllowedUses, others)
		}
	}
	p, err := netip.ParsePrefix(pool.CIDR)
	if err != nil {
		add("cidr", "Invalid CIDR", "%q is not a CIDR: %v.", pool.CIDR, err)
		return out
	}
	if p.Masked() != p {
		add("cidr", "CIDR Has Host Bits Set", "%s has host bits set: use %s.", pool.CIDR, p.Masked())
		return out
	}
	if p.Addr().Is6() && on(pool.IPIPMode) {
		add("ipip_mode", "IPIP Is IPv4 Only", "IPIP cannot carry the IPv6 pool %s: use vxlan_mode, or Never.", p)
	}
	for _, ll := range linkLocal {
		if ll.Overlaps(p) {
			add("cidr", "CIDR Overlaps Link-Local Addresses", "%s overlaps %s, which Calico refuses for pools.", p, ll)
		}
	}
	size := pool.BlockSize
	if size == 0 {
		size = DefaultBlockSize(pool.CIDR)
	}
	lo, hi := 20, 32
	if p.Addr().Is6() {
		lo, hi = 116, 128
	}
	switch {
	case size < lo || size > hi:
		add("block_size", "Block Size Out of Range", "%d: an %s pool's block size is %d to %d.", size, k8sops.Family(p.Addr()), lo, hi)
	case size < p.Bits():
		add("block_size", "Block Larger Than the Pool", "a /%d block does not fit in the pool %s: use a block size of at least %d, "+
			"or a larger pool.", size, p, p.Bits())
	}
	for _, o := range others {
		if o.Name == pool.Name {
			continue
		}
		// Another pool's CIDR is read as leniently as k8sops.ParseCIDR reads any: an overlap
		// hidden by stray spaces or host bits is still an overlap.
		if q, err := netip.ParsePrefix(strings.TrimSpace(o.CIDR)); err == nil && q.Masked().Overlaps(p) {
			add("cidr", "CIDR Overlaps Another Pool", "%s overlaps IPPool %s (%s). Pools must not overlap: choose another range.", p, o.Name, q)
		}
	}
	return out
}

func on(mode string) bool { return mode == EncapAlways || mode == EncapCrossSubnet }

// poolFieldAttrs names the provider attribute of each spec field only some Calico releases know.
var poolFieldAttrs = map[string]string{FieldAllowedUses: "allowed_uses", FieldAssignmentMode: "assignment_mode"}

// UnsupportedPoolFields reports each of the spec fields set (FieldAllowedUses,
// FieldAssignmentMode) that the installed IPPool CRD lacks: the apiserver would silently drop
// it, and every plan would show it again.
func (a *CalicoAPI) UnsupportedPoolFields(set []string) []k8sops.Finding {
	var out []k8sops.Finding
	for _, field := range set {
		if a.Supports(field) {
			continue
		}
		attr := poolFieldAttrs[field]
		out = append(out, k8sops.Finding{Path: k8sops.At(attr), Summary: "Field Not in the Installed Calico CRD",
			Detail: fmt.Sprintf("The installed IPPool CRD (%s) has no spec.%s, so the apiserver would silently drop it and every plan "+
				"would show it again. Remove %s from the configuration, or upgrade Calico's CRDs.", a.Group, field, attr)})
	}
	return out
}

// CheckPoolAmongOthers checks a pool's settings against the cluster's other pools: Calico's own
// checks (errs), and, for an enabled pool, encapsulation or NAT that differ from the other pools
// of its family (warnings): pods that move there use this pool's.
func CheckPoolAmongOthers(name string, s PoolSettings, pools []IPPool) (errs, warnings []k8sops.Finding) {
	var others []IPPoolSpec
	for _, p := range pools {
		others = append(others, IPPoolSpec{Name: p.Name, CIDR: p.Spec.CIDR}) // ValidateIPPool skips name
	}
	errs = ValidateIPPool(IPPoolSpec{Name: name, CIDR: s.CIDR, BlockSize: s.BlockSize, IPIPMode: s.IPIPMode, VXLANMode: s.VXLANMode,
		AllowedUses: s.AllowedUses}, others)
	if s.Disabled {
		return errs, nil
	}
	if diffs := PoolDifferences(s, name, pools); len(diffs) > 0 {
		warnings = append(warnings, k8sops.Finding{Path: k8sops.At("ipip_mode"), Summary: "Encapsulation or NAT Differs From the Other Pools",
			Detail: "This pool's settings differ from the cluster's other pools: " + strings.Join(diffs, "; ") + ". Pods that move here " +
				"use this pool's encapsulation and NAT: in an IPIP or VXLAN cluster a pool with Never breaks cross-node " +
				"traffic for every moved pod unless the nodes route the pool natively. Match the other pools unless that is intended."})
	}
	return errs, warnings
}

// CheckPoolsLeft says what taking pool name (cidr, nodeSelector) out of service, by disabling
// or deleting it, leaves for new pods of its address family: an error when no other enabled
// pool of the family gives workload addresses (no pod of that family could start), or when a
// node this pool selects is selected by none of them (no pod could start there). others are the
// cluster's other pools and those planned enabled in the same run; nodes reads the labels of the
// cluster's nodes by name (NodeLabels), which Calico (on the Kubernetes datastore) evaluates
// node selectors against: called only when a pool left selects some nodes, not all. When they
// cannot be read, node coverage is only warned of.
func CheckPoolsLeft(name, cidr, nodeSelector string, others []IPPool, nodes func() (map[string]map[string]string, error)) (errs, warnings []k8sops.Finding) {
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, nil
	}
	var left []IPPool
	for _, o := range others {
		// A Manual pool gives addresses only to pods that name it: Calico never assigns from it
		// on its own, so it leaves new pods nothing.
		if o.Name == name || o.Settings.Disabled || o.Prefix().Addr().Is4() != pfx.Addr().Is4() || !givesWorkloads(o.Settings.AllowedUses) ||
			o.Settings.AssignmentMode == string(apiv3.Manual) {
			continue
		}
		left = append(left, o)
	}
	family := "IPv4"
	if !pfx.Addr().Is4() {
		family = "IPv6"
	}
	if len(left) == 0 {
		return []k8sops.Finding{{Path: k8sops.At("disabled"), Summary: "Last Enabled Pool of Its Family", Detail: fmt.Sprintf("IPPool %s (%s) is the last enabled %s "+
			"pool that gives pods addresses on its own (a Manual pool gives them only to pods that name it; a pool this run "+
			"also disables or deletes is counted out): disabled or deleted, Calico has no %s address to give, and no new pod "+
			"starts. Create the new pool in the same configuration and order this change after it (depends_on = "+
			"[k8scidr_calico_ippool.new]), or keep this pool enabled. To stop managing it without deleting it, "+
			"use terraform state rm (or a removed block with destroy = false); to delete it anyway, set "+
			"deletion_policy = \"force\" first.", name, cidr, family, family)}}, nil
	}
	var selectors []string
	var selects []CalicoSelector
	for _, o := range left {
		if allNodes(o.Settings.NodeSelector) {
			return nil, nil
		}
		selectors = append(selectors, fmt.Sprintf("%s: %s", o.Name, o.Settings.NodeSelector))
		if sel, err := ParseCalicoSelector(o.Settings.NodeSelector); err == nil {
			selects = append(selects, sel) // Calico skips a pool whose selector it cannot parse
		}
	}
	this, err := ParseCalicoSelector(nodeSelector)
	if err != nil {
		return nil, nil // Calico skips this pool on every node already
	}
	labels, err := nodes()
	if err != nil {
		if !allNodes(nodeSelector) {
			selectors = append(selectors, fmt.Sprintf("this pool: %s", nodeSelector))
		}
		return nil, []k8sops.Finding{{Path: k8sops.At("disabled"), Summary: "Node Coverage Not Verified", Detail: fmt.Sprintf("The nodes could not be read, and the "+
			"enabled %s pools left select nodes (%s): a node none of them selects gets no pod address once %s is out of "+
			"service. Check every node's labels, or give the new pool node_selector = \"all()\".", family, strings.Join(selectors, "; "), name)}}
	}
	var uncovered []string
	for _, node := range slices.Sorted(maps.Keys(labels)) {
		if l := labels[node]; this.Matches(l) && !slices.ContainsFunc(selects, func(s CalicoSelector) bool { return s.Matches(l) }) {
			uncovered = append(uncovered, node)
		}
	}
	if len(uncovered) == 0 {
		return nil, nil
	}
	shown := uncovered
	if len(shown) > 10 {
		shown = append(slices.Clone(shown[:10]), fmt.Sprintf("and %d more", len(uncovered)-10))
	}
	return []k8sops.Finding{{Path: k8sops.At("disabled"), Summary: "Nodes No Other Pool Selects", Detail: fmt.Sprintf("Once IPPool %s (%s) is out of service, no "+
		"enabled %s pool left selects %d of the %d nodes (%s): pods scheduled there get no address and do not start. The "+
		"pools left select %s. Widen a pool's node_selector (node_selector = \"all()\" on the new pool), or keep this "+
		"pool enabled until those nodes are covered; to delete it anyway, set deletion_policy = \"force\" first.",
		name, cidr, family, len(uncovered), len(labels), strings.Join(shown, ", "), strings.Join(selectors, "; "))}}, nil
}

// NodeLabels lists the cluster's nodes: their labels by name, for CheckPoolsLeft.
func NodeLabels(ctx context.Context, c *k8sops.Client) (map[string]map[string]string, error) {
	nodes := map[string]map[string]string{}
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Nodes().List), func(n *corev1.Node) error {
		nodes[n.Name] = n.Labels
		if nodes[n.Name] == nil {
			nodes[n.Name] = map[string]string{}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodes, nil
}

// PlannedPool is a pool as a plan would create or leave it: name and settings, for CheckPoolsLeft.
func PlannedPool(name string, s PoolSettings) IPPool {
	return IPPool{Name: name, Spec: apiv3.IPPoolSpec{CIDR: s.CIDR}, Settings: s}
}

// givesWorkloads says whether a pool with these allowed uses gives pods addresses (empty: the
// default, Workload and Tunnel).
func givesWorkloads(uses []string) bool {
	return len(uses) == 0 || slices.Contains(uses, string(apiv3.IPPoolAllowedUseWorkload))
}

// allNodes says whether a Calico node selector selects every node.
func allNodes(sel string) bool {
	s := strings.TrimSpace(sel)
	return s == "" || s == "all()"
}
