// Resource k8scidr_service_recreation: move every matching Service into the target range.
package provider

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
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
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var (
	_ resource.ResourceWithConfigure      = (*serviceRecreationResource)(nil)
	_ resource.ResourceWithImportState    = (*serviceRecreationResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*serviceRecreationResource)(nil)
	_ resource.ResourceWithValidateConfig = (*serviceRecreationResource)(nil)
)

const serviceRecreationTimeout = 30 * time.Minute

type serviceRecreationResource struct {
	data *providerData
}

func newServiceRecreationResource() resource.Resource { return &serviceRecreationResource{} }

func (r *serviceRecreationResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_recreation"
}

var (
	moveType    = types.ObjectType{AttrTypes: map[string]attr.Type{"old_ips": types.ListType{ElemType: types.StringType}, "new_ips": types.ListType{ElemType: types.StringType}}}
	restoreType = types.ObjectType{AttrTypes: map[string]attr.Type{"new_ips": types.ListType{ElemType: types.StringType}, "journal": types.StringType}}
)

func (r *serviceRecreationResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	nsName := stringvalidator.RegexMatches(namespacedNameRegexp, "must be namespace/name")
	strSet := func(desc string, v ...validator.String) schema.SetAttribute {
		return schema.SetAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: desc,
			Validators: []validator.Set{setvalidator.ValueStringsAre(v...)}}
	}
	moves := func(desc string) schema.MapNestedAttribute {
		return schema.MapNestedAttribute{Computed: true, MarkdownDescription: desc,
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"old_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "spec.clusterIPs before."},
				"new_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "spec.clusterIPs after (IPs already in the target stay)."},
			}}}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Moves every matching Service whose ClusterIP lies outside `target_cidrs` into them, by recreating it " +
			"with an explicitly chosen IP. The plan shows each Service's new IPs (`pending`) and why others stay (`skipped`). " +
			"Apply journals each Service in the cluster before deleting it, so an interrupted apply loses nothing: the next plan " +
			"shows the leftovers under `restore` and the next apply recreates them first. kube-dns moves first, and a DNS bridge " +
			"Service keeps its old IP answering until kubelets and pods follow. Destroy forgets; it moves nothing back.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The target ranges, comma-separated.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"target_cidrs": schema.ListAttribute{
				Required: true, ElementType: types.StringType,
				MarkdownDescription: "The new Service range(s), one per IP family, each served by a Ready ServiceCIDR " +
					"(typically `k8scidr_service_cidr.new.cidrs`).",
				Validators: []validator.List{listvalidator.SizeBetween(1, 2)},
			},
			"namespaces":         strSet("Only Services in these namespaces. Default: all."),
			"exclude_namespaces": strSet("Never Services in these namespaces."),
			"selector": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Only Services whose labels match this label selector (`kubectl -l` syntax)."},
			"exclude": strSet("Services (`namespace/name`) never moved.", nsName),
			"include_load_balancers": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Also move LoadBalancer Services. Off by default: recreating one replaces its cloud load " +
					"balancer and address. Keep their IPs valid with a small `k8scidr_service_cidr` instead."},
			"include_owned": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Also move Services owned by a controller (ownerReference with `controller: true`), which " +
					"could recreate them on its own between delete and create."},
			"first": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Services (`namespace/name`) moved and verified before the rest, in this order. Default: " +
					"`[\"kube-system/kube-dns\"]` where it exists. Every Service listed must exist.",
				Validators: []validator.List{listvalidator.ValueStringsAre(nsName)}},
			"ip_assignment": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(k8sops.PreserveOffset),
				MarkdownDescription: "`preserve_offset`: keep each IP's offset in its old range, modulo the target's size " +
					"(100.64.0.10 in 100.64.0.0/13 → 172.24.0.10 in 172.24.0.0/15), probing forward past taken addresses. " +
					"`next_free`: the lowest free addresses. Either way never the target's network, broadcast or first (.1) address.",
				Validators: []validator.String{stringvalidator.OneOf(k8sops.PreserveOffset, k8sops.NextFree)}},
			"dns_bridge": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "When kube-dns moves, create a bridge Service on its old IP with its selector and ports, so " +
					"pods and kubelets still using the old resolver keep working. It stays until this is set to false " +
					"(after kubelets' `clusterDNS` changed and pods restarted)."},
			"dns_bridge_name": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(k8sops.DefaultDNSBridgeName),
				MarkdownDescription: "Name of the bridge Service in kube-system.", Validators: []validator.String{stringvalidator.LengthBetween(1, 63)}},
			"parallelism": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(k8sops.DefaultParallelism),
				MarkdownDescription: "Most Services in flight at once. The apply runs fewer while kube-controller-manager is slow to write the new Services' EndpointSlices, " +
					"steering each Service's downtime (delete to a ready EndpointSlice) to about 150 ms.",
				Validators: []validator.Int64{int64validator.Between(1, 200)}},
			"journal_namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(k8sops.DefaultJournalNamespace),
				MarkdownDescription: "Namespace of the journal ConfigMaps (label `k8scidr.io/journal`)."},
			"pending": moves("Services this apply moves, by `namespace/name`: known at plan time. After the apply " +
				"it holds what was planned; the next refresh sets it empty, and the next plan shows what is outstanding."),
			"skipped": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Services not moved, by `namespace/name`, with the reason."},
			"restore": schema.MapNestedAttribute{Computed: true,
				MarkdownDescription: "Services an interrupted apply deleted and had not yet recreated, found in the journal: this " +
					"apply recreates them first, at `new_ips`.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"new_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "IPs it is recreated with."},
					"journal": schema.StringAttribute{Computed: true, MarkdownDescription: "Journal ConfigMap holding it."},
				}}},
			"recreated": moves("Services the last apply that moved anything recreated, with the IPs they got."),
			"dns_service_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "kube-dns's ClusterIPs once this apply is done (known at plan time): the value for the " +
					"kubelet `clusterDNS` setting (kOps: `kubeDNS.serverIP`). Empty without kube-system/kube-dns."},
			"completed_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time of the last apply that moved Services (or of creation). Feed it to " +
					"`k8scidr_workload_roll.started_before` so every pod picks up the new DNS server."},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true}),
		},
	}
}

type serviceRecreationModel struct {
	ID                   types.String   `tfsdk:"id"`
	TargetCIDRs          types.List     `tfsdk:"target_cidrs"`
	Namespaces           types.Set      `tfsdk:"namespaces"`
	ExcludeNamespaces    types.Set      `tfsdk:"exclude_namespaces"`
	Selector             types.String   `tfsdk:"selector"`
	Exclude              types.Set      `tfsdk:"exclude"`
	IncludeLoadBalancers types.Bool     `tfsdk:"include_load_balancers"`
	IncludeOwned         types.Bool     `tfsdk:"include_owned"`
	First                types.List     `tfsdk:"first"`
	IPAssignment         types.String   `tfsdk:"ip_assignment"`
	DNSBridge            types.Bool     `tfsdk:"dns_bridge"`
	DNSBridgeName        types.String   `tfsdk:"dns_bridge_name"`
	Parallelism          types.Int64    `tfsdk:"parallelism"`
	JournalNamespace     types.String   `tfsdk:"journal_namespace"`
	Pending              types.Map      `tfsdk:"pending"`
	Skipped              types.Map      `tfsdk:"skipped"`
	Restore              types.Map      `tfsdk:"restore"`
	Recreated            types.Map      `tfsdk:"recreated"`
	DNSServiceIPs        types.List     `tfsdk:"dns_service_ips"`
	CompletedAt          types.String   `tfsdk:"completed_at"`
	Timeouts             timeouts.Value `tfsdk:"timeouts"`
}

// inputsKnown reports whether every input the plan depends on is known.
func (m *serviceRecreationModel) inputsKnown() bool {
	for _, v := range []attr.Value{m.TargetCIDRs, m.Namespaces, m.ExcludeNamespaces, m.Selector, m.Exclude, m.IncludeLoadBalancers,
		m.IncludeOwned, m.First, m.IPAssignment, m.DNSBridge, m.DNSBridgeName, m.JournalNamespace} {
		if !fullyKnown(v) {
			return false
		}
	}
	return true
}

// fullyKnown reports whether v and every element in it are known.
func fullyKnown(v attr.Value) bool {
	tv, err := v.ToTerraformValue(context.Background())
	return err == nil && tv.IsFullyKnown()
}

func (m *serviceRecreationModel) options(ctx context.Context, diags *diag.Diagnostics) k8sops.RecreationOptions {
	set := func(s types.Set) []string {
		var out []string
		diags.Append(s.ElementsAs(ctx, &out, false)...)
		slices.Sort(out)
		return out
	}
	o := k8sops.RecreationOptions{
		TargetCIDRs: stringList(ctx, m.TargetCIDRs, diags), Namespaces: set(m.Namespaces), ExcludeNamespaces: set(m.ExcludeNamespaces),
		Selector: m.Selector.ValueString(), Exclude: set(m.Exclude), IncludeLoadBalancers: m.IncludeLoadBalancers.ValueBool(),
		IncludeOwned: m.IncludeOwned.ValueBool(), IPAssignment: m.IPAssignment.ValueString(), DNSBridge: m.DNSBridge.ValueBool(),
		DNSBridgeName: m.DNSBridgeName.ValueString(),
	}
	if !m.First.IsNull() {
		o.First = append([]string{}, stringList(ctx, m.First, diags)...)
	}
	return o
}

func (r *serviceRecreationResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks the target ranges as the apiserver will.
func (r *serviceRecreationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m serviceRecreationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !fullyKnown(m.TargetCIDRs) || m.TargetCIDRs.IsNull() {
		return
	}
	for _, p := range k8sops.ValidateServiceCIDRs(stringList(ctx, m.TargetCIDRs, &resp.Diagnostics)) {
		at := path.Root("target_cidrs")
		if p.Index >= 0 {
			at = at.AtListIndex(p.Index)
		}
		resp.Diagnostics.AddAttributeError(at, p.Summary, p.Detail)
	}
}

// ModifyPlan reads the cluster and computes pending, skipped and restore: what apply will do.
func (r *serviceRecreationResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy forgets
	}
	var plan, state serviceRecreationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	creating := req.State.Raw.IsNull()
	if !creating {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.inputsKnown() {
		plan.Pending, plan.Skipped, plan.Restore = types.MapUnknown(moveType), types.MapUnknown(types.StringType), types.MapUnknown(restoreType)
		plan.Recreated, plan.CompletedAt = types.MapUnknown(moveType), types.StringUnknown()
		plan.DNSServiceIPs = types.ListUnknown(types.StringType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	snap, err := k8sops.TakeSnapshot(ctx, client, plan.JournalNamespace.ValueString(), false)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", apiErrorText(err))
		return
	}
	p := k8sops.PlanRecreation(snap, plan.options(ctx, &resp.Diagnostics))
	addFindings(&resp.Diagnostics, p.Errors, true)
	addFindings(&resp.Diagnostics, p.Warnings, false)
	for _, n := range p.Notes {
		resp.Diagnostics.AddWarning("Check Before Moving kube-dns", n)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Pending = movesValue(p.Moves, &resp.Diagnostics)
	plan.Skipped = skippedValue(p.Skipped, &resp.Diagnostics)
	plan.Restore = restoreValue(p.Restore, &resp.Diagnostics)
	plan.DNSServiceIPs = ipsValue(p.DNSIPs, &resp.Diagnostics)
	work := len(p.Moves) > 0 || len(p.Restore) > 0 || len(p.Stale) > 0
	if len(p.Moves) > 0 || len(p.Restore) > 0 {
		resp.Diagnostics.AddWarning("Apply Re-checks This Plan Against the Cluster",
			fmt.Sprintf("%d Services move and %d are restored, at the IPs shown. Apply computes this again from the "+
				"cluster and moves nothing unless it comes out the same: if a Service appeared, changed or took a planned "+
				"IP in between, Terraform stops with \"Provider produced inconsistent final plan\" before anything is "+
				"touched. Run terraform plan again and review the new IPs.", len(p.Moves), len(p.Restore)))
	}
	if !work && !creating {
		// Converged. Keep what the last apply planned (Terraform requires an apply to store its
		// planned values, and a plan without refresh must not show that as a change); a refresh
		// sets both empty, so anything outstanding later shows as a diff.
		plan.Pending, plan.Restore = state.Pending, state.Restore
	}
	switch {
	case creating && !work:
		plan.Recreated, plan.CompletedAt = movesValue(nil, &resp.Diagnostics), types.StringUnknown()
	case work:
		plan.Recreated, plan.CompletedAt = types.MapUnknown(moveType), types.StringUnknown()
	default:
		plan.Recreated, plan.CompletedAt = state.Recreated, state.CompletedAt
	}
	plan.ID = types.StringValue(strings.Join(stringList(ctx, plan.TargetCIDRs, &resp.Diagnostics), ","))
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func addFindings(diags *diag.Diagnostics, fs []k8sops.Finding, asError bool) {
	for _, f := range fs {
		if asError {
			diags.AddAttributeError(findingPath(f.Attribute), f.Summary, f.Detail)
		} else {
			diags.AddAttributeWarning(findingPath(f.Attribute), f.Summary, f.Detail+" This is an error at apply time.")
		}
	}
}

// findingPath turns a finding's attribute, "name" or "name[i]", into a path.
func findingPath(attr string) path.Path {
	name, index, ok := strings.Cut(strings.TrimSuffix(attr, "]"), "[")
	if i, err := strconv.Atoi(index); ok && err == nil {
		return path.Root(name).AtListIndex(i)
	}
	return path.Root(attr)
}

func (r *serviceRecreationResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan serviceRecreationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.apply(ctx, &plan, nil, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *serviceRecreationResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state serviceRecreationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if r.apply(ctx, &plan, &state, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	} else {
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...) // keep the last good state
	}
}

// apply carries out the plan and fills the computed values; false when state must not change.
func (r *serviceRecreationResource) apply(ctx context.Context, plan, prior *serviceRecreationModel, diags *diag.Diagnostics) bool {
	timeout := plan.Timeouts.Create
	if prior != nil {
		timeout = plan.Timeouts.Update
	}
	t, d := timeout(ctx, serviceRecreationTimeout)
	diags.Append(d...)
	client, d := r.data.Client()
	if diags.Append(d...); diags.HasError() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	journalNS := plan.JournalNamespace.ValueString()
	snap, err := k8sops.TakeSnapshot(ctx, client, journalNS, true)
	if err != nil {
		diags.AddError("Cluster Not Readable", apiErrorText(err))
		return false
	}
	p := k8sops.PlanRecreation(snap, plan.options(ctx, diags))
	addFindings(diags, p.Errors, true)
	addFindings(diags, p.Warnings, true) // what may be fixed in the same apply must be fixed by now
	if diags.HasError() {
		return false
	}
	if !plan.Pending.IsUnknown() {
		p, err = k8sops.CheckPlanned(snap, p, movesFrom(ctx, plan.Pending, diags), restoresFrom(ctx, plan.Restore, diags))
		if err != nil {
			diags.AddError("Plan Is Stale", apiErrorText(err))
			return false
		}
	} else {
		plan.Pending = movesValue(p.Moves, diags)
		plan.Skipped = skippedValue(p.Skipped, diags)
		plan.Restore = restoreValue(p.Restore, diags)
		plan.DNSServiceIPs = ipsValue(p.DNSIPs, diags)
	}
	res, err := k8sops.ExecuteRecreation(ctx, client, snap, p, k8sops.ExecOptions{
		Parallelism: int(plan.Parallelism.ValueInt64()), JournalNamespace: journalNS,
		Log:              func(msg string, f map[string]any) { tflog.Info(ctx, msg, f) },
		DelayAfterDelete: faultDelayAfterDelete(),
	})
	for _, n := range res.Notes {
		diags.AddWarning("Service Recreation", n)
	}
	if err != nil {
		diags.AddError("Services Not All Moved", fmt.Sprintf("%s. Moved %d Services before the error.", apiErrorText(err), len(res.Recreated)))
		return false
	}
	if len(res.Restored) > 0 {
		diags.AddWarning("Restored Services From an Interrupted Apply",
			fmt.Sprintf("Recreated %d journaled Services first: %s.", len(res.Restored), strings.Join(res.Restored, ", ")))
	}
	if len(res.Recreated) > 0 || prior == nil {
		plan.Recreated = movesValue(res.Recreated, diags)
		plan.CompletedAt = types.StringValue(time.Now().UTC().Format(time.RFC3339))
	} else {
		plan.Recreated, plan.CompletedAt = prior.Recreated, prior.CompletedAt
	}
	plan.ID = types.StringValue(strings.Join(stringList(ctx, plan.TargetCIDRs, diags), ","))
	addFollowUps(diags, res, p)
	return !diags.HasError()
}

// addFollowUps tells the user what the Kubernetes API cannot do for them.
func addFollowUps(diags *diag.Diagnostics, res k8sops.RecreationResult, p k8sops.RecreationPlan) {
	var todo []string
	for _, m := range res.Recreated {
		if m.Key == k8sops.DNSServiceKey {
			todo = append(todo, fmt.Sprintf("Set kubelet clusterDNS (kOps: kubeDNS.serverIP) to kube-dns's new IP %s and roll the nodes; "+
				"until then the DNS bridge%s answers on %s.", strings.Join(m.NewIPs, ","), bridgeName(res), strings.Join(m.OldIPs, ",")))
			todo = append(todo, "Running pods keep the old DNS server until restarted: feed completed_at to "+
				"k8scidr_workload_roll.started_before.")
		}
	}
	if len(p.KeepCovering) > 0 {
		var keep []string
		for _, c := range p.KeepCovering {
			keep = append(keep, c.String())
		}
		todo = append(todo, fmt.Sprintf("IPs that stay outside the target (%s) need a Ready ServiceCIDR covering them before the old "+
			"range is retired: k8scidr_service_cidr with cidrs from %s.", addrList(p.Staying), strings.Join(keep, ", ")))
	}
	if len(res.Recreated) > 0 {
		todo = append(todo, "The apiserver's --service-cluster-ip-range and default/kubernetes move by the KEP-1880 procedure.")
	}
	if len(todo) > 0 {
		diags.AddWarning("What To Do Next", "- "+strings.Join(todo, "\n- "))
	}
}

func bridgeName(res k8sops.RecreationResult) string {
	if res.BridgeCreated == "" {
		return ""
	}
	return " " + res.BridgeCreated
}

func addrList(ips []netip.Addr) string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return strings.Join(out, ", ")
}

// Read sets pending and restore to the converged value; only ModifyPlan computes what is
// outstanding, so drift shows as a diff.
func (r *serviceRecreationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceRecreationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	state.Pending = movesValue(nil, &resp.Diagnostics)
	state.Restore = restoreValue(nil, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete forgets: moved Services stay where they are.
func (r *serviceRecreationResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// ImportState takes the target ranges, comma-separated.
func (r *serviceRecreationResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	var cidrs []string
	for _, c := range strings.Split(req.ID, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cidrs = append(cidrs, c)
		}
	}
	if len(k8sops.ValidateServiceCIDRs(cidrs)) > 0 || len(cidrs) == 0 {
		resp.Diagnostics.AddError("Invalid Import ID", "Use the target ranges, comma-separated: e.g. 172.24.0.0/15 or 172.24.0.0/15,fd00:24::/108.")
		return
	}
	l, d := types.ListValueFrom(ctx, types.StringType, cidrs)
	resp.Diagnostics.Append(d...)
	m := serviceRecreationModel{
		ID: types.StringValue(strings.Join(cidrs, ",")), TargetCIDRs: l, Namespaces: types.SetNull(types.StringType),
		ExcludeNamespaces: types.SetNull(types.StringType), Exclude: types.SetNull(types.StringType), Selector: types.StringNull(),
		First: types.ListNull(types.StringType), IncludeLoadBalancers: types.BoolValue(false), IncludeOwned: types.BoolValue(false),
		IPAssignment: types.StringValue(k8sops.PreserveOffset), DNSBridge: types.BoolValue(true),
		DNSBridgeName: types.StringValue(k8sops.DefaultDNSBridgeName), Parallelism: types.Int64Value(k8sops.DefaultParallelism),
		JournalNamespace: types.StringValue(k8sops.DefaultJournalNamespace), Skipped: types.MapValueMust(types.StringType, nil),
		Recreated: movesValue(nil, &resp.Diagnostics), CompletedAt: types.StringNull(), DNSServiceIPs: types.ListNull(types.StringType),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType})},
	}
	m.Pending, m.Restore = movesValue(nil, &resp.Diagnostics), restoreValue(nil, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func ipsValue(ips []string, diags *diag.Diagnostics) types.List {
	if ips == nil {
		ips = []string{}
	}
	l, d := types.ListValueFrom(context.Background(), types.StringType, ips)
	diags.Append(d...)
	return l
}

func movesValue(moves []k8sops.Move, diags *diag.Diagnostics) types.Map {
	out := map[string]attr.Value{}
	for _, m := range moves {
		obj, d := types.ObjectValue(moveType.AttrTypes, map[string]attr.Value{"old_ips": ipsValue(m.OldIPs, diags), "new_ips": ipsValue(m.NewIPs, diags)})
		diags.Append(d...)
		out[m.Key] = obj
	}
	v, d := types.MapValue(moveType, out)
	diags.Append(d...)
	return v
}

func restoreValue(rs []k8sops.Restore, diags *diag.Diagnostics) types.Map {
	out := map[string]attr.Value{}
	for _, r := range rs {
		obj, d := types.ObjectValue(restoreType.AttrTypes, map[string]attr.Value{"new_ips": ipsValue(r.NewIPs, diags), "journal": types.StringValue(r.Journal)})
		diags.Append(d...)
		out[r.Key] = obj
	}
	v, d := types.MapValue(restoreType, out)
	diags.Append(d...)
	return v
}

func skippedValue(s map[string]string, diags *diag.Diagnostics) types.Map {
	v, d := types.MapValueFrom(context.Background(), types.StringType, s)
	diags.Append(d...)
	return v
}

type moveModel struct {
	OldIPs []string `tfsdk:"old_ips"`
	NewIPs []string `tfsdk:"new_ips"`
}

type restoreModel struct {
	NewIPs  []string `tfsdk:"new_ips"`
	Journal string   `tfsdk:"journal"`
}

func movesFrom(ctx context.Context, m types.Map, diags *diag.Diagnostics) []k8sops.Move {
	var in map[string]moveModel
	diags.Append(m.ElementsAs(ctx, &in, false)...)
	out := make([]k8sops.Move, 0, len(in))
	for k, v := range in {
		out = append(out, k8sops.Move{Key: k, OldIPs: v.OldIPs, NewIPs: v.NewIPs})
	}
	return out
}

func restoresFrom(ctx context.Context, m types.Map, diags *diag.Diagnostics) []k8sops.Restore {
	if m.IsUnknown() || m.IsNull() {
		return nil
	}
	var in map[string]restoreModel
	diags.Append(m.ElementsAs(ctx, &in, false)...)
	out := make([]k8sops.Restore, 0, len(in))
	for k, v := range in {
		out = append(out, k8sops.Restore{Key: k, NewIPs: v.NewIPs, Journal: v.Journal})
	}
	return out
}

// faultDelayAfterDelete reads K8SCIDR_FAULT_DELAY_AFTER_DELETE, fault injection for the crash
// test only: it widens the window in which a killed apply leaves Services deleted.
func faultDelayAfterDelete() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("K8SCIDR_FAULT_DELAY_AFTER_DELETE"))
	return d
}
