// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Resource k8scidr_calico_ippool: a Calico IPPool, created new or imported to be disabled and
// retired once drained.
package provider

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/numberplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
)

var (
	_ resource.ResourceWithConfigure      = (*calicoIPPoolResource)(nil)
	_ resource.ResourceWithImportState    = (*calicoIPPoolResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*calicoIPPoolResource)(nil)
	_ resource.ResourceWithValidateConfig = (*calicoIPPoolResource)(nil)
)

// Default timeouts: writes take a moment; a drain waits for pods to be restarted elsewhere.
const (
	calicoPoolWriteTimeout = 2 * time.Minute
	calicoPoolDrainTimeout = 30 * time.Minute
)

type calicoIPPoolResource struct {
	data *providerData
}

func newCalicoIPPoolResource() resource.Resource { return &calicoIPPoolResource{} }

func (r *calicoIPPoolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_calico_ippool"
}

func (r *calicoIPPoolResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Computed: true, MarkdownDescription: desc,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	keepBool := func(desc string) schema.BoolAttribute {
		return schema.BoolAttribute{Optional: true, Computed: true, MarkdownDescription: desc,
			PlanModifiers: []planmodifier.Bool{boolplanmodifier.UseStateForUnknown()}}
	}
	encap := func(desc string) schema.StringAttribute {
		a := keep(desc + " `Never`, `Always` or `CrossSubnet`; at most one of `ipip_mode` and `vxlan_mode` is on. Default on create: `Never`.")
		a.Validators = []validator.String{stringvalidator.OneOf(calico.EncapModes...)}
		return a
	}
	ipip, vxlan := encap("IPIP encapsulation (IPv4 pools only):"), encap("VXLAN encapsulation:")
	assignment := keep("`Automatic` or `Manual` (only requested addresses are assigned). Only where the installed IPPool CRD " +
		"has `assignmentMode` (Calico 3.30+); setting it on an older CRD is a plan error. Default on create: `Automatic`.")
	assignment.Validators = []validator.String{stringvalidator.OneOf(calico.AssignmentModes...)}
	nodeSelector := keep("Calico selector of the nodes that take addresses from this pool. Default on create: `all()`.")
	nodeSelector.Validators = []validator.String{stringvalidator.LengthAtLeast(1), calicoSelectorValidator()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A Calico `IPPool`, through `projectcalico.org/v3` or the `crd.projectcalico.org/v1` CRDs (per the " +
			"provider's `calico_api_group`). Create a new pod range with it, or import the old pool and set `disabled = true` " +
			"so that no new pod gets an address from it. Destroy retires the pool the way calicoctl does (disable, release its " +
			"block affinities, delete), by default only once no live pod holds an address in it.\n\n" +
			"Attributes with a default are applied only on create: an imported pool keeps its live values for what the " +
			"configuration does not set.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required: true, MarkdownDescription: "Name of the IPPool; import by this name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{subdomainName("an IPPool name")},
			},
			"cidr": schema.StringAttribute{
				Required: true, MarkdownDescription: "The pool's range. Changing it replaces the pool.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"block_size": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Prefix length of the blocks nodes claim: 20–32 for IPv4, 116–128 for IPv6, and not "+
					"shorter than the pool's. Changing it replaces the pool. Default on create: `%d` (IPv4) or `%d` (IPv6).",
					calico.DefaultBlockSize4, calico.DefaultBlockSize6),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown(), int64planmodifier.RequiresReplace()},
			},
			"ipip_mode":    ipip,
			"vxlan_mode":   vxlan,
			"nat_outgoing": keepBool("Masquerade traffic from the pool's pods to destinations outside every pool. Default on create: `false`."),
			"disabled": keepBool("No new address is assigned from a disabled pool; existing ones stay until their pods go. " +
				"Disabling (or destroying) the last enabled pool of an address family, or one that serves nodes no other enabled " +
				"pool's `node_selector` selects, is a plan error (pools this run creates first count; pools it also disables or " +
				"destroys, and `Manual` pools, which Calico assigns from only to pods that name them, do not). The apply checks " +
				"again against the live pools, one pool at a time. Default on create: `false`."),
			"disable_bgp_export": keepBool("Do not export the pool's routes over BGP. Default on create: `false`."),
			"node_selector":      nodeSelector,
			"allowed_uses": schema.SetAttribute{
				Optional: true, Computed: true, ElementType: types.StringType,
				MarkdownDescription: "What the pool's addresses are for: `Workload`, `Tunnel`, `LoadBalancer`. Only where the " +
					"installed IPPool CRD has `allowedUses` (Calico 3.21+); setting it on an older CRD is a plan error. " +
					"Default on create: `[\"Tunnel\", \"Workload\"]`.",
				PlanModifiers: []planmodifier.Set{setplanmodifier.UseStateForUnknown()},
				Validators:    append([]validator.Set{setvalidator.SizeAtLeast(1)}, setOf(stringvalidator.OneOf(calico.AllowedUses...))...),
			},
			"assignment_mode": assignment,
			"deletion_policy": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(calico.DeleteWaitForDrain),
				MarkdownDescription: "What destroy does while pods hold addresses in the pool, which the destroy plan names: " +
					"`wait_for_drain` disables the pool and waits, up to the delete timeout, until no live pod holds one (a plan " +
					"warning); `refuse_if_allocated` is refused at plan (and at apply, if pods came since); `force` deletes anyway " +
					"(their addresses stay in orphaned blocks), even the last enabled pool of its family or one whose nodes no " +
					"other pool selects, which are otherwise refused. Leaked addresses and node " +
					"tunnel addresses never hold a drain: they are reported. Default `" + calico.DeleteWaitForDrain + "`.",
				Validators: []validator.String{stringvalidator.OneOf(calico.DeletionPolicies...)},
			},
			"release_leaked": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "On destroy, release addresses whose pod no longer exists (like `calicoctl ipam release`). Default `false`.",
			},
			"api_group": schema.StringAttribute{
				Computed: true, MarkdownDescription: "The API group/version the pool is managed through.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"capacity": schema.NumberAttribute{
				Computed: true, MarkdownDescription: "Addresses in the pool.",
				PlanModifiers: []planmodifier.Number{numberplanmodifier.UseStateForUnknown()},
			},
			"allocated": schema.Int64Attribute{
				Computed: true, MarkdownDescription: "Addresses allocated in the pool's IPAM blocks, as of the last refresh.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"blocks": schema.Int64Attribute{
				Computed: true, MarkdownDescription: "IPAM blocks inside the pool, as of the last refresh.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, calicoPoolWriteTimeout, calicoPoolWriteTimeout, calicoPoolDrainTimeout),
		},
	}
}

// calicoAPI resolves the cluster's Calico API; nil, with a diagnostic, when it cannot.
func calicoAPI(ctx context.Context, client *k8sops.Client, diags *diag.Diagnostics) *calico.CalicoAPI {
	api, err := calico.Calico(ctx, client)
	switch {
	case errors.Is(err, calico.ErrNoCalico):
		// Said by the network plugin that runs instead, where the DaemonSets show one (or none known).
		if cnis, listErr := k8sops.FindCNIs(ctx, client); listErr == nil && !k8sops.RunsCalico(cnis) {
			detail, fix := k8sops.PodStageRefusal(cnis)
			diags.AddError("Pod Stage Needs Calico IPAM", detail+" "+fix)
			return nil
		}
		diags.AddError("Calico Not Readable", apiErrorText(err))
		return nil
	case err != nil:
		diags.AddError("Calico Not Readable", apiErrorText(err))
		return nil
	}
	return api
}

func (r *calicoIPPoolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan fills create-time defaults, validates the pool as calicoctl would and against the
// cluster's other pools and installed CRD, and warns about what would break traffic or be reverted.
// ValidateConfig runs Calico's own checks of a pool on what the configuration sets, before the
// cluster is read: on a cluster where Calico cannot be read the mistake is still named.
// ModifyPlan checks again with the defaults filled in and against the other pools.
func (r *calicoIPPoolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m calicoIPPoolModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.CIDR.IsNull() || m.CIDR.IsUnknown() || m.BlockSize.IsUnknown() ||
		m.IPIPMode.IsUnknown() || m.VXLANMode.IsUnknown() {
		return
	}
	mode := func(v types.String) string { // an unknown mode is the schema validator's to report
		if slices.Contains(calico.EncapModes, v.ValueString()) {
			return v.ValueString()
		}
		return ""
	}
	var uses []string // unknown elements are the plan's to check
	if !m.AllowedUses.IsNull() && !m.AllowedUses.IsUnknown() {
		resp.Diagnostics.Append(m.AllowedUses.ElementsAs(ctx, &uses, true)...)
	}
	addFindings(&resp.Diagnostics, calico.ValidateIPPool(calico.IPPoolSpec{Name: m.Name.ValueString(), CIDR: m.CIDR.ValueString(),
		BlockSize: int(m.BlockSize.ValueInt64()), IPIPMode: mode(m.IPIPMode), VXLANMode: mode(m.VXLANMode), AllowedUses: uses}, nil), true)
}

func (r *calicoIPPoolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		var state calicoIPPoolModel
		if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
			return
		}
		if state.DeletionPolicy.ValueString() == calico.DeleteForce {
			resp.Diagnostics.AddWarning("IPPool Deleted Even If Pods Hold Addresses",
				"deletion_policy = \"force\": the pool is deleted without waiting for its pods; their addresses stay in orphaned "+
					"IPAM blocks until released, and those pods keep working only until they restart.")
		}
		client, diags := r.data.Client()
		if resp.Diagnostics.Append(diags...); diags.HasError() {
			return
		}
		if api := calicoAPI(ctx, client, &resp.Diagnostics); api != nil {
			r.data.poolsGoing.Store(state.Name.ValueString(), true)
			r.checkPoolsLeft(ctx, client, api, &state, true, true, &resp.Diagnostics)
			checkLivePods(ctx, api, client, &state, &resp.Diagnostics)
		}
		return
	}
	var plan, config calicoIPPoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() || plan.CIDR.IsUnknown() || plan.Name.IsUnknown() {
		return
	}
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	api := calicoAPI(ctx, client, &resp.Diagnostics)
	if api == nil {
		return
	}
	creating := req.State.Raw.IsNull()
	plan.APIGroup = types.StringValue(api.Group)
	var set []string // the version-dependent spec fields the configuration sets
	if !config.AllowedUses.IsNull() {
		set = append(set, calico.FieldAllowedUses)
	}
	if !config.AssignmentMode.IsNull() {
		set = append(set, calico.FieldAssignmentMode)
	}
	addFindings(&resp.Diagnostics, api.UnsupportedPoolFields(set), true)
	if !api.Supports(calico.FieldAllowedUses) {
		plan.AllowedUses = types.SetNull(types.StringType)
	}
	if !api.Supports(calico.FieldAssignmentMode) {
		plan.AssignmentMode = types.StringNull()
	}
	if creating {
		plan.applyCreateDefaults(ctx, api, &resp.Diagnostics)
	}
	s, known := plan.settings(ctx, &resp.Diagnostics)
	if !known || resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	pools, err := api.ListIPPools(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Calico Not Readable", apiErrorText(err))
		return
	}
	errs, warnings := calico.CheckPoolAmongOthers(plan.Name.ValueString(), s, pools)
	addFindings(&resp.Diagnostics, errs, true)
	addWarnings(&resp.Diagnostics, warnings)
	var wasDisabled types.Bool
	if !creating {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("disabled"), &wasDisabled)...)
	}
	if !s.Disabled {
		r.data.plannedPools.Store(plan.Name.ValueString(), calico.PlannedPool(plan.Name.ValueString(), s))
	} else if !creating && !wasDisabled.ValueBool() {
		r.data.poolsGoing.Store(plan.Name.ValueString(), true)
		errs, warnings := calico.CheckPoolsLeft(plan.Name.ValueString(), s.CIDR, s.NodeSelector, r.data.poolsLeft(pools), nodeLabels(ctx, client))
		addFindings(&resp.Diagnostics, errs, true)
		addWarnings(&resp.Diagnostics, warnings)
	}
	if pfx, err := netip.ParsePrefix(s.CIDR); err == nil {
		if creating {
			plan.Capacity = types.NumberValue(new(big.Float).SetInt(calico.PrefixSize(pfx)))
		}
		// The stage's hazards: where a new pool sits, or what is pinned to a pool being disabled.
		if creating && !s.Disabled || s.Disabled && !wasDisabled.ValueBool() {
			found, err := preflight.PoolHazards(ctx, client, pfx.Masked(), s.Disabled)
			warnHazards(found, err, &resp.Diagnostics)
		}
	}
	if owner, ok := calico.OperatorOwnsPool(ctx, client, plan.Name.ValueString(), s.CIDR); ok {
		resp.Diagnostics.AddWarning("Pool Managed by the Tigera Operator",
			fmt.Sprintf("Installation %q lists this pool: the operator reverts edits made elsewhere. Change the pool in the "+
				"Installation's spec.calicoNetwork.ipPools instead, and drop it from this configuration.", owner))
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *calicoIPPoolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan calicoIPPoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	client, ctx, cancel := r.data.begin(ctx, plan.Timeouts.Create, calicoPoolWriteTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	api := calicoAPI(ctx, client, &resp.Diagnostics)
	if api == nil {
		return
	}
	s, _ := plan.settings(ctx, &resp.Diagnostics)
	pool, err := api.CreateIPPool(ctx, client.FieldManager, plan.Name.ValueString(), s)
	if err != nil {
		resp.Diagnostics.AddError("IPPool Not Created", apiErrorText(err))
		return
	}
	usage := calico.UsageOf(pool.Prefix(), r.blocks(ctx, api, &resp.Diagnostics))
	plan.fill(ctx, api, pool, &usage, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *calicoIPPoolResource) blocks(ctx context.Context, api *calico.CalicoAPI, diags *diag.Diagnostics) []calico.Block {
	blocks, err := api.ListBlocks(ctx)
	if err != nil {
		diags.AddWarning("IPAM Blocks Not Readable", err.Error()+": allocated and blocks are left at 0.")
	}
	return blocks
}

func (r *calicoIPPoolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state calicoIPPoolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	api := calicoAPI(ctx, client, &resp.Diagnostics)
	if api == nil {
		return
	}
	pool, err := api.GetIPPool(ctx, state.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("IPPool Not Readable", apiErrorText(err))
		return
	}
	if pool == nil {
		resp.State.RemoveResource(ctx)
		return
	}
	usage := calico.UsageOf(pool.Prefix(), r.blocks(ctx, api, &resp.Diagnostics))
	state.fill(ctx, api, pool, &usage, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update writes only the fields whose planned value differs from the prior state; everything
// else on the pool stays as the cluster has it.
func (r *calicoIPPoolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state calicoIPPoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, ctx, cancel := r.data.begin(ctx, plan.Timeouts.Update, calicoPoolWriteTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	api := calicoAPI(ctx, client, &resp.Diagnostics)
	if api == nil {
		return
	}
	want, _ := plan.settings(ctx, &resp.Diagnostics)
	had, _ := state.settings(ctx, &resp.Diagnostics)
	if want.Disabled && !had.Disabled {
		// Re-checked live, and written before another pool of this run is checked: the pools the
		// plan counted on may be gone, never created, or going in this run too.
		r.data.poolOut.Lock()
		defer r.data.poolOut.Unlock()
		if r.checkPoolsLeft(ctx, client, api, &state, false, false, &resp.Diagnostics); resp.Diagnostics.HasError() {
			return
		}
	}
	pool, err := api.GetIPPool(ctx, plan.Name.ValueString())
	if fields := want.Fields(had); err == nil && len(fields) > 0 {
		pool, err = api.UpdateIPPool(ctx, client.FieldManager, plan.Name.ValueString(), want, fields)
	}
	if err == nil && pool == nil {
		err = fmt.Errorf("IPPool %q no longer exists", plan.Name.ValueString())
	}
	if err != nil {
		resp.Diagnostics.AddError("IPPool Not Updated", apiErrorText(err))
		return
	}
	allocated, blocks := plan.Allocated, plan.Blocks // refreshed by the next Read
	plan.fill(ctx, api, pool, nil, &resp.Diagnostics)
	plan.Allocated, plan.Blocks = allocated, blocks
	if plan.Allocated.IsUnknown() || plan.Blocks.IsUnknown() {
		usage := calico.UsageOf(pool.Prefix(), r.blocks(ctx, api, &resp.Diagnostics))
		plan.Allocated, plan.Blocks = types.Int64Value(int64(usage.Used)), types.Int64Value(int64(usage.Blocks))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *calicoIPPoolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state calicoIPPoolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, ctx, cancel := r.data.begin(ctx, state.Timeouts.Delete, calicoPoolDrainTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	api := calicoAPI(ctx, client, &resp.Diagnostics)
	if api == nil {
		return
	}
	// As for a disable: checked live and deleted before another pool of this run is checked.
	r.data.poolOut.Lock()
	defer r.data.poolOut.Unlock()
	if r.checkPoolsLeft(ctx, client, api, &state, true, false, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	res, err := api.DeleteIPPool(ctx, client, state.Name.ValueString(), calico.DeletePoolOptions{
		Policy: state.DeletionPolicy.ValueString(), ReleaseLeaked: state.ReleaseLeaked.ValueBool(), FieldManager: client.FieldManager,
	})
	if err != nil {
		resp.Diagnostics.AddError("IPPool Not Deleted", apiErrorText(err))
		return
	}
	if len(res.Released) > 0 {
		resp.Diagnostics.AddWarning("Leaked Addresses Released",
			fmt.Sprintf("Released %d address(es) whose pods no longer exist: %s.", len(res.Released), calico.DescribeAllocations(res.Released)))
	}
	if len(res.Remained) > 0 {
		detail := fmt.Sprintf("IPPool %s was deleted while its blocks still held %s.", state.Name.ValueString(), calico.DescribeAllocations(res.Remained))
		if len(calico.ByClass(res.Remained, calico.AllocTunnel)) > 0 {
			detail += " " + calico.TunnelNote
		}
		if len(calico.ByClass(res.Remained, calico.AllocLeaked)) > 0 {
			detail += " Set release_leaked = true to release leaked addresses on destroy, or run `calicoctl ipam release`."
		}
		resp.Diagnostics.AddWarning("Addresses Left in the Deleted Pool's Blocks", detail)
	}
}

// checkPoolsLeft refuses to take the enabled pool of state out of service (disable or delete)
// when no other enabled pool of its family would give pods addresses: at plan (planned true)
// counting the pools this run plans enabled, at apply against the live pools alone. A delete
// with deletion_policy = "force" has said it accepts that.
func (r *calicoIPPoolResource) checkPoolsLeft(ctx context.Context, client *k8sops.Client, api *calico.CalicoAPI, state *calicoIPPoolModel, deleting, planned bool, diags *diag.Diagnostics) {
	if state.Disabled.ValueBool() || deleting && state.DeletionPolicy.ValueString() == calico.DeleteForce {
		return // out of service already, or forced
	}
	pools, err := api.ListIPPools(ctx)
	if err != nil {
		diags.AddError("Calico Not Readable", "Whether another pool would still give pods addresses could not be checked: "+apiErrorText(err))
		return
	}
	if planned {
		pools = r.data.poolsLeft(pools)
	}
	errs, warnings := calico.CheckPoolsLeft(state.Name.ValueString(), state.CIDR.ValueString(), state.NodeSelector.ValueString(), pools, nodeLabels(ctx, client))
	for _, f := range errs {
		diags.AddError(f.Summary, f.Detail) // on destroy there is no attribute to point at
	}
	addWarnings(diags, warnings)
}

// nodeLabels reads the nodes' labels for CheckPoolsLeft, when it needs them.
func nodeLabels(ctx context.Context, client *k8sops.Client) func() (map[string]map[string]string, error) {
	return func() (map[string]map[string]string, error) { return calico.NodeLabels(ctx, client) }
}

// checkLivePods says at plan what the delete will do about the live pods holding addresses in
// the pool, by deletion_policy: refuse_if_allocated is refused now (the apply would refuse
// anyway), wait_for_drain warns that the apply waits for them to restart elsewhere, naming them
// and how long it waits. force warns on its own.
func checkLivePods(ctx context.Context, api *calico.CalicoAPI, client *k8sops.Client, state *calicoIPPoolModel, diags *diag.Diagnostics) {
	policy := state.DeletionPolicy.ValueString()
	pfx, err := netip.ParsePrefix(state.CIDR.ValueString())
	if policy == calico.DeleteForce || err != nil {
		return
	}
	allocs, err := api.PoolAllocations(ctx, client, pfx.Masked())
	if err != nil {
		diags.AddWarning("Calico IPAM Not Readable", "Whether live pods hold addresses in the pool could not be checked: "+apiErrorText(err))
		return
	}
	live := calico.ByClass(allocs, calico.AllocLivePod)
	if len(live) == 0 {
		return
	}
	name, held := state.Name.ValueString(), calico.DescribeAllocations(allocs)
	tunnels := ""
	if len(calico.ByClass(allocs, calico.AllocTunnel)) > 0 {
		tunnels = " " + calico.TunnelNote
	}
	if policy == calico.DeleteRefuseIfAllocated {
		diags.AddError("IPPool Holds Live Pods", fmt.Sprintf("IPPool %s (%s) holds %s. Its deletion_policy = %q refuses to "+
			"delete it while live pods hold addresses, so nothing was changed. Restart them first so they take addresses "+
			"from another pool (k8scidr_workload_roll with pod_cidrs = [%q] on its k8scidr_workload_restarts data source), "+
			"then plan the delete again; or set deletion_policy = \"%s\" to disable the pool and wait for them.%s",
			name, pfx.Masked(), held, policy, pfx.Masked(), calico.DeleteWaitForDrain, tunnels))
		return
	}
	timeout, d := state.Timeouts.Delete(ctx, calicoPoolDrainTimeout)
	diags.Append(d...)
	diags.AddWarning("Delete Waits for Live Pods", fmt.Sprintf("IPPool %s (%s) holds %s. The delete disables the pool and waits "+
		"up to %s (timeouts.delete) until none holds an address in it; nothing restarts them. Roll them in an earlier apply "+
		"(k8scidr_workload_roll with pod_cidrs = [%q]), or the delete fails when the wait ends and leaves the pool "+
		"disabled, with every pod still working.%s", name, pfx.Masked(), held, timeout, pfx.Masked(), tunnels))
}

func (r *calicoIPPoolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("deletion_policy"), calico.DeleteWaitForDrain)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("release_leaked"), false)...)
}

type calicoIPPoolModel struct {
	Name             types.String   `tfsdk:"name"`
	CIDR             types.String   `tfsdk:"cidr"`
	BlockSize        types.Int64    `tfsdk:"block_size"`
	IPIPMode         types.String   `tfsdk:"ipip_mode"`
	VXLANMode        types.String   `tfsdk:"vxlan_mode"`
	NATOutgoing      types.Bool     `tfsdk:"nat_outgoing"`
	Disabled         types.Bool     `tfsdk:"disabled"`
	DisableBGPExport types.Bool     `tfsdk:"disable_bgp_export"`
	NodeSelector     types.String   `tfsdk:"node_selector"`
	AllowedUses      types.Set      `tfsdk:"allowed_uses"`
	AssignmentMode   types.String   `tfsdk:"assignment_mode"`
	DeletionPolicy   types.String   `tfsdk:"deletion_policy"`
	ReleaseLeaked    types.Bool     `tfsdk:"release_leaked"`
	APIGroup         types.String   `tfsdk:"api_group"`
	Capacity         types.Number   `tfsdk:"capacity"`
	Allocated        types.Int64    `tfsdk:"allocated"`
	Blocks           types.Int64    `tfsdk:"blocks"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
}

// settings is the pool the plan asks for; ok is false while any managed value is unknown.
func (m calicoIPPoolModel) settings(ctx context.Context, diags *diag.Diagnostics) (calico.PoolSettings, bool) {
	for _, v := range []attr.Value{m.CIDR, m.BlockSize, m.IPIPMode, m.VXLANMode, m.NATOutgoing, m.Disabled, m.DisableBGPExport,
		m.NodeSelector, m.AllowedUses, m.AssignmentMode} {
		if v.IsUnknown() {
			return calico.PoolSettings{}, false
		}
	}
	s := calico.PoolSettings{
		CIDR: m.CIDR.ValueString(), BlockSize: int(m.BlockSize.ValueInt64()), IPIPMode: m.IPIPMode.ValueString(),
		VXLANMode: m.VXLANMode.ValueString(), NATOutgoing: m.NATOutgoing.ValueBool(), Disabled: m.Disabled.ValueBool(),
		DisableBGPExport: m.DisableBGPExport.ValueBool(), NodeSelector: m.NodeSelector.ValueString(),
		AssignmentMode: m.AssignmentMode.ValueString(),
	}
	if !m.AllowedUses.IsNull() {
		diags.Append(m.AllowedUses.ElementsAs(ctx, &s.AllowedUses, false)...)
		calico.SortAllowedUses(s.AllowedUses)
	}
	return s, true
}

// fill sets the computed values from the pool as the cluster has it.
func (m *calicoIPPoolModel) fill(ctx context.Context, api *calico.CalicoAPI, p *calico.IPPool, usage *calico.PoolUsage, diags *diag.Diagnostics) {
	s := p.Settings
	m.Name, m.CIDR = types.StringValue(p.Name), types.StringValue(s.CIDR)
	m.BlockSize = types.Int64Value(int64(s.BlockSize))
	m.IPIPMode, m.VXLANMode = types.StringValue(s.IPIPMode), types.StringValue(s.VXLANMode)
	m.NATOutgoing, m.Disabled, m.DisableBGPExport = types.BoolValue(s.NATOutgoing), types.BoolValue(s.Disabled), types.BoolValue(s.DisableBGPExport)
	m.NodeSelector = types.StringValue(s.NodeSelector)
	m.AllowedUses = types.SetNull(types.StringType)
	if s.AllowedUses != nil {
		var d diag.Diagnostics
		m.AllowedUses, d = types.SetValueFrom(ctx, types.StringType, s.AllowedUses)
		diags.Append(d...)
	}
	m.AssignmentMode = types.StringNull()
	if s.AssignmentMode != "" {
		m.AssignmentMode = types.StringValue(s.AssignmentMode)
	}
	m.APIGroup = types.StringValue(api.Group)
	m.Capacity = types.NumberValue(new(big.Float).SetInt(p.Capacity()))
	if usage != nil {
		m.Allocated, m.Blocks = types.Int64Value(int64(usage.Used)), types.Int64Value(int64(usage.Blocks))
	}
}

// applyCreateDefaults fills calicoctl's defaults for what the configuration leaves unset.
func (m *calicoIPPoolModel) applyCreateDefaults(ctx context.Context, api *calico.CalicoAPI, diags *diag.Diagnostics) {
	str := func(v *types.String, def string) {
		if v.IsUnknown() {
			*v = types.StringValue(def)
		}
	}
	boolean := func(v *types.Bool) {
		if v.IsUnknown() {
			*v = types.BoolValue(false)
		}
	}
	if m.BlockSize.IsUnknown() {
		m.BlockSize = types.Int64Value(int64(calico.DefaultBlockSize(m.CIDR.ValueString())))
	}
	str(&m.IPIPMode, calico.EncapNever)
	str(&m.VXLANMode, calico.EncapNever)
	str(&m.NodeSelector, calico.DefaultNodeSelector)
	boolean(&m.NATOutgoing)
	boolean(&m.Disabled)
	boolean(&m.DisableBGPExport)
	if m.AssignmentMode.IsUnknown() && api.Supports(calico.FieldAssignmentMode) {
		m.AssignmentMode = types.StringValue(calico.DefaultAssignmentMode)
	}
	if m.AllowedUses.IsUnknown() && api.Supports(calico.FieldAllowedUses) {
		var d diag.Diagnostics
		m.AllowedUses, d = types.SetValueFrom(ctx, types.StringType, calico.DefaultAllowedUses)
		diags.Append(d...)
	}
}
