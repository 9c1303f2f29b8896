// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico IPAM as seen through the API: blocks, their allocations and who holds them, pool usage
// and the classes of what holds an address. Releasing and deleting are in ipam_release.go.
package calico

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"sort"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Calico's pod annotations and IPAM attribute keys.
const (
	AnnotationPodIP  = "cni.projectcalico.org/podIP"
	AnnotationPodIPs = "cni.projectcalico.org/podIPs"
	AttrNamespace    = "namespace"
	AttrPod          = "pod"
	AttrNode         = "node"
	affinityHost     = "host:"
)

// Allocation classes.
const (
	AllocLivePod = "live pod"
	AllocLeaked  = "leaked"
	AllocTunnel  = "node tunnel address"
	AllocOther   = "other"
)

// tunnelHandlePrefixes name the handles calico-node uses for a node's tunnel addresses.
var tunnelHandlePrefixes = []string{"ipip-tunnel-addr-", "vxlan-tunnel-addr-", "vxlan-v6-tunnel-addr-", "wireguard-tunnel-addr-", "wireguard-v6-tunnel-addr-"}

// Block is an IPAMBlock that is not being deleted.
type Block struct {
	Name        string
	CIDR        netip.Prefix
	Node        string // the affine node, "" when none
	Capacity    int
	Allocations []Allocation
	Spec        apiv3.IPAMBlockSpec
}

// Allocation is one allocated address in a block.
type Allocation struct {
	IP        netip.Addr
	Block     string
	Handle    string
	Namespace string // for pod allocations
	Pod       string
	Node      string
	Class     string // set by Classify
}

// Owner names what holds the address: "ns/pod", "node X", or the handle.
func (a Allocation) Owner() string {
	switch {
	case a.Pod != "":
		return a.Namespace + "/" + a.Pod
	case a.Class == AllocTunnel && a.Node != "":
		return "node " + a.Node
	case a.Handle != "":
		return "handle " + a.Handle
	}
	return "no handle"
}

// BlockName is Calico's object name for a block CIDR (names.CIDRToName).
func BlockName(p netip.Prefix) string {
	return strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(p.String())
}

// blockFrom decodes an IPAMBlock; ok is false for blocks being deleted or unreadable.
func blockFrom(u *unstructured.Unstructured) (Block, bool) {
	var spec apiv3.IPAMBlockSpec
	raw, _, _ := unstructured.NestedMap(u.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil || spec.Deleted {
		return Block{}, false
	}
	pfx, err := netip.ParsePrefix(spec.CIDR)
	if err != nil {
		return Block{}, false
	}
	b := Block{Name: u.GetName(), CIDR: pfx.Masked(), Capacity: len(spec.Allocations), Spec: spec}
	if spec.Affinity != nil {
		b.Node = strings.TrimPrefix(*spec.Affinity, affinityHost)
	}
	ip := b.CIDR.Addr()
	for _, attr := range spec.Allocations {
		if attr != nil {
			a := Allocation{IP: ip, Block: b.Name}
			if *attr >= 0 && *attr < len(spec.Attributes) {
				at := spec.Attributes[*attr]
				a.Handle = ptr.Deref(at.HandleID, "")
				a.Namespace, a.Pod, a.Node = at.ActiveOwnerAttrs[AttrNamespace], at.ActiveOwnerAttrs[AttrPod], at.ActiveOwnerAttrs[AttrNode]
			}
			b.Allocations = append(b.Allocations, a)
		}
		ip = ip.Next()
	}
	return b, true
}

// Used is the number of allocated addresses: capacity minus the unallocated ordinals.
func (b Block) Used() int { return b.Capacity - len(b.Spec.Unallocated) }

// ListBlocks reads every IPAMBlock not being deleted, in one paginated pass, sorted by CIDR.
func (a *CalicoAPI) ListBlocks(ctx context.Context) ([]Block, error) {
	if a.Blocks == nil {
		return nil, nil
	}
	var out []Block
	err := k8sops.EachItem(ctx, k8sops.ListPages(a.Blocks.List), func(u *unstructured.Unstructured) error {
		if b, ok := blockFrom(u); ok {
			out = append(out, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing IPAMBlocks: %w", err)
	}
	slices.SortFunc(out, func(x, y Block) int { return x.CIDR.Addr().Compare(y.CIDR.Addr()) })
	return out, nil
}

// PoolUsage is a pool's IPAM usage.
type PoolUsage struct {
	Capacity     *big.Int
	Used         int
	Blocks       int
	BlocksByNode map[string]int // affine node → blocks ("" for blocks without affinity)
}

// UsageOf sums the blocks inside pool.
func UsageOf(pool netip.Prefix, blocks []Block) PoolUsage {
	u := PoolUsage{Capacity: PrefixSize(pool), BlocksByNode: map[string]int{}}
	for _, b := range blocks {
		if pool.IsValid() && pool.Contains(b.CIDR.Addr()) {
			u.Used += b.Used()
			u.Blocks++
			u.BlocksByNode[b.Node]++
		}
	}
	return u
}

// OrphanedBlocks are the blocks inside no pool.
func OrphanedBlocks(pools []IPPool, blocks []Block) []Block {
	var out []Block
	for _, b := range blocks {
		if !slices.ContainsFunc(pools, func(p IPPool) bool { return p.Prefix().IsValid() && p.Prefix().Contains(b.CIDR.Addr()) }) {
			out = append(out, b)
		}
	}
	return out
}

// PodIPs maps "namespace/name" to the addresses a pod holds: its status IPs and Calico's
// annotations. A pod with neither maps to an empty set.
type PodIPs map[string][]netip.Addr

// ListPodIPs reads every pod in one paginated pass.
func ListPodIPs(ctx context.Context, c *k8sops.Client) (PodIPs, error) {
	out := PodIPs{}
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error {
		out[p.Namespace+"/"+p.Name] = podIPs(p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return out, nil
}

// podIPs are the addresses a pod holds: its status IPs and Calico's annotations.
func podIPs(p *corev1.Pod) []netip.Addr {
	var ips []netip.Addr
	for _, s := range p.Status.PodIPs {
		if ip, err := netip.ParseAddr(s.IP); err == nil {
			ips = append(ips, ip)
		}
	}
	for _, key := range []string{AnnotationPodIPs, AnnotationPodIP} {
		for _, s := range strings.Split(p.Annotations[key], ",") {
			if pfx, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
				ips = append(ips, pfx.Addr())
			} else if ip, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				ips = append(ips, ip)
			}
		}
	}
	return ips
}

// Classify sets each allocation's class: a node tunnel address by its handle; a live pod when
// the pod exists and holds the address (or has none yet); leaked when the pod is gone or now
// holds other addresses; other for everything else (e.g. a LoadBalancer address).
func Classify(allocs []Allocation, pods PodIPs) []Allocation {
	out := slices.Clone(allocs)
	for i, a := range out {
		switch {
		case slices.ContainsFunc(tunnelHandlePrefixes, func(p string) bool { return strings.HasPrefix(a.Handle, p) }):
			out[i].Class = AllocTunnel
			for _, p := range tunnelHandlePrefixes {
				if out[i].Node == "" && strings.HasPrefix(a.Handle, p) {
					out[i].Node = strings.TrimPrefix(a.Handle, p)
				}
			}
		case a.Pod != "" && a.Namespace != "":
			ips, exists := pods[a.Namespace+"/"+a.Pod]
			if exists && (len(ips) == 0 || slices.Contains(ips, a.IP)) {
				out[i].Class = AllocLivePod
			} else {
				out[i].Class = AllocLeaked
			}
		default:
			out[i].Class = AllocOther
		}
	}
	return out
}

// AllocationsIn lists the allocations of the blocks inside pool.
func AllocationsIn(pool netip.Prefix, blocks []Block) []Allocation {
	var out []Allocation
	for _, b := range blocks {
		if pool.Contains(b.CIDR.Addr()) {
			out = append(out, b.Allocations...)
		}
	}
	return out
}

// DescribeAllocations groups classified allocations by class, naming the owners (first 20 per
// class and a count), e.g. "live pod: 2 (default/a 10.0.0.1, default/b 10.0.0.2)".
func DescribeAllocations(allocs []Allocation) string {
	byClass := map[string][]string{}
	for _, a := range allocs {
		byClass[a.Class] = append(byClass[a.Class], a.Owner()+" "+a.IP.String())
	}
	var parts []string
	for _, class := range []string{AllocLivePod, AllocLeaked, AllocTunnel, AllocOther} {
		owners := byClass[class]
		if len(owners) == 0 {
			continue
		}
		sort.Strings(owners)
		shown := owners
		more := ""
		if len(shown) > 20 {
			shown, more = shown[:20], fmt.Sprintf(", and %d more", len(owners)-20)
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s%s)", class, len(owners), strings.Join(shown, ", "), more))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// ByClass returns the allocations of one class.
func ByClass(allocs []Allocation, class string) []Allocation {
	return slices.DeleteFunc(slices.Clone(allocs), func(a Allocation) bool { return a.Class != class })
}

// TunnelNote says what to do about node tunnel addresses left in a pool.
const TunnelNote = "Node tunnel addresses move only when calico-node restarts on that node: roll it, e.g. " +
	"k8scidr_workload_roll with include = [\"kube-system/daemonset/calico-node\"] (calico-system/daemonset/calico-node under the operator)."

// tunnelNote is a message suffix pointing at calico-node when node tunnel addresses remain.
func tunnelNote(allocs []Allocation) string {
	if len(ByClass(allocs, AllocTunnel)) == 0 {
		return ""
	}
	return " " + TunnelNote
}

// PoolAllocations reads the pool's blocks and the pods and classifies every allocation.
func (a *CalicoAPI) PoolAllocations(ctx context.Context, c *k8sops.Client, pool netip.Prefix) ([]Allocation, error) {
	blocks, err := a.ListBlocks(ctx)
	if err != nil {
		return nil, err
	}
	allocs := AllocationsIn(pool, blocks)
	if len(allocs) == 0 {
		return nil, nil
	}
	pods, err := ListPodIPs(ctx, c)
	if err != nil {
		return nil, err
	}
	return Classify(allocs, pods), nil
}
