// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Resource k8scidr_service_cidr_policy: the admission policy (write-up 002) that restricts which
// ServiceCIDRs may be added.
package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
)

var (
	_ resource.ResourceWithConfigure      = (*serviceCIDRPolicyResource)(nil)
	_ resource.ResourceWithImportState    = (*serviceCIDRPolicyResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*serviceCIDRPolicyResource)(nil)
	_ resource.ResourceWithValidateConfig = (*serviceCIDRPolicyResource)(nil)
)

// serviceCIDRPolicyTimeout bounds writing both objects and the apiserver's type check.
const serviceCIDRPolicyTimeout = 2 * time.Minute

type serviceCIDRPolicyResource struct {
	data *providerData
}

func newServiceCIDRPolicyResource() resource.Resource { return &serviceCIDRPolicyResource{} }

func (r *serviceCIDRPolicyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_cidr_policy"
}

func (r *serviceCIDRPolicyResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Restricts which ServiceCIDRs may be added: a `ValidatingAdmissionPolicy` and its binding " +
			"(both named `name`) over ServiceCIDR creates and range changes, through `admissionregistration.k8s.io/v1` " +
			"(Kubernetes 1.30+) or, on 1.29 with the `ValidatingAdmissionPolicy` gate and its runtime-config, `v1beta1`. With " +
			"`allowed_cidrs`, a range is admitted only when each of its CIDRs lies inside one of them (CEL's `cidr()` " +
			"library, as in the Kubernetes documentation; from 1.30); with `deny_new`, no new range is admitted. The default " +
			"`kubernetes` range is left to kube-apiserver's own identity (`system:apiserver`), which creates it from " +
			"`--service-cluster-ip-range`: nobody else may create it or change its ranges, since exempting it by name " +
			"would let anyone add a `kubernetes` range with any CIDR. Updates that keep a range's CIDRs (finalizer " +
			"removal, labels) are never restricted, so ranges outside the policy can still be retired.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the ValidatingAdmissionPolicy and of its binding.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          []validator.String{subdomainName("a ValidatingAdmissionPolicy name")},
			},
			"allowed_cidrs": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Ranges new ServiceCIDRs must lie inside, e.g. the migration's target and keep-ranges. " +
					"Exactly one of `allowed_cidrs` and `deny_new = true`. Unset, `deny_new` must be `true`. Needs Kubernetes 1.30+ " +
					"(CEL's `cidr()`); on 1.29 create the new range first, then set `deny_new`.",
				Validators: append([]validator.List{listvalidator.SizeAtLeast(1)}, listOf(cidrValidator())...),
			},
			"deny_new": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Admit no new ServiceCIDR at all: the cluster keeps only the apiserver's default range. Default `false`.",
			},
			"validation_actions": schema.SetAttribute{
				Optional: true, Computed: true, ElementType: types.StringType,
				Default: setdefault.StaticValue(types.SetValueMust(types.StringType, []attr.Value{types.StringValue(servicecidr.ActionDeny)})),
				MarkdownDescription: "What a violation does: `Deny` (refuse the request), `Warn` (admit it and return a " +
					"warning), `Audit` (record it in the audit log). `Deny` and `Warn` cannot be combined. Default `[\"Deny\"]`.",
				Validators: append([]validator.Set{setvalidator.SizeAtLeast(1)}, setOf(stringvalidator.OneOf(servicecidr.ValidationActions...))...),
			},
			"in_sync": schema.BoolAttribute{
				Computed: true,
				MarkdownDescription: "Whether the policy and binding in the cluster are what this resource writes. A hand " +
					"edit reads as false, the plan shows the change back to true, and apply rewrites both.",
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, serviceCIDRPolicyTimeout, serviceCIDRPolicyTimeout, serviceCIDRPolicyTimeout),
		},
	}
}

// ValidateConfig requires exactly one of allowed_cidrs and deny_new, and actions the apiserver
// accepts together.
func (r *serviceCIDRPolicyResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m serviceCIDRPolicyModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	denyKnown := !m.DenyNew.IsUnknown()
	deny := m.DenyNew.ValueBool()
	switch {
	case !m.AllowedCIDRs.IsNull() && denyKnown && deny:
		resp.Diagnostics.AddAttributeError(path.Root("deny_new"), "Conflicting Policy Settings",
			"deny_new = true admits no new ServiceCIDR at all, so allowed_cidrs would never apply: set one of them.")
	case m.AllowedCIDRs.IsNull() && denyKnown && !deny:
		resp.Diagnostics.AddAttributeError(path.Root("allowed_cidrs"), "Missing Policy Setting",
			"Set allowed_cidrs to the ranges new ServiceCIDRs must lie inside (e.g. the migration's target range and "+
				"keep-ranges), or deny_new = true to admit none.")
	}
	if m.ValidationActions.IsNull() || m.ValidationActions.IsUnknown() {
		return
	}
	var actions []types.String
	resp.Diagnostics.Append(m.ValidationActions.ElementsAs(ctx, &actions, false)...)
	if slices.ContainsFunc(actions, func(a types.String) bool { return a.IsUnknown() }) {
		return
	}
	if err := servicecidr.ValidateValidationActions(valueStrings(actions)); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("validation_actions"), "Invalid Validation Actions", apiErrorText(err)+".")
	}
}

func (r *serviceCIDRPolicyResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan plans in_sync = true, so a hand-edited policy (in_sync false after refresh) shows
// as a change, and checks on create that the server can enforce a policy at all.
func (r *serviceCIDRPolicyResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("in_sync"), true)...)
	if r.data == nil || r.data.client == nil {
		return
	}
	caps, err := r.data.client.Capabilities()
	if err != nil {
		return // Create reports cluster errors itself.
	}
	if req.State.Raw.IsNull() && !caps.AdmissionPolicyV1 && !caps.AdmissionPolicyV1beta1 {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "ValidatingAdmissionPolicy Not Served",
			fmt.Sprintf("%s (server %s). Turn the API on or upgrade the cluster, or restrict ServiceCIDRs with RBAC instead.", servicecidr.ErrNoAdmissionPolicyAPI, caps.ServerVersion))
		return
	}
	var denyNew types.Bool
	resp.Diagnostics.Append(resp.Plan.GetAttribute(ctx, path.Root("deny_new"), &denyNew)...)
	if !denyNew.ValueBool() && !denyNew.IsUnknown() && caps.ServerMinor < servicecidr.CIDRLibraryMinor {
		resp.Diagnostics.AddAttributeError(path.Root("allowed_cidrs"), "Allowed CIDRs Need Kubernetes 1.30",
			fmt.Sprintf("allowed_cidrs is checked with CEL's cidr() library, which kube-apiserver has from Kubernetes 1.%d; this server "+
				"is %s. Create the new ServiceCIDR first and then set deny_new = true (no new range may be created at all), or "+
				"restrict who may create ServiceCIDRs with RBAC.", servicecidr.CIDRLibraryMinor, caps.ServerVersion))
	}
}

func (r *serviceCIDRPolicyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan serviceCIDRPolicyModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	r.write(ctx, &plan, plan.Timeouts.Create, &resp.State, &resp.Diagnostics)
}

func (r *serviceCIDRPolicyResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan serviceCIDRPolicyModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	r.write(ctx, &plan, plan.Timeouts.Update, &resp.State, &resp.Diagnostics)
}

// write applies the planned policy and binding and records them in state.
func (r *serviceCIDRPolicyResource) write(ctx context.Context, plan *serviceCIDRPolicyModel,
	timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), state *tfsdk.State, diags *diag.Diagnostics) {
	client, ctx, cancel := r.data.begin(ctx, timeout, serviceCIDRPolicyTimeout, diags)
	defer cancel()
	if client == nil {
		return
	}
	p := plan.policy(ctx, diags)
	if diags.HasError() {
		return
	}
	if err := servicecidr.ApplyServiceCIDRPolicy(ctx, client, p); err != nil {
		diags.AddError("ServiceCIDR Policy Not Written", apiErrorText(err)+".")
		return
	}
	plan.InSync = types.BoolValue(true)
	diags.Append(state.Set(ctx, plan)...)
}

func (r *serviceCIDRPolicyResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceCIDRPolicyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	p, err := servicecidr.ReadServiceCIDRPolicy(ctx, client, state.Name.ValueString())
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("ServiceCIDR Policy Not Readable", apiErrorText(err)+".")
		return
	}
	resp.Diagnostics.Append(state.fill(ctx, p)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *serviceCIDRPolicyResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state serviceCIDRPolicyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, ctx, cancel := r.data.begin(ctx, state.Timeouts.Delete, serviceCIDRPolicyTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	if err := servicecidr.DeleteServiceCIDRPolicy(ctx, client, state.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("ServiceCIDR Policy Not Deleted", apiErrorText(err)+".")
	}
}

// ImportState takes the policy's name; Read fills in the rest from the objects.
func (r *serviceCIDRPolicyResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
}

type serviceCIDRPolicyModel struct {
	Name              types.String   `tfsdk:"name"`
	AllowedCIDRs      types.List     `tfsdk:"allowed_cidrs"`
	DenyNew           types.Bool     `tfsdk:"deny_new"`
	ValidationActions types.Set      `tfsdk:"validation_actions"`
	InSync            types.Bool     `tfsdk:"in_sync"`
	Timeouts          timeouts.Value `tfsdk:"timeouts"`
}

// policy is the k8sops policy the model describes.
func (m *serviceCIDRPolicyModel) policy(ctx context.Context, diags *diag.Diagnostics) servicecidr.ServiceCIDRPolicy {
	p := servicecidr.ServiceCIDRPolicy{Name: m.Name.ValueString(), DenyNew: m.DenyNew.ValueBool()}
	for _, s := range stringList(ctx, m.AllowedCIDRs, diags) {
		prefix, err := k8sops.ParseCIDR(s)
		if err != nil {
			diags.AddAttributeError(path.Root("allowed_cidrs"), "Invalid CIDR", apiErrorText(err)+".")
			continue
		}
		p.AllowedCIDRs = append(p.AllowedCIDRs, prefix)
	}
	diags.Append(m.ValidationActions.ElementsAs(ctx, &p.Actions, false)...)
	return p
}

// fill copies what the cluster holds into the model. allowed_cidrs keeps the configuration's
// spelling of a range the cluster holds in canonical form (e.g. upper-case IPv6).
func (m *serviceCIDRPolicyModel) fill(ctx context.Context, p *servicecidr.ServiceCIDRPolicy) diag.Diagnostics {
	var diags, d diag.Diagnostics
	m.Name = types.StringValue(p.Name)
	m.DenyNew = types.BoolValue(p.DenyNew)
	m.InSync = types.BoolValue(p.InSync)
	if len(p.AllowedCIDRs) == 0 {
		m.AllowedCIDRs = types.ListNull(types.StringType)
	} else {
		prior := stringList(ctx, m.AllowedCIDRs, &diags)
		out := make([]string, len(p.AllowedCIDRs))
		for i, c := range p.AllowedCIDRs {
			out[i] = c.String()
			if i < len(prior) {
				if q, err := netip.ParsePrefix(prior[i]); err == nil && q == c {
					out[i] = prior[i]
				}
			}
		}
		m.AllowedCIDRs, d = types.ListValueFrom(ctx, types.StringType, out)
		diags.Append(d...)
	}
	actions := p.Actions
	if len(actions) == 0 {
		actions = []string{servicecidr.ActionDeny} // the binding is gone: the next apply recreates it
		m.InSync = types.BoolValue(false)
	}
	m.ValidationActions, d = types.SetValueFrom(ctx, types.StringType, actions)
	diags.Append(d...)
	return diags
}
