// Calico IPAM as seen through the API: blocks, their allocations and who holds them, pool usage,
// releasing leaked addresses like `calicoctl ipam release`, and deleting a pool as calicoctl does.
package k8sops

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
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
	err := eachItem(ctx, listPages(a.Blocks.List), func(u *unstructured.Unstructured) error {
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
func ListPodIPs(ctx context.Context, c *Client) (PodIPs, error) {
	out := PodIPs{}
	err := eachItem(ctx, listPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error {
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
		out[p.Namespace+"/"+p.Name] = ips
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return out, nil
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
func (a *CalicoAPI) PoolAllocations(ctx context.Context, c *Client, pool netip.Prefix) ([]Allocation, error) {
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

// releaseFromBlock frees the addresses of spec that match, as Calico's IPAM does: the ordinal
// goes back to unallocated, and attributes no longer referenced are removed (renumbering the
// rest). It returns the handles whose count in this block dropped, by how much.
func releaseFromBlock(spec *apiv3.IPAMBlockSpec, match func(ip netip.Addr, handle string) bool) map[string]int {
	pfx, err := netip.ParsePrefix(spec.CIDR)
	if err != nil {
		return nil
	}
	released := map[string]int{}
	ip := pfx.Masked().Addr()
	for ord, attr := range spec.Allocations {
		if attr != nil {
			handle := ""
			if *attr >= 0 && *attr < len(spec.Attributes) {
				handle = ptr.Deref(spec.Attributes[*attr].HandleID, "")
			}
			if match(ip, handle) {
				spec.Allocations[ord] = nil
				spec.Unallocated = append(spec.Unallocated, ord)
				released[handle]++
			}
		}
		ip = ip.Next()
	}
	if len(released) == 0 {
		return nil
	}
	// Drop unreferenced attributes and renumber the references.
	used := make([]bool, len(spec.Attributes))
	for _, attr := range spec.Allocations {
		if attr != nil && *attr >= 0 && *attr < len(used) {
			used[*attr] = true
		}
	}
	newIndex := make([]int, len(spec.Attributes))
	var kept []apiv3.AllocationAttribute
	for i, at := range spec.Attributes {
		newIndex[i] = len(kept)
		if used[i] {
			kept = append(kept, at)
		}
	}
	for ord, attr := range spec.Allocations {
		if attr != nil && *attr >= 0 && *attr < len(newIndex) {
			spec.Allocations[ord] = ptr.To(newIndex[*attr])
		}
	}
	if kept == nil {
		kept = []apiv3.AllocationAttribute{}
	}
	spec.Attributes = kept
	return released
}

// ReleaseAddresses frees the given addresses (like `calicoctl ipam release --ip`): each block is
// rewritten with a conflict retry and the handles' counts follow.
func (a *CalicoAPI) ReleaseAddresses(ctx context.Context, allocs []Allocation) error {
	byBlock := map[string][]netip.Addr{}
	for _, al := range allocs {
		byBlock[al.Block] = append(byBlock[al.Block], al.IP)
	}
	for _, name := range slices.Sorted(maps.Keys(byBlock)) {
		ips := byBlock[name]
		if err := a.updateBlock(ctx, name, func(spec *apiv3.IPAMBlockSpec) map[string]int {
			return releaseFromBlock(spec, func(ip netip.Addr, _ string) bool { return slices.Contains(ips, ip) })
		}); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseHandle frees every address of a handle (what the CNI plugin does when a pod goes) and
// deletes the handle.
func (a *CalicoAPI) ReleaseHandle(ctx context.Context, handle string) error {
	h, err := a.Handles.Get(ctx, handleName(handle), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	blocks, _, _ := unstructured.NestedMap(h.Object, "spec", "block")
	for cidr := range blocks {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			continue
		}
		err = a.updateBlock(ctx, BlockName(pfx), func(spec *apiv3.IPAMBlockSpec) map[string]int {
			return releaseFromBlock(spec, func(_ netip.Addr, hd string) bool { return hd == handle })
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// updateBlock rewrites one block with fn, which returns how many addresses of each handle it
// released, under a conflict retry; then it decrements those handles.
func (a *CalicoAPI) updateBlock(ctx context.Context, name string, fn func(*apiv3.IPAMBlockSpec) map[string]int) error {
	var released map[string]int
	var cidr string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.Blocks.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var spec apiv3.IPAMBlockSpec
		raw, _, _ := unstructured.NestedMap(u.Object, "spec")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
			return err
		}
		if released, cidr = fn(&spec), spec.CIDR; released == nil {
			return nil
		}
		if spec.Affinity == nil && !slices.ContainsFunc(spec.Allocations, func(a *int) bool { return a != nil }) {
			// As Calico's releaseIPsFromBlock: an empty block without affinity is deleted, at
			// the revision read, so no empty block outlives its pool's affinity release.
			rv := u.GetResourceVersion()
			return a.Blocks.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		}
		spec.SequenceNumber++
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
		if err != nil {
			return err
		}
		u.Object["spec"] = m
		_, err = a.Blocks.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("releasing addresses in IPAMBlock %s: %w", name, err)
	}
	for h, n := range released {
		if h != "" {
			if err := a.decrementHandle(ctx, h, cidr, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *CalicoAPI) decrementHandle(ctx context.Context, handle, cidr string, n int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.Handles.Get(ctx, handleName(handle), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		blocks, _, _ := unstructured.NestedMap(u.Object, "spec", "block")
		if blocks == nil {
			blocks = map[string]any{}
		}
		left, _ := blocks[cidr].(int64)
		if left -= int64(n); left <= 0 {
			delete(blocks, cidr)
		} else {
			blocks[cidr] = left
		}
		if len(blocks) == 0 {
			err := a.Handles.Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(u.GetResourceVersion())}})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		_ = unstructured.SetNestedMap(u.Object, blocks, "spec", "block")
		_, err = a.Handles.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
}

// handleName is the IPAMHandle object name for a handle ID.
func handleName(handle string) string { return strings.ToLower(handle) }

// ReleasePoolAffinities does what Calico's ReleasePoolAffinities does for a pool being deleted:
// every block affinity inside the pool is released — an empty block is deleted, a block still
// holding addresses loses its affinity — and then the BlockAffinity is deleted. Empty blocks
// without affinity are deleted too, so no empty block outlives the pool. It returns the blocks
// left because they still hold addresses.
func (a *CalicoAPI) ReleasePoolAffinities(ctx context.Context, pool netip.Prefix) ([]Block, error) {
	if a.Blocks == nil {
		return nil, nil
	}
	var affinities []*unstructured.Unstructured
	err := eachItem(ctx, listPages(a.Affinities.List), func(u *unstructured.Unstructured) error {
		cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
		if p, err := netip.ParsePrefix(cidr); err == nil && pool.Contains(p.Addr()) {
			affinities = append(affinities, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing BlockAffinities: %w", err)
	}
	blocks, err := a.ListBlocks(ctx)
	if err != nil {
		return nil, err
	}
	var left []Block
	for _, b := range blocks {
		if !pool.Contains(b.CIDR.Addr()) {
			continue
		}
		if b.Used() == 0 {
			err := a.Blocks.Delete(ctx, b.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("deleting empty IPAMBlock %s: %w", b.Name, err)
			}
			continue
		}
		left = append(left, b)
		if b.Spec.Affinity == nil {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := a.Blocks.Get(ctx, b.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			unstructured.RemoveNestedField(u.Object, "spec", "affinity")
			_, err = a.Blocks.Update(ctx, u, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("releasing the affinity of IPAMBlock %s: %w", b.Name, err)
		}
	}
	for _, u := range affinities {
		err := a.Affinities.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting BlockAffinity %s: %w", u.GetName(), err)
		}
	}
	return left, nil
}

// Deletion policies of a pool.
const (
	DeleteWaitForDrain      = "wait_for_drain"
	DeleteRefuseIfAllocated = "refuse_if_allocated"
	DeleteForce             = "force"
)

// DeletionPolicies lists the valid deletion_policy values.
var DeletionPolicies = []string{DeleteWaitForDrain, DeleteRefuseIfAllocated, DeleteForce}

// DeletePoolOptions shape DeleteIPPool.
type DeletePoolOptions struct {
	Policy        string
	ReleaseLeaked bool
	FieldManager  string
	// PollInterval between drain checks; default 2 s.
	PollInterval time.Duration
}

// DeletePoolResult says what the deletion left behind, for warnings.
type DeletePoolResult struct {
	Released []Allocation // leaked addresses released
	Remained []Allocation // addresses still allocated when the pool was deleted
	Blocks   []Block      // blocks left because they hold addresses
}

// ErrPoolAllocated is returned when a pool still has live-pod allocations.
var ErrPoolAllocated = fmt.Errorf("IPPool still has addresses allocated to live pods")

// DeleteIPPool deletes a pool the way calicoctl does — disable it, release the pool's block
// affinities, then delete — after the policy's check: wait_for_drain disables first and waits
// until no live pod holds an address in it; refuse_if_allocated fails at once when one does;
// force goes ahead. Leaked addresses are released first when asked. A missing pool is not an
// error. When ctx ends while draining, the error lists what remains by class.
func (a *CalicoAPI) DeleteIPPool(ctx context.Context, c *Client, name string, o DeletePoolOptions) (DeletePoolResult, error) {
	var res DeletePoolResult
	pool, err := a.GetIPPool(ctx, name)
	if err != nil || pool == nil {
		return res, err
	}
	prefix := pool.Prefix()
	allocs, err := a.PoolAllocations(ctx, c, prefix)
	if err != nil {
		return res, err
	}
	if o.Policy == DeleteRefuseIfAllocated && len(ByClass(allocs, AllocLivePod)) > 0 {
		return res, fmt.Errorf("%w: IPPool %s (%s) holds %s. With deletion_policy = %q nothing was changed: "+
			"disable the pool and restart those pods (k8scidr_workload_roll), then destroy again.%s",
			ErrPoolAllocated, name, prefix, DescribeAllocations(allocs), DeleteRefuseIfAllocated, tunnelNote(allocs))
	}
	if !pool.Settings.Disabled {
		s := pool.Settings
		s.Disabled = true
		if _, err := a.UpdateIPPool(ctx, o.FieldManager, name, s, []string{fieldDisabled}); err != nil {
			return res, err
		}
	}
	if o.Policy == DeleteWaitForDrain || o.Policy == "" {
		interval := o.PollInterval
		if interval == 0 {
			interval = 2 * time.Second
		}
		err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
			allocs, err = a.PoolAllocations(ctx, c, prefix)
			return err == nil && len(ByClass(allocs, AllocLivePod)) == 0, err
		})
		if err != nil {
			return res, fmt.Errorf("%w: IPPool %s (%s) is disabled but did not drain in time; it still holds %s. "+
				"Restart those pods so they take addresses from another pool (k8scidr_workload_roll with pod_cidrs = [%q]), then destroy again.%s",
				ErrPoolAllocated, name, prefix, DescribeAllocations(allocs), prefix.String(), tunnelNote(allocs))
		}
	}
	if o.ReleaseLeaked {
		leaked := ByClass(allocs, AllocLeaked)
		if err := a.ReleaseAddresses(ctx, leaked); err != nil {
			return res, err
		}
		res.Released = leaked
		allocs = slices.DeleteFunc(allocs, func(al Allocation) bool { return al.Class == AllocLeaked })
	}
	res.Remained = allocs
	if res.Blocks, err = a.ReleasePoolAffinities(ctx, prefix); err != nil {
		return res, err
	}
	err = a.Pools.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID(pool.UID))}})
	if err != nil && !apierrors.IsNotFound(err) {
		return res, fmt.Errorf("deleting IPPool %q: %w", name, err)
	}
	return res, nil
}
