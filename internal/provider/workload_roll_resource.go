// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Resource k8scidr_workload_roll: restart exactly the workloads a reviewed plan showed, and wait.
package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/workloadroll"
)

var (
	_ resource.ResourceWithConfigure      = (*workloadRollResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*workloadRollResource)(nil)
	_ resource.ResourceWithValidateConfig = (*workloadRollResource)(nil)
)

const workloadRollTimeout = 30 * time.Minute

type workloadRollResource struct {
	data *providerData
}

func newWorkloadRollResource() resource.Resource { return &workloadRollResource{} }

func (r *workloadRollResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_workload_roll"
}

func (r *workloadRollResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keyList := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: desc,
			Validators: listOf(workloadKeyValidator())}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Restarts exactly the workloads of a `k8scidr_workload_restarts` data source, which the plan " +
			"shows, the way `kubectl rollout restart` does (the `kubectl.kubernetes.io/restartedAt` pod-template " +
			"annotation), and waits for each rollout by kubectl's rollout-status rules. Apply re-checks each workload " +
			"first: one that is gone, can no longer be rolled, or has no pod matching the triggers any more is not " +
			"restarted but reported in `not_rolled`. A refresh empties `workloads`, so the next plan shows only what the " +
			"data source still finds. Destroy forgets.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "Constant identifier.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			// One object, the restarts data source whole: the workloads and the triggers they were
			// found by cannot be wired apart.
			"plan": schema.ObjectAttribute{Optional: true, AttributeTypes: rollPlanType.AttrTypes,
				MarkdownDescription: "What to restart: a `k8scidr_workload_restarts` data source, whole (`plan = " +
					"data.k8scidr_workload_restarts.NAME`; Terraform keeps the attributes listed here and drops the rest). " +
					"`workloads`: the workloads to restart (`namespace/kind/name`; bare pods to evict through the Eviction API " +
					"as `namespace/pod/name`). `pod_cidrs`, `started_before`, `include_host_network`: the data source's triggers. At apply a workload " +
					"none of whose pods matches them any more is not restarted. After a refresh `workloads` reads as empty. " +
					"Unset, only `include` is rolled.",
				Validators: []validator.Object{noNulls("must be what the `k8scidr_workload_restarts` data source gives")}},
			"include": keyList("Workloads (`namespace/kind/name`) rolled whatever their pods, e.g. " +
				"`kube-system/daemonset/calico-node` to move the nodes' tunnel addresses: once, by the apply that adds " +
				"them here (or creates the resource). Unset, only `workloads` is rolled."),
			"first": keyList("Workloads (`namespace/kind/name`) rolled and waited for, in this order, before the rest, e.g. " +
				"`kube-system/deployment/coredns`. Unset, none goes ahead: all roll `parallelism` at a time."),
			"parallelism": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(5),
				MarkdownDescription: "Concurrent rollouts after `first`. Default `5`.",
				Validators:          []validator.Int64{int64validator.Between(1, 100)}},
			"wait_for_rollout": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Wait for each rollout to finish, and for the pods it replaced to terminate (each at most its grace period " +
					"and 15 s more): a terminating pod still runs with the DNS server and Service IPs it started with, and the " +
					"bridges' removal counts it. Default `true`."},
			"continue_on_error": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Keep rolling the others when a rollout fails; failures are then warnings. Default `false`."},
			"rolled": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "After apply: each rolled workload and how long its rollout took."},
			"not_rolled": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "After apply: each planned workload that was not restarted because it no longer needed it or " +
					"could no longer be, with the reason."},
			"completed_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time the last apply that rolled something finished."},
		},
		Blocks: map[string]schema.Block{"timeouts": timeoutsBlock(ctx, workloadRollTimeout, workloadRollTimeout, 0)},
	}
}

func (r *workloadRollResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks what can be checked without the cluster.
func (r *workloadRollResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m workloadRollModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Plan.IsNull() && m.Include.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("plan"), "Nothing To Roll",
			"Set plan (a k8scidr_workload_restarts data source, whole) or include: otherwise nothing is rolled.")
	}
	v := m.values()
	at := path.Root("plan")
	rfc3339Validator().checkAt(at.AtName("started_before"), v.StartedBefore, &resp.Diagnostics)
	for i, e := range v.PodCIDRs.Elements() {
		s, _ := e.(types.String)
		cidrValidator().checkAt(at.AtName("pod_cidrs").AtListIndex(i), s, &resp.Diagnostics)
	}
	for i, e := range v.Workloads.Elements() {
		s, _ := e.(types.String)
		workloadKeyValidator().checkAt(at.AtName("workloads").AtListIndex(i), s, &resp.Diagnostics)
	}
	if complete(m.Plan) && !m.Plan.IsNull() && v.PodCIDRs.IsNull() && v.StartedBefore.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("plan"), "Triggers Missing",
			"plan has neither pod_cidrs nor started_before: the apply restarts a listed workload only while one of its pods "+
				"still matches them. Give plan the k8scidr_workload_restarts data source whole: plan = data.k8scidr_workload_restarts.NAME.")
	}
}

// ModifyPlan plans the computed values from the configuration and prior state only; it reads
// the cluster only to warn about included workloads that do not exist.
func (r *workloadRollResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy forgets
	}
	var plan, state workloadRollModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	creating := req.State.Raw.IsNull()
	if !creating {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID = types.StringValue("workload-roll")
	if !complete(plan.Plan) || !complete(plan.Include) {
		resp.Diagnostics.AddWarning("Workloads To Restart Not Known Until Apply",
			"plan or include is known only during apply, so this plan cannot show which workloads restart, and the "+
				"apply will restart workloads nobody reviewed. The usual cause is a k8scidr_workload_restarts data source that "+
				"references or depends_on a resource with changes in this plan: give it only variables, locals and data sources.")
		plan.Rolled, plan.NotRolled, plan.CompletedAt = types.MapUnknown(types.StringType), types.MapUnknown(types.StringType), types.StringUnknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		if complete(plan.Include) {
			r.warnMissing(ctx, workloadroll.NormalizeRollKeys(stringList(ctx, plan.Include, &resp.Diagnostics)), &resp.Diagnostics)
		}
		return
	}
	var prior *workloadRollModel
	if !creating {
		prior = &state
	}
	p := plan.planned(ctx, prior, &resp.Diagnostics)
	switch {
	case len(p.Workloads) > 0 || len(p.Include) > 0:
		plan.Rolled, plan.NotRolled, plan.CompletedAt = types.MapUnknown(types.StringType), types.MapUnknown(types.StringType), types.StringUnknown()
	case creating:
		plan.Rolled, plan.NotRolled, plan.CompletedAt = stringMapValue(nil, &resp.Diagnostics), stringMapValue(nil, &resp.Diagnostics), types.StringUnknown()
	default:
		plan.Rolled, plan.NotRolled, plan.CompletedAt = state.Rolled, state.NotRolled, state.CompletedAt
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	r.warnMissing(ctx, p.Include, &resp.Diagnostics)
	if (len(p.Workloads) > 0 || len(p.Include) > 0) && r.data != nil && r.data.client != nil {
		found, err := preflight.RollHazards(ctx, r.data.client, p)
		warnHazards(found, err, &resp.Diagnostics)
	}
}

// warnMissing warns about newly included workloads that do not exist: probably a typo.
func (r *workloadRollResource) warnMissing(ctx context.Context, include []string, diags *diag.Diagnostics) {
	if len(include) == 0 || r.data == nil || r.data.client == nil {
		return
	}
	missing, err := workloadroll.MissingWorkloads(ctx, r.data.client, include)
	if err != nil {
		diags.AddWarning("Cluster Not Readable", "The plan could not check that the included workloads exist: "+apiErrorText(err))
	}
	for _, key := range missing {
		diags.AddAttributeWarning(path.Root("include"), "Workload Not Found",
			fmt.Sprintf("%s does not exist, so it will not be rolled. Check the namespace, kind and name "+
				"(kube-system/daemonset/calico-node, or calico-system/daemonset/calico-node under the operator).", key))
	}
}

func (r *workloadRollResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan workloadRollModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.apply(ctx, &plan, nil, plan.Timeouts.Create, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *workloadRollResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state workloadRollModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if r.apply(ctx, &plan, &state, plan.Timeouts.Update, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// apply re-checks the planned workloads against the cluster, rolls those that still need it,
// and fills the computed values.
func (r *workloadRollResource) apply(ctx context.Context, plan, prior *workloadRollModel,
	timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), diags *diag.Diagnostics) bool {
	p := plan.planned(ctx, prior, diags)
	if len(p.Workloads) == 0 && len(p.Include) == 0 {
		plan.fillApplied(nil, nil, prior, diags)
		return !diags.HasError()
	}
	client, ctx, cancel := r.data.begin(ctx, timeout, workloadRollTimeout, diags)
	defer cancel()
	if client == nil {
		return false
	}
	snap, err := workloadroll.TakeRollSnapshot(ctx, client)
	if err != nil {
		diags.AddError("Cluster Not Readable", apiErrorText(err))
		return false
	}
	steps := workloadroll.PrepareRoll(snap, p)
	if len(steps.NotRolled) > 0 {
		diags.AddWarning("Planned Restarts That No Longer Apply Were Not Made",
			fmt.Sprintf("%d planned workloads were left alone (listed in not_rolled):\n%s\nThe next plan shows what still matches.",
				len(steps.NotRolled), describeMap(steps.NotRolled)))
	}
	rolled, err := workloadroll.ExecuteRoll(ctx, client, steps, workloadroll.RollExecOptions{
		Parallelism: int(plan.Parallelism.ValueInt64()), Wait: plan.WaitForRollout.ValueBool(),
		ContinueOnError: plan.ContinueOnError.ValueBool(),
		Log:             func(format string, args ...any) { tflog.Info(ctx, fmt.Sprintf(format, args...)) },
	})
	done := map[string]string{}
	for _, rl := range rolled {
		if rl.Err == nil {
			done[rl.Key] = rl.Duration.Round(time.Millisecond).String()
		}
	}
	if err != nil {
		if !plan.ContinueOnError.ValueBool() {
			diags.AddError("Rollout Failed", fmt.Sprintf("%s. Rolled before the failure: %s. The next plan shows what still matches.",
				apiErrorText(err), describeRolled(done)))
			return false
		}
		diags.AddWarning("Some Rollouts Failed", apiErrorText(err)+". continue_on_error is set: the others were rolled.")
	}
	plan.fillApplied(done, steps.NotRolled, prior, diags)
	return !diags.HasError()
}

// fillApplied sets the computed values after an apply; what the plan knew stays as planned.
func (m *workloadRollModel) fillApplied(done, notRolled map[string]string, prior *workloadRollModel, diags *diag.Diagnostics) {
	if m.Rolled.IsUnknown() {
		m.Rolled = stringMapValue(done, diags)
	}
	if m.NotRolled.IsUnknown() {
		m.NotRolled = stringMapValue(notRolled, diags)
	}
	if m.CompletedAt.IsUnknown() {
		if len(done) > 0 || prior == nil {
			m.CompletedAt = types.StringValue(time.Now().UTC().Format(time.RFC3339))
		} else {
			m.CompletedAt = prior.CompletedAt
		}
	}
}

func describeRolled(done map[string]string) string {
	if len(done) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(done)), ", ")
}

func describeMap(m map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("- %s: %s", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// Read sets the plan's workloads to empty, the converged value: only the data source computes
// what still matches, so it shows as a diff.
func (r *workloadRollResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state workloadRollModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if !state.Plan.IsNull() {
		v := state.values()
		v.Workloads = ipsValue(nil, &resp.Diagnostics)
		var d diag.Diagnostics
		state.Plan, d = types.ObjectValueFrom(ctx, rollPlanType.AttrTypes, v)
		resp.Diagnostics.Append(d...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *workloadRollResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// planned is what the apply does, from known configuration: the listed workloads, and the
// included ones the prior state did not include yet (all of them on create).
func (m *workloadRollModel) planned(ctx context.Context, prior *workloadRollModel, diags *diag.Diagnostics) workloadroll.PlannedRoll {
	v := m.values()
	p := workloadroll.PlannedRoll{Workloads: stringList(ctx, v.Workloads, diags), First: stringList(ctx, m.First, diags),
		Triggers: triggers(ctx, v.PodCIDRs, v.StartedBefore, v.HostNetwork, diags)}
	var before []string
	if prior != nil {
		before = stringList(ctx, prior.Include, diags)
	}
	p.Include = workloadroll.NewlyIncluded(before, stringList(ctx, m.Include, diags))
	return p
}

type workloadRollModel struct {
	ID              types.String   `tfsdk:"id"`
	Plan            types.Object   `tfsdk:"plan"`
	Include         types.List     `tfsdk:"include"`
	First           types.List     `tfsdk:"first"`
	Parallelism     types.Int64    `tfsdk:"parallelism"`
	WaitForRollout  types.Bool     `tfsdk:"wait_for_rollout"`
	ContinueOnError types.Bool     `tfsdk:"continue_on_error"`
	Rolled          types.Map      `tfsdk:"rolled"`
	NotRolled       types.Map      `tfsdk:"not_rolled"`
	CompletedAt     types.String   `tfsdk:"completed_at"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

// rollPlanType is k8scidr_workload_roll's plan: the attributes of the restarts data source the
// apply acts on. Terraform converts the data source's whole object to it, dropping the rest.
var rollPlanType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"workloads": types.ListType{ElemType: types.StringType}, "pod_cidrs": types.ListType{ElemType: types.StringType},
	"started_before": types.StringType, "include_host_network": types.BoolType,
}}

type rollPlanModel struct {
	Workloads     types.List   `tfsdk:"workloads"`
	PodCIDRs      types.List   `tfsdk:"pod_cidrs"`
	StartedBefore types.String `tfsdk:"started_before"`
	HostNetwork   types.Bool   `tfsdk:"include_host_network"`
}

// values are the plan's attributes: null while the plan is null or unknown (nothing to roll
// but include).
func (m *workloadRollModel) values() rollPlanModel {
	v := rollPlanModel{Workloads: types.ListNull(types.StringType), PodCIDRs: types.ListNull(types.StringType), StartedBefore: types.StringNull(),
		HostNetwork: types.BoolNull()}
	if !m.Plan.IsNull() && !m.Plan.IsUnknown() {
		// Cannot fail: the schema gives the object exactly this type.
		_ = m.Plan.As(context.Background(), &v, basetypes.ObjectAsOptions{})
	}
	return v
}
