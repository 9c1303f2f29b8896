// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Releasing Calico IPAM state as calicoctl does: leaked addresses (calicoctl ipam release), a
// retired pool's block affinities, and deleting a pool once it is drained.
package calico

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

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
	err := k8sops.EachItem(ctx, k8sops.ListPages(a.Affinities.List), func(u *unstructured.Unstructured) error {
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
		kept, err := a.releaseBlockAffinity(ctx, b.Name)
		if err != nil {
			return nil, err
		}
		if kept != nil {
			left = append(left, *kept)
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

// releaseBlockAffinity releases one block as Calico's releaseBlockAffinity does: an empty block
// is deleted, any other loses its affinity and is returned. Both at the revision just read, so
// an address Calico's IPAM releases meanwhile (a pod deleted) cannot leave an empty block
// without affinity behind: IPAM deletes an empty block only while it has none.
func (a *CalicoAPI) releaseBlockAffinity(ctx context.Context, name string) (*Block, error) {
	var kept *Block
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kept = nil
		u, err := a.Blocks.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		b, ok := blockFrom(u)
		if !ok {
			return nil // being deleted
		}
		if b.Used() == 0 {
			rv := u.GetResourceVersion()
			return a.Blocks.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		}
		kept = &b
		if b.Spec.Affinity == nil {
			return nil
		}
		unstructured.RemoveNestedField(u.Object, "spec", "affinity")
		_, err = a.Blocks.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("releasing the affinity of IPAMBlock %s: %w", name, err)
	}
	return kept, nil
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
func (a *CalicoAPI) DeleteIPPool(ctx context.Context, c *k8sops.Client, name string, o DeletePoolOptions) (DeletePoolResult, error) {
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
		var drained bool
		if allocs, drained, err = a.waitDrained(ctx, c, prefix); !drained && err != nil && ctx.Err() == nil {
			return res, err
		}
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
