// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico IPPools through whichever API group the cluster serves: read, create, update, and the
// CRD schema that says which spec fields the installed Calico knows.
package calico

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Defaults applied when the provider creates a pool (calicoctl's).
const (
	DefaultNodeSelector   = "all()"
	DefaultAssignmentMode = string(apiv3.Automatic)
)

// DefaultAllowedUses is what Calico assumes when allowedUses is empty (sorted, as
// SortAllowedUses leaves a list).
var DefaultAllowedUses = []string{string(apiv3.IPPoolAllowedUseTunnel), string(apiv3.IPPoolAllowedUseWorkload)}

// SortAllowedUses puts allowed uses in a canonical order: the field is a set.
func SortAllowedUses(uses []string) { slices.Sort(uses) }

// AllowedUses lists the valid allowed_uses values; AssignmentModes the valid assignment_mode values.
var (
	AllowedUses     = []string{string(apiv3.IPPoolAllowedUseWorkload), string(apiv3.IPPoolAllowedUseTunnel), string(apiv3.IPPoolAllowedUseLoadBalancer)}
	AssignmentModes = []string{string(apiv3.Automatic), string(apiv3.Manual)}
)

// Spec field names (JSON) that only some Calico releases know.
const (
	FieldAllowedUses    = "allowedUses"
	FieldAssignmentMode = "assignmentMode"
)

// CalicoAPI is the cluster's Calico API: the group serving IPPools, the group serving the IPAM
// objects (IPAMBlock, BlockAffinity, IPAMHandle), and which IPPool spec fields its schema has.
type CalicoAPI struct {
	Group     string // group/version of ippools
	IPAMGroup string // group/version of the IPAM objects; "" when none is served
	// PoolFields are the spec properties of the installed IPPool CRD; nil when no CRD describes
	// the group (the Calico API server), in which case every field is taken as supported.
	PoolFields map[string]bool

	Pools, Blocks, Affinities, Handles dynamic.NamespaceableResourceInterface
}

// ErrNoCalico reports a cluster that serves no Calico IPPool API.
var ErrNoCalico = fmt.Errorf("the cluster serves no Calico IPPool API (neither %s nor %s): install Calico, or its CRDs", k8sops.CalicoV3Group, k8sops.CalicoCRDV1Group)

// Calico resolves the cluster's Calico API per the client's calico_api_group setting.
func Calico(ctx context.Context, c *k8sops.Client) (*CalicoAPI, error) {
	caps, err := c.Capabilities()
	if err != nil {
		return nil, err
	}
	group, err := caps.CalicoAPIGroup(c.CalicoAPIGroup)
	if err != nil {
		return nil, err
	}
	if group == "" {
		return nil, ErrNoCalico
	}
	a := &CalicoAPI{Group: group}
	// IPAM objects live next to the pools when that group serves them (native v3 CRDs), else in
	// the v1 CRDs (the Calico API server stores them there).
	switch {
	case slices.Contains(caps.CalicoIPAMServed, group):
		a.IPAMGroup = group
	case len(caps.CalicoIPAMServed) > 0:
		a.IPAMGroup = caps.CalicoIPAMServed[len(caps.CalicoIPAMServed)-1]
	}
	a.Pools = c.Dynamic.Resource(k8sops.MustGV(group).WithResource("ippools"))
	if a.IPAMGroup != "" {
		gv := k8sops.MustGV(a.IPAMGroup)
		a.Blocks = c.Dynamic.Resource(gv.WithResource("ipamblocks"))
		a.Affinities = c.Dynamic.Resource(gv.WithResource("blockaffinities"))
		a.Handles = c.Dynamic.Resource(gv.WithResource("ipamhandles"))
	}
	if a.PoolFields, err = crdSpecFields(ctx, c.Dynamic, k8sops.MustGV(group), "ippools"); err != nil {
		return nil, err
	}
	return a, nil
}

// Supports reports whether the installed IPPool schema has the spec field (JSON name).
func (a *CalicoAPI) Supports(field string) bool { return a.PoolFields == nil || a.PoolFields[field] }

// crdSpecFields reads the spec properties of the CRD serving resource in gv, or nil when no CRD
// serves it (an aggregated API server) or the CRD cannot be read.
func crdSpecFields(ctx context.Context, dyn dynamic.Interface, gv schema.GroupVersion, resource string) (map[string]bool, error) {
	crd, err := dyn.Resource(crdResource).Get(ctx, resource+"."+gv.Group, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the %s.%s CRD: %w", resource, gv.Group, err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] != gv.Version {
			continue
		}
		props, found, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema", "properties", "spec", "properties")
		if !found {
			return nil, nil // no spec schema (unknown fields preserved): nothing is pruned
		}
		fields := map[string]bool{}
		for k := range props {
			fields[k] = true
		}
		return fields, nil
	}
	return nil, nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// IPPool is the provider's view of a Calico IPPool.
type IPPool struct {
	Name     string
	UID      string
	Spec     apiv3.IPPoolSpec
	Settings PoolSettings // Spec with Calico's defaults filled in
}

// PoolSettings are the IPPool fields the provider manages, with Calico's defaults made explicit.
type PoolSettings struct {
	CIDR             string
	BlockSize        int
	IPIPMode         string
	VXLANMode        string
	NATOutgoing      bool
	Disabled         bool
	DisableBGPExport bool
	NodeSelector     string
	AllowedUses      []string // nil when the installed schema has no allowedUses
	AssignmentMode   string   // "" when the installed schema has no assignmentMode
}

// Prefix is the pool's CIDR, or the zero Prefix when it does not parse.
func (p IPPool) Prefix() netip.Prefix {
	pfx, _ := netip.ParsePrefix(p.Spec.CIDR)
	return pfx
}

// Capacity is the number of addresses in the pool.
func (p IPPool) Capacity() *big.Int { return PrefixSize(p.Prefix()) }

// PrefixSize is the number of addresses in p (0 for an invalid prefix).
func PrefixSize(p netip.Prefix) *big.Int {
	if !p.IsValid() {
		return new(big.Int)
	}
	return new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
}

func (a *CalicoAPI) poolFrom(u *unstructured.Unstructured) (IPPool, error) {
	var typed apiv3.IPPool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &typed); err != nil {
		return IPPool{}, fmt.Errorf("decoding IPPool %q: %w", u.GetName(), err)
	}
	s := typed.Spec
	out := IPPool{Name: u.GetName(), UID: string(u.GetUID()), Spec: s}
	out.Settings = PoolSettings{
		CIDR: s.CIDR, BlockSize: s.BlockSize, IPIPMode: string(s.IPIPMode), VXLANMode: string(s.VXLANMode),
		NATOutgoing: s.NATOutgoing, Disabled: s.Disabled, DisableBGPExport: s.DisableBGPExport, NodeSelector: s.NodeSelector,
	}
	if out.Settings.BlockSize == 0 {
		out.Settings.BlockSize = DefaultBlockSize(s.CIDR)
	}
	if out.Settings.IPIPMode == "" {
		out.Settings.IPIPMode = EncapNever
	}
	if out.Settings.VXLANMode == "" {
		out.Settings.VXLANMode = EncapNever
	}
	if out.Settings.NodeSelector == "" {
		out.Settings.NodeSelector = DefaultNodeSelector
	}
	if a.Supports(FieldAllowedUses) {
		out.Settings.AllowedUses = DefaultAllowedUses
		if len(s.AllowedUses) > 0 {
			out.Settings.AllowedUses = nil
			for _, u := range s.AllowedUses {
				out.Settings.AllowedUses = append(out.Settings.AllowedUses, string(u))
			}
			SortAllowedUses(out.Settings.AllowedUses)
		}
	}
	if a.Supports(FieldAssignmentMode) {
		out.Settings.AssignmentMode = DefaultAssignmentMode
		if s.AssignmentMode != nil && *s.AssignmentMode != "" {
			out.Settings.AssignmentMode = string(*s.AssignmentMode)
		}
	}
	return out, nil
}

// GetIPPool reads a pool; nil when it does not exist.
func (a *CalicoAPI) GetIPPool(ctx context.Context, name string) (*IPPool, error) {
	u, err := a.Pools.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading IPPool %q: %w", name, err)
	}
	p, err := a.poolFrom(u)
	return &p, err
}

// ListIPPools reads every pool in one paginated pass, sorted by name.
func (a *CalicoAPI) ListIPPools(ctx context.Context) ([]IPPool, error) {
	var out []IPPool
	err := k8sops.EachItem(ctx, k8sops.ListPages(a.Pools.List), func(u *unstructured.Unstructured) error {
		p, err := a.poolFrom(u)
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing IPPools: %w", err)
	}
	slices.SortFunc(out, func(x, y IPPool) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// Pool spec fields by JSON name, as the provider writes them.
const (
	fieldCIDR             = "cidr"
	fieldBlockSize        = "blockSize"
	fieldIPIPMode         = "ipipMode"
	fieldVXLANMode        = "vxlanMode"
	fieldNATOutgoing      = "natOutgoing"
	fieldDisabled         = "disabled"
	fieldDisableBGPExport = "disableBGPExport"
	fieldNodeSelector     = "nodeSelector"
)

// Fields lists the spec fields (JSON names) whose values differ between s and other.
func (s PoolSettings) Fields(other PoolSettings) []string {
	var out []string
	diff := func(field string, differs bool) {
		if differs {
			out = append(out, field)
		}
	}
	diff(fieldCIDR, s.CIDR != other.CIDR)
	diff(fieldBlockSize, s.BlockSize != other.BlockSize)
	diff(fieldIPIPMode, s.IPIPMode != other.IPIPMode)
	diff(fieldVXLANMode, s.VXLANMode != other.VXLANMode)
	diff(fieldNATOutgoing, s.NATOutgoing != other.NATOutgoing)
	diff(fieldDisabled, s.Disabled != other.Disabled)
	diff(fieldDisableBGPExport, s.DisableBGPExport != other.DisableBGPExport)
	diff(fieldNodeSelector, s.NodeSelector != other.NodeSelector)
	diff(FieldAllowedUses, !slices.Equal(s.AllowedUses, other.AllowedUses))
	diff(FieldAssignmentMode, s.AssignmentMode != other.AssignmentMode)
	return out
}

func (s PoolSettings) values() map[string]any {
	v := map[string]any{
		fieldCIDR: s.CIDR, fieldBlockSize: int64(s.BlockSize), fieldIPIPMode: s.IPIPMode, fieldVXLANMode: s.VXLANMode,
		fieldNATOutgoing: s.NATOutgoing, fieldDisabled: s.Disabled, fieldDisableBGPExport: s.DisableBGPExport,
		fieldNodeSelector: s.NodeSelector,
	}
	if s.AllowedUses != nil {
		v[FieldAllowedUses] = k8sops.ToAny(s.AllowedUses)
	}
	if s.AssignmentMode != "" {
		v[FieldAssignmentMode] = s.AssignmentMode
	}
	return v
}

// CreateIPPool creates a pool with every managed field written.
func (a *CalicoAPI) CreateIPPool(ctx context.Context, fieldManager, name string, s PoolSettings) (*IPPool, error) {
	gv := k8sops.MustGV(a.Group)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(), "kind": "IPPool",
		"metadata": map[string]any{"name": name},
		"spec":     s.values(),
	}}
	created, err := a.Pools.Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, fmt.Errorf("creating IPPool %q: %w", name, err)
	}
	p, err := a.poolFrom(created)
	return &p, err
}

// UpdateIPPool writes only the named spec fields (JSON names) of s onto the live pool, leaving
// every other field as the cluster has it. It retries on write conflicts.
func (a *CalicoAPI) UpdateIPPool(ctx context.Context, fieldManager, name string, s PoolSettings, fields []string) (*IPPool, error) {
	values := s.values()
	var out *IPPool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.Pools.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if spec == nil {
			spec = map[string]any{}
		}
		for _, f := range fields {
			if v, ok := values[f]; ok {
				spec[f] = v
			} else {
				delete(spec, f)
			}
		}
		if err := unstructured.SetNestedMap(u.Object, spec, "spec"); err != nil {
			return err
		}
		updated, err := a.Pools.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		if err != nil {
			return err
		}
		p, err := a.poolFrom(updated)
		out = &p
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("updating IPPool %q: %w", name, err)
	}
	return out, nil
}

// Installation is the Tigera operator's view of a pool: the operator reconciles the pools its
// Installation lists and reverts edits made elsewhere.
var installationResource = schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "installations"}

// OperatorOwnsPool reports whether a Tigera operator Installation lists the pool (by name, or
// by CIDR when cidr is given). Clusters without the operator answer false.
func OperatorOwnsPool(ctx context.Context, c *k8sops.Client, name, cidr string) (string, bool) {
	list, err := c.Dynamic.Resource(installationResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", false // no operator, or not allowed to look: nothing to warn about
	}
	for _, inst := range list.Items {
		pools, _, _ := unstructured.NestedSlice(inst.Object, "spec", "calicoNetwork", "ipPools")
		for _, p := range pools {
			m, _ := p.(map[string]any)
			if m["name"] == name || (cidr != "" && m["cidr"] == cidr) {
				return inst.GetName(), true
			}
		}
	}
	return "", false
}

// PoolDifferences compares a pool's encapsulation and NAT with the other pools of its family
// and describes each difference; an IPIP cluster whose new pool says Never breaks cross-node
// traffic for every pod that moves there.
func PoolDifferences(s PoolSettings, name string, others []IPPool) []string {
	pfx, err := netip.ParsePrefix(s.CIDR)
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range others {
		if o.Name == name || o.Prefix().Addr().Is4() != pfx.Addr().Is4() {
			continue
		}
		os := o.Settings
		var d []string
		if os.IPIPMode != s.IPIPMode {
			d = append(d, fmt.Sprintf("ipip_mode %s (this pool: %s)", os.IPIPMode, s.IPIPMode))
		}
		if os.VXLANMode != s.VXLANMode {
			d = append(d, fmt.Sprintf("vxlan_mode %s (this pool: %s)", os.VXLANMode, s.VXLANMode))
		}
		if os.NATOutgoing != s.NATOutgoing {
			d = append(d, fmt.Sprintf("nat_outgoing %t (this pool: %t)", os.NATOutgoing, s.NATOutgoing))
		}
		if len(d) > 0 {
			out = append(out, fmt.Sprintf("IPPool %s (%s) has %s", o.Name, o.Spec.CIDR, strings.Join(d, ", ")))
		}
	}
	return out
}
