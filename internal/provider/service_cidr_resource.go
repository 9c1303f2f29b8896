// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Resource k8scidr_service_cidr: an additional Service IP range (a ServiceCIDR object).
package provider

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
)

var (
	_ resource.ResourceWithConfigure      = (*serviceCIDRResource)(nil)
	_ resource.ResourceWithImportState    = (*serviceCIDRResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*serviceCIDRResource)(nil)
	_ resource.ResourceWithValidateConfig = (*serviceCIDRResource)(nil)
)

// serviceCIDRTimeout is the default for create, update and delete: Ready comes within seconds,
// but deletion waits for the controller-manager's 10 s grace after the last IP goes.
const serviceCIDRTimeout = 5 * time.Minute

type serviceCIDRResource struct {
	data *providerData
}

func newServiceCIDRResource() resource.Resource { return &serviceCIDRResource{} }

func (r *serviceCIDRResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_cidr"
}

var conditionType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"type": types.StringType, "status": types.StringType, "reason": types.StringType, "message": types.StringType,
}}

func (r *serviceCIDRResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An additional Service IP range: a `ServiceCIDR` object (`networking.k8s.io/v1`, `v1beta1` or " +
			"`v1alpha1`, whichever the cluster serves). Create waits until the range is Ready to allocate from; destroy " +
			"waits until no Service IP depends on it any more.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the ServiceCIDR. The apiserver's own range, `kubernetes`, can be imported but not created.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          []validator.String{subdomainName("a ServiceCIDR name")},
			},
			"cidrs": schema.ListAttribute{
				Required:    true,
				ElementType: types.StringType,
				MarkdownDescription: "One range, or two of different IP families. Appending the second family is done in place " +
					"(Kubernetes 1.33+); any other change replaces the ServiceCIDR.",
				Validators: []validator.List{noNulls(cidrRule)},
			},
			"wait_for_deletion": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Whether destroy waits until the range is gone. With `false`, destroy returns as soon as " +
					"the range is Terminating: it then takes no new allocations while the Services in it move. Default `true`.",
			},
			"api_version": schema.StringAttribute{
				Computed: true, MarkdownDescription: "API version the ServiceCIDR is managed through.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"ready":      schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether the range is Ready to allocate from."},
			"conditions": schema.ListAttribute{Computed: true, ElementType: conditionType, MarkdownDescription: "Status conditions."},
			"capacity": schema.NumberAttribute{Computed: true,
				MarkdownDescription: "Allocatable addresses: every address but the network address and, for IPv4, the broadcast address."},
			"allocated": schema.Int64Attribute{Computed: true, MarkdownDescription: "IPAddress objects inside the range."},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, serviceCIDRTimeout, serviceCIDRTimeout, serviceCIDRTimeout),
		},
	}
}

// ValidateConfig checks the ranges as the apiserver and its allocator will, at plan time.
func (r *serviceCIDRResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cidrs types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cidrs"), &cidrs)...)
	if resp.Diagnostics.HasError() || cidrs.IsNull() || !complete(cidrs) {
		return
	}
	strs := stringList(ctx, cidrs, &resp.Diagnostics)
	addFindings(&resp.Diagnostics, k8sops.ValidateServiceCIDRs(k8sops.At("cidrs"), strs), true)
}

func (r *serviceCIDRResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan refuses to create the apiserver's own range, and decides whether a change of
// cidrs is an in-place append of the second family or a replacement.
func (r *serviceCIDRResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		r.warnDefaultRangeDeletion(ctx, req, resp)
		return
	}
	var plan, state serviceCIDRModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if req.State.Raw.IsNull() {
		if plan.Name.ValueString() == k8sops.DefaultServiceCIDRName {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Cannot Create the Default ServiceCIDR",
				"The \"kubernetes\" ServiceCIDR belongs to the apiserver, which creates it from --service-cluster-ip-range. "+
					"Import it instead: terraform import <address> kubernetes.")
		}
		if r.data != nil && complete(plan.CIDRs) && !plan.Name.IsUnknown() {
			r.data.plannedRanges.Store(plan.Name.ValueString(), k8sops.ServiceCIDR{Name: plan.Name.ValueString(),
				CIDRs: stringList(ctx, plan.CIDRs, &resp.Diagnostics), Ready: true})
		}
		return
	}
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || plan.CIDRs.IsUnknown() || plan.CIDRs.Equal(state.CIDRs) {
		return
	}
	oldCIDRs, newCIDRs := stringList(ctx, state.CIDRs, &resp.Diagnostics), stringList(ctx, plan.CIDRs, &resp.Diagnostics)
	if !appendsOtherFamily(oldCIDRs, newCIDRs) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("cidrs"))
		return
	}
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	caps, err := client.Capabilities()
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", apiErrorText(err))
		return
	}
	if caps.ServerMinor < 33 {
		resp.Diagnostics.AddAttributeWarning(path.Root("cidrs"), "ServiceCIDR Will Be Replaced",
			fmt.Sprintf("Kubernetes %s cannot add a second IP family to an existing ServiceCIDR (1.33+ can), so it is replaced.", caps.ServerVersion))
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("cidrs"))
	}
}

// warnDefaultRangeDeletion warns at plan when destroying the range would break the cluster: the
// default range, or one that bridges live in.
func (r *serviceCIDRResource) warnDefaultRangeDeletion(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	var name types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("name"), &name)...)
	if r.data == nil || r.data.client == nil {
		return
	}
	// A k8scidr_service_moves of this run with dns_bridge = false plans the DNS bridge's removal,
	// which its recreation applies before this range goes (it depends on the range through the
	// data source's keep_cidrs): only the other bridges hold the range then.
	if held, err := recreation.BridgesHolding(ctx, r.data.client, name.ValueString(), r.data.dnsBridgeOff.Load()); err == nil && len(held) > 0 {
		resp.Diagnostics.AddWarning("Bridges Live in This Range", fmt.Sprintf("ServiceCIDR %s holds the IPs of %d bridges of "+
			"k8scidr_service_recreation, and no other Ready range does: %s. Its deletion cannot finish while they exist, and a "+
			"bridge an interrupted apply still has to make could not get its IP. Remove the bridges first (old_ip_bridges = "+
			"\"dns\", dns_bridge = false), or keep this range (or a k8scidr_service_cidr covering their IPs).",
			name.ValueString(), len(held), strings.Join(held, "; ")))
	}
	if name.ValueString() != k8sops.DefaultServiceCIDRName {
		return
	}
	caps, err := r.data.client.Capabilities()
	if err != nil {
		return // Destroy reports cluster errors itself.
	}
	if risk := servicecidr.DefaultRangeDeletionRisk(caps); risk != "" {
		resp.Diagnostics.AddWarning("Deleting the Default ServiceCIDR Stops Service Creation", risk)
	}
}

// appendsOtherFamily reports whether next is prev plus one range of the other IP family.
func appendsOtherFamily(prev, next []string) bool {
	if len(prev) != 1 || len(next) != 2 || prev[0] != next[0] {
		return false
	}
	a, errA := netip.ParsePrefix(next[0])
	b, errB := netip.ParsePrefix(next[1])
	return errA == nil && errB == nil && a.Addr().Is4() != b.Addr().Is4()
}

func (r *serviceCIDRResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan serviceCIDRModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	client, ctx, cancel := r.data.begin(ctx, plan.Timeouts.Create, serviceCIDRTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	ctx, warnings := k8sops.CollectWarnings(ctx)
	sc, err := servicecidr.CreateServiceCIDR(ctx, client, plan.Name.ValueString(), stringList(ctx, plan.CIDRs, &resp.Diagnostics))
	addServerWarnings(&resp.Diagnostics, warnings)
	if err != nil {
		resp.Diagnostics.AddError("ServiceCIDR Not Created", apiErrorText(err)+". "+serviceCIDRRefusalHint(err))
		return
	}
	resp.Diagnostics.Append(plan.fill(ctx, sc)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *serviceCIDRResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceCIDRModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	sc, err := k8sops.GetServiceCIDR(ctx, client, state.Name.ValueString())
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("ServiceCIDR Not Readable", apiErrorText(err))
		return
	}
	resp.Diagnostics.Append(state.fill(ctx, sc)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update appends the second IP family; every other change of cidrs is a replacement.
func (r *serviceCIDRResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state serviceCIDRModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, ctx, cancel := r.data.begin(ctx, plan.Timeouts.Update, serviceCIDRTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	var sc *k8sops.ServiceCIDR
	var err error
	ctx, warnings := k8sops.CollectWarnings(ctx)
	if plan.CIDRs.Equal(state.CIDRs) {
		sc, err = k8sops.GetServiceCIDR(ctx, client, plan.Name.ValueString())
	} else {
		sc, err = servicecidr.AppendServiceCIDRFamily(ctx, client, plan.Name.ValueString(), stringList(ctx, plan.CIDRs, &resp.Diagnostics))
	}
	addServerWarnings(&resp.Diagnostics, warnings)
	if err != nil {
		resp.Diagnostics.AddError("ServiceCIDR Not Updated", apiErrorText(err)+". "+serviceCIDRRefusalHint(err))
		return
	}
	resp.Diagnostics.Append(plan.fill(ctx, sc)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *serviceCIDRResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state serviceCIDRModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, ctx, cancel := r.data.begin(ctx, state.Timeouts.Delete, serviceCIDRTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	name := state.Name.ValueString()
	err := servicecidr.DeleteServiceCIDR(ctx, client, name, state.WaitForDeletion.ValueBool())
	if err == nil {
		return
	}
	detail := err.Error()
	if errors.Is(err, servicecidr.ErrServiceCIDRHeld) {
		detail += ". Move or delete those Services first (k8scidr_service_recreation), or set wait_for_deletion = false " +
			"to leave the range Terminating, where it takes no new allocations."
		listCtx, cancelList := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancelList()
		if held, herr := recreation.BridgesHolding(listCtx, client, name, false); herr == nil && len(held) > 0 {
			detail += fmt.Sprintf(" Bridges of k8scidr_service_recreation hold it: %s; they go when old_ip_bridges is set "+
				"to \"dns\" (old-IP bridges) or dns_bridge to false (the DNS bridge).", strings.Join(held, "; "))
		}
		if name == k8sops.DefaultServiceCIDRName {
			detail += " The default range is held by default/kubernetes and recreated from --service-cluster-ip-range: " +
				"change the apiserver flags first (KEP-1880 procedure); a recreated object counts as deleted."
		}
	}
	resp.Diagnostics.AddError("ServiceCIDR Not Deleted", detail)
}

func (r *serviceCIDRResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_deletion"), true)...)
}

// serviceCIDRRefusalHint says what to do after a failed write: an admission policy's refusal
// (Forbidden) needs the policy changed; anything else is most likely kube-controller-manager.
func serviceCIDRRefusalHint(err error) string {
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return "The apiserver refused the range and gave the reason above. If an admission policy restricts ServiceCIDRs " +
			"(k8scidr_service_cidr_policy), add the range to its allowed_cidrs or create the range before the policy."
	}
	return "If the object was created but is not Ready, the next apply replaces it; check kube-controller-manager."
}

// addServerWarnings shows the apiserver's warnings (e.g. an admission policy in Warn mode).
func addServerWarnings(diags *diag.Diagnostics, w *k8sops.Warnings) {
	for _, text := range w.List() {
		diags.AddWarning("Kubernetes API Warning", text)
	}
}

type serviceCIDRModel struct {
	Name            types.String   `tfsdk:"name"`
	CIDRs           types.List     `tfsdk:"cidrs"`
	WaitForDeletion types.Bool     `tfsdk:"wait_for_deletion"`
	APIVersion      types.String   `tfsdk:"api_version"`
	Ready           types.Bool     `tfsdk:"ready"`
	Conditions      types.List     `tfsdk:"conditions"`
	Capacity        types.Number   `tfsdk:"capacity"`
	Allocated       types.Int64    `tfsdk:"allocated"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

// fill copies what the cluster says into the model.
func (m *serviceCIDRModel) fill(ctx context.Context, sc *k8sops.ServiceCIDR) diag.Diagnostics {
	var diags, d diag.Diagnostics
	m.Name = types.StringValue(sc.Name)
	m.CIDRs, d = types.ListValueFrom(ctx, types.StringType, sc.CIDRs)
	diags.Append(d...)
	m.APIVersion = types.StringValue(sc.APIVersion)
	m.Ready = types.BoolValue(sc.Ready)
	m.Capacity = types.NumberValue(new(big.Float).SetInt(sc.Capacity))
	m.Allocated = types.Int64Value(int64(sc.Allocated))
	conds := make([]attr.Value, 0, len(sc.Conditions))
	for _, c := range sc.Conditions {
		obj, d := types.ObjectValue(conditionType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue(c.Type), "status": types.StringValue(c.Status),
			"reason": types.StringValue(c.Reason), "message": types.StringValue(c.Message),
		})
		diags.Append(d...)
		conds = append(conds, obj)
	}
	m.Conditions, d = types.ListValue(conditionType, conds)
	diags.Append(d...)
	if m.WaitForDeletion.IsNull() || m.WaitForDeletion.IsUnknown() {
		m.WaitForDeletion = types.BoolValue(true)
	}
	return diags
}
