// Resource k8scidr_workload_roll: restart exactly the workloads whose pods must move, and wait.
package provider

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
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

type workloadRollModel struct {
	ID                types.String   `tfsdk:"id"`
	Namespaces        types.Set      `tfsdk:"namespaces"`
	ExcludeNamespaces types.Set      `tfsdk:"exclude_namespaces"`
	Selector          types.String   `tfsdk:"selector"`
	Kinds             types.Set      `tfsdk:"kinds"`
	Include           types.List     `tfsdk:"include"`
	First             types.List     `tfsdk:"first"`
	PodCIDRs          types.List     `tfsdk:"pod_cidrs"`
	StartedBefore     types.String   `tfsdk:"started_before"`
	Parallelism       types.Int64    `tfsdk:"parallelism"`
	WaitForRollout    types.Bool     `tfsdk:"wait_for_rollout"`
	ContinueOnError   types.Bool     `tfsdk:"continue_on_error"`
	EvictBarePods     types.Bool     `tfsdk:"evict_bare_pods"`
	Pending           types.Map      `tfsdk:"pending"`
	Unmanaged         types.Map      `tfsdk:"unmanaged"`
	Rolled            types.Map      `tfsdk:"rolled"`
	CompletedAt       types.String   `tfsdk:"completed_at"`
	Timeouts          timeouts.Value `tfsdk:"timeouts"`
}

func (r *workloadRollResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keyList := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	kinds, _ := types.SetValueFrom(ctx, types.StringType, k8sops.DefaultRollKinds)
	resp.Schema = schema.Schema{
		MarkdownDescription: "Restarts exactly the workloads whose pods must move, the way `kubectl rollout restart` does " +
			"(the `kubectl.kubernetes.io/restartedAt` pod-template annotation), and waits for each rollout by kubectl's " +
			"rollout-status rules. The plan lists them (`pending`, with the number of matching pods) and what matches but " +
			"cannot be rolled (`unmanaged`, with the reason). A refresh empties `pending`, and only the plan computes it, " +
			"so anything that still or again matches shows as a diff. Destroy forgets.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "Constant identifier.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"namespaces": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Only these namespaces (default: all)."},
			"exclude_namespaces": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Never these namespaces."},
			"selector": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Label selector on the workloads' labels (a bare pod's own labels), e.g. `tier != system`."},
			"kinds": schema.SetAttribute{Optional: true, Computed: true, ElementType: types.StringType, Default: setdefault.StaticValue(kinds),
				MarkdownDescription: "Workload kinds rolled: `Deployment`, `StatefulSet`, `DaemonSet` (default all three).",
				Validators:          []validator.Set{setvalidator.ValueStringsAre(stringvalidator.OneOf(k8sops.RollKinds...))}},
			"include": keyList("Workloads (`namespace/kind/name`) rolled regardless of the triggers and scope, e.g. " +
				"`kube-system/daemonset/calico-node` to move the nodes' tunnel addresses: once when the resource is created " +
				"or the workload is added to the list, and again whenever a trigger matches it."),
			"first": keyList("Workloads (`namespace/kind/name`) rolled and waited for, in this order, before the rest, e.g. " +
				"`kube-system/deployment/coredns`."),
			"pod_cidrs": keyList("Trigger: workloads with a pod whose IP is inside these ranges (the old pool). " +
				"hostNetwork pods never match."),
			"started_before": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Trigger: workloads with a pod started before this RFC 3339 time, e.g. " +
					"`k8scidr_service_recreation.x.completed_at`, so every pod gets the new DNS server. hostNetwork pods match " +
					"only with `dnsPolicy: ClusterFirstWithHostNet`."},
			"parallelism": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(5),
				MarkdownDescription: "Concurrent rollouts after `first` (default 5).",
				Validators:          []validator.Int64{int64validator.Between(1, 100)}},
			"wait_for_rollout": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Wait for each rollout to finish (default true)."},
			"continue_on_error": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Keep rolling the others when a rollout fails; failures are then warnings (default false)."},
			"evict_bare_pods": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Delete matching bare pods through the Eviction API, so PodDisruptionBudgets hold (default false: they are listed under `unmanaged`)."},
			"pending": schema.MapAttribute{Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "Planned: workload (`namespace/kind/name`, bare pods as `namespace/pod/name`) → matching pods."},
			"unmanaged": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Planned: what matches but is not rolled, and why (bare pods, Job pods, OnDelete workloads, paused Deployments, workloads another controller owns)."},
			"rolled": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "After apply: each rolled workload and how long its rollout took."},
			"completed_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time the last apply that rolled something finished."},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true}),
		},
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
	if m.PodCIDRs.IsNull() && m.StartedBefore.IsNull() && m.Include.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("pod_cidrs"), "No Trigger",
			"Set pod_cidrs (the old pool), started_before (e.g. the Service move's completed_at), or include: otherwise nothing is rolled.")
	}
	if fullyKnown(m.PodCIDRs) {
		for i, c := range stringList(ctx, m.PodCIDRs, &resp.Diagnostics) {
			if _, err := k8sops.ParseCIDR(c); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("pod_cidrs").AtListIndex(i), "Invalid CIDR", err.Error()+", e.g. 10.10.0.0/18.")
			}
		}
	}
	if !m.StartedBefore.IsNull() && !m.StartedBefore.IsUnknown() {
		if _, err := time.Parse(time.RFC3339, m.StartedBefore.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("started_before"), "Invalid Time",
				fmt.Sprintf("%q is not an RFC 3339 time, e.g. 2026-11-22T16:00:00Z: %v.", m.StartedBefore.ValueString(), err))
		}
	}
	if !m.Selector.IsNull() && !m.Selector.IsUnknown() {
		if _, err := labels.Parse(m.Selector.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("selector"), "Invalid Label Selector", apiErrorText(err))
		}
	}
	for _, a := range []struct {
		name string
		list types.List
	}{{"include", m.Include}, {"first", m.First}} {
		if !fullyKnown(a.list) {
			continue
		}
		for i, key := range stringList(ctx, a.list, &resp.Diagnostics) {
			if _, _, _, err := k8sops.ParseWorkloadKey(key); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root(a.name).AtListIndex(i), "Invalid Workload", apiErrorText(err))
			}
		}
	}
}

func (m *workloadRollModel) inputsKnown() bool {
	return !slices.ContainsFunc([]attr.Value{m.Namespaces, m.ExcludeNamespaces, m.Selector, m.Kinds, m.Include, m.First, m.PodCIDRs,
		m.StartedBefore, m.EvictBarePods}, func(v attr.Value) bool { return !fullyKnown(v) })
}

func (m *workloadRollModel) options(ctx context.Context, diags *diag.Diagnostics) k8sops.RollOptions {
	set := func(s types.Set) []string {
		var out []string
		diags.Append(s.ElementsAs(ctx, &out, false)...)
		return out
	}
	o := k8sops.RollOptions{Namespaces: set(m.Namespaces), ExcludeNamespaces: set(m.ExcludeNamespaces), Kinds: set(m.Kinds),
		Include: stringList(ctx, m.Include, diags), First: stringList(ctx, m.First, diags)}
	if !m.Selector.IsNull() {
		sel, err := labels.Parse(m.Selector.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("selector"), "Invalid Label Selector", apiErrorText(err))
		}
		o.Selector = sel
	}
	for _, c := range stringList(ctx, m.PodCIDRs, diags) {
		if p, err := netip.ParsePrefix(c); err == nil {
			o.PodCIDRs = append(o.PodCIDRs, p)
		}
	}
	if !m.StartedBefore.IsNull() {
		if t, err := time.Parse(time.RFC3339, m.StartedBefore.ValueString()); err == nil {
			o.StartedBefore = &t
		}
	}
	return o
}

// plan reads the cluster and plans the roll; with evict_bare_pods the bare pods are pending.
// Workloads that prior's include already named are not rolled again for being included.
func (m *workloadRollModel) plan(ctx context.Context, client *k8sops.Client, prior *workloadRollModel, diags *diag.Diagnostics) (k8sops.RollPlan, bool) {
	snap, err := k8sops.TakeRollSnapshot(ctx, client)
	if err != nil {
		diags.AddError("Cluster Not Readable", apiErrorText(err))
		return k8sops.RollPlan{}, false
	}
	o := m.options(ctx, diags)
	p := k8sops.PlanRoll(snap, o)
	addFindings(diags, p.Errors, true)
	if prior != nil {
		p.DropIncluded(stringList(ctx, prior.Include, diags), o.First)
	}
	if m.EvictBarePods.ValueBool() {
		for _, pod := range p.BarePods {
			ns, name, _ := strings.Cut(pod, "/")
			key := ns + "/pod/" + name
			delete(p.Unmanaged, key)
			p.Pending[key] = 1
		}
	} else {
		p.BarePods = nil
	}
	return p, !diags.HasError()
}

func pendingValue(p map[string]int, diags *diag.Diagnostics) types.Map {
	m := map[string]int64{}
	for k, v := range p {
		m[k] = int64(v)
	}
	v, d := types.MapValueFrom(context.Background(), types.Int64Type, m)
	diags.Append(d...)
	return v
}

func stringMapValue(m map[string]string, diags *diag.Diagnostics) types.Map {
	if m == nil {
		m = map[string]string{}
	}
	v, d := types.MapValueFrom(context.Background(), types.StringType, m)
	diags.Append(d...)
	return v
}

// ModifyPlan computes pending and unmanaged from the cluster: what apply will roll.
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
	if !plan.inputsKnown() {
		plan.Pending, plan.Unmanaged = types.MapUnknown(types.Int64Type), types.MapUnknown(types.StringType)
		plan.Rolled, plan.CompletedAt = types.MapUnknown(types.StringType), types.StringUnknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	var prior *workloadRollModel
	if !creating {
		prior = &state
	}
	p, ok := plan.plan(ctx, client, prior, &resp.Diagnostics)
	if !ok {
		return
	}
	plan.Pending = pendingValue(p.Pending, &resp.Diagnostics)
	plan.Unmanaged = stringMapValue(p.Unmanaged, &resp.Diagnostics)
	work := len(p.Pending) > 0
	switch {
	case work:
		plan.Rolled, plan.CompletedAt = types.MapUnknown(types.StringType), types.StringUnknown()
	case creating:
		plan.Rolled, plan.CompletedAt = stringMapValue(nil, &resp.Diagnostics), types.StringUnknown()
	default:
		// Converged: keep what the last apply stored, so a plan without refresh shows no change.
		plan.Pending, plan.Rolled, plan.CompletedAt = state.Pending, state.Rolled, state.CompletedAt
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
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

// apply plans again from the cluster, rolls, and fills the computed values.
func (r *workloadRollResource) apply(ctx context.Context, plan, prior *workloadRollModel,
	timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), diags *diag.Diagnostics) bool {
	client, ctx, cancel := r.data.begin(ctx, timeout, workloadRollTimeout, diags)
	defer cancel()
	if client == nil {
		return false
	}
	p, ok := plan.plan(ctx, client, prior, diags)
	if !ok {
		return false
	}
	plan.ID = types.StringValue("workload-roll")
	if plan.Pending.IsUnknown() {
		plan.Pending = pendingValue(p.Pending, diags)
	}
	if plan.Unmanaged.IsUnknown() {
		plan.Unmanaged = stringMapValue(p.Unmanaged, diags)
	}
	if len(p.Pending) == 0 {
		if plan.Rolled.IsUnknown() {
			plan.Rolled = stringMapValue(nil, diags)
		}
		if plan.CompletedAt.IsUnknown() {
			plan.CompletedAt = types.StringValue(time.Now().UTC().Format(time.RFC3339))
		}
		return true
	}
	o := plan.options(ctx, diags)
	rolled, err := k8sops.ExecuteRoll(ctx, client, p, o.First, k8sops.RollExecOptions{
		Parallelism: int(plan.Parallelism.ValueInt64()), Wait: plan.WaitForRollout.ValueBool(),
		ContinueOnError: plan.ContinueOnError.ValueBool(), EvictBarePods: plan.EvictBarePods.ValueBool(),
		Log: func(format string, args ...any) { tflog.Info(ctx, fmt.Sprintf(format, args...)) },
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
	plan.Rolled = stringMapValue(done, diags)
	plan.CompletedAt = types.StringValue(time.Now().UTC().Format(time.RFC3339))
	if plan.WaitForRollout.ValueBool() {
		r.recheck(ctx, client, plan, diags)
	}
	return true
}

func describeRolled(done map[string]string) string {
	if len(done) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(done)), ", ")
}

// recheck evaluates the triggers again after the roll and warns about what still matches.
func (r *workloadRollResource) recheck(ctx context.Context, client *k8sops.Client, plan *workloadRollModel, diags *diag.Diagnostics) {
	var d diag.Diagnostics
	after, ok := plan.plan(ctx, client, plan, &d)
	if !ok {
		return
	}
	var still []string
	for _, key := range after.Order {
		still = append(still, fmt.Sprintf("%s (%d pods)", key, after.Pending[key]))
	}
	if len(still) > 0 {
		diags.AddWarning("Pods Still Match After the Roll",
			"After the rollouts these workloads still have matching pods: "+strings.Join(still, ", ")+". If the trigger is "+
				"pod_cidrs, the old pool is probably still enabled (set disabled = true on it), or a controller reverts the "+
				"restart annotation. The next plan shows them again.")
	}
}

// Read sets pending to empty, the converged value: only the plan computes what still matches,
// so it shows as a diff.
func (r *workloadRollResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state workloadRollModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	state.Pending = basetypes.NewMapValueMust(types.Int64Type, map[string]attr.Value{})
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *workloadRollResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}
