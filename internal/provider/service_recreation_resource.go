// Resource k8scidr_service_recreation: make exactly the Service moves a reviewed plan showed.
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
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
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

func (r *serviceRecreationResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Moves Services into a new range by recreating each one at an explicitly chosen IP: exactly the " +
			"`moves` and `restore` of a `k8scidr_service_moves` data source, which the plan shows. Apply re-checks each " +
			"move against the live Service and makes only those that still hold (the same object, at the planned old IPs, " +
			"its planned IPs free); the others are reported in `not_moved`, and the next plan shows what remains. Each " +
			"Service is journaled in the cluster before it is deleted, so an interrupted apply loses nothing: the next " +
			"plan lists the leftovers under the data source's `restore`. The cluster DNS Service moves first, and a DNS " +
			"bridge Service keeps its old IP answering until kubelets and pods follow. Destroy forgets; it moves nothing back.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The target ranges, comma-separated.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"target_cidrs": schema.ListAttribute{
				Required: true, ElementType: types.StringType,
				MarkdownDescription: "The new Service range(s), as given to the data source, each served by a Ready ServiceCIDR " +
					"(typically `k8scidr_service_cidr.new.cidrs`, which also orders this resource after it). Every new IP " +
					"in `moves` must lie inside them.",
				Validators: []validator.List{listvalidator.SizeBetween(1, 2)},
			},
			// moves, restore, recreated and bridges are maps of objects, not nested attributes: the
			// framework plans a nested map by copying the whole map once per element
			// (fwserver.mapElemObject), quadratic in the number of Services (38 s and 10 GB allocated
			// per plan at 10,000 moves). The values and the Terraform types are the same.
			"moves": schema.MapAttribute{Required: true, ElementType: moveType,
				MarkdownDescription: movesDescription + " Set it to `data.k8scidr_service_moves.<name>.moves`. After a " +
					"refresh it reads as empty, so the next plan shows only what the data source still finds to move. Each " +
					"entry: `uid` (of the Service planned from), `type` (its type when planned), `old_ips` (spec.clusterIPs " +
					"when planned), `new_ips` (spec.clusterIPs after the move)."},
			"restore": schema.MapAttribute{Optional: true, ElementType: restoreType,
				MarkdownDescription: restoreDescription + " Set it to `data.k8scidr_service_moves.<name>.restore`. Unset, no " +
					"entry is restored: what an interrupted apply left stays in the journal for the next plan. Each entry: " +
					"`new_ips` (the IPs it has, or is recreated with), `journal` (the journal ConfigMap holding it)."},
			"first": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: firstDescription + " Set it to `data.k8scidr_service_moves.<name>.first_moves`. If a " +
					"first move no longer holds at apply, nothing is moved. Unset, no Service goes ahead of the others, not even the " +
					"cluster DNS Service."},
			"dns_service": schema.StringAttribute{Optional: true,
				MarkdownDescription: dnsServiceDescription + " Set it to `data.k8scidr_service_moves.<name>.dns_service`. Unset, " +
					"no Service is treated as the cluster DNS Service: no DNS bridge is created and `dns_moved_at` stays null."},
			"dns_bridge": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "When the cluster DNS Service moves, create a bridge Service on its old IP with its selector " +
					"and ports, so pods and kubelets still using the old resolver keep working. It stays until this is set " +
					"to false (after kubelets' `clusterDNS` changed and pods restarted). Default `true`."},
			"dns_bridge_force_removal": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Delete the bridge when `dns_bridge` is false even though running pods may still resolve " +
					"through it. Without it the apply refuses, naming them, while a pod that uses the cluster resolver started " +
					"before the DNS move (or before the last change of kubeadm's `kube-system/kubelet-config`) still runs, or " +
					"while kubelet-config's `clusterDNS` still names the bridge's IP. Default `false`.",
			},
			"dns_bridge_name": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(k8sops.DefaultDNSBridgeName),
				MarkdownDescription: "Name of the bridge Service in kube-system. Default `kube-dns-legacy`.",
				Validators: []validator.String{stringvalidator.RegexMatches(dns1035LabelRegexp,
					"must be a Service name: a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit)"),
					stringvalidator.LengthBetween(1, 63)}},
			"parallelism": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(k8sops.DefaultParallelism),
				MarkdownDescription: fmt.Sprintf("Most Services in flight at once. The apply runs fewer while "+
					"kube-controller-manager is slow to write the new Services' EndpointSlices, steering each Service's "+
					"downtime (delete to a ready EndpointSlice) to about 150 ms. Default `%d`.", k8sops.DefaultParallelism),
				Validators: []validator.Int64{int64validator.Between(1, 200)}},
			"endpoint_wait": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultEndpointWait),
				MarkdownDescription: "How long a moved Service that had ready endpoints may wait for kube-controller-manager " +
					"to write its new EndpointSlice, as a Go duration. Past it the Service is reported, not failed; after 5 " +
					"moves in a row without one the apply starts no further move and fails, naming them " +
					"(kube-controller-manager is down or stuck, and every further move would be one more Service without " +
					"endpoints). The next apply moves the rest. Default `" + defaultEndpointWait + "`.",
				Validators: []validator.String{durationBetween(time.Second, time.Hour)}},
			"journal_namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(k8sops.DefaultJournalNamespace),
				MarkdownDescription: "Namespace of the journal ConfigMaps (label `k8scidr.io/journal`); the data source's " +
					"`journal_namespace`. Default `" + k8sops.DefaultJournalNamespace + "`.",
				Validators: []validator.String{namespaceName()}},
			"journal_group": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Whose journal this is (label `k8scidr.io/journal-group`): give each " +
					"`k8scidr_service_recreation` of a cluster its own (e.g. one per namespace group applied side by side), so " +
					"that none restores, settles or removes another's entries, and the data source's `journal_group` the same " +
					"value (`journal_group = data.k8scidr_service_moves.NAME.journal_group`). Changing it, or " +
					"`journal_namespace`, is refused at plan while the old journal still holds entries. Default `" + k8sops.DefaultJournalGroup + "`.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(labelValueRegexp,
					"must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")}},
			"recreated": schema.MapAttribute{Computed: true, ElementType: recreatedType,
				MarkdownDescription: "Services the last apply that moved anything recreated, with the IPs they got: " +
					"`old_ips` (before) and `new_ips` (after)."},
			"not_moved": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Planned moves and restores the last apply did not make because they no longer held, with " +
					"the reason (deleted, replaced, already moved, planned IP taken, type changed …)."},
			"completed_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time of the last apply that moved Services (or of creation)."},
			"dns_moved_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time this resource moved the cluster DNS Service; null until it has. Pods started " +
					"before it may still resolve through the old IP (see `k8scidr_workload_restarts.started_before`)."},
			"timeouts": timeoutsAttribute(ctx, serviceRecreationTimeout, serviceRecreationTimeout, 0),
		},
	}
	maps.Copy(resp.Schema.Attributes, oldIPBridgeAttributes())
}

func (r *serviceRecreationResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig refuses, before the cluster is read, moves no data source produces: target
// ranges the apiserver would refuse, new IPs outside them or on a reserved address, duplicates.
func (r *serviceRecreationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m serviceRecreationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.plannedKnown() || m.TargetCIDRs.IsNull() {
		return
	}
	addFindings(&resp.Diagnostics, k8sops.ValidatePlanned(m.planned(ctx, &resp.Diagnostics)), true)
}

// ModifyPlan plans the computed values from the configuration and prior state only, and reads
// the cluster for warnings: a target or bridge IP that no Ready range serves yet, a taken
// bridge name. The apply refuses those before touching anything.
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
	if !creating {
		r.checkJournalChange(ctx, &plan, &state, &resp.Diagnostics)
	}
	if fullyKnown(plan.TargetCIDRs) {
		plan.ID = types.StringValue(strings.Join(stringList(ctx, plan.TargetCIDRs, &resp.Diagnostics), ","))
	}
	if !plan.plannedKnown() {
		resp.Diagnostics.AddWarning("Service Moves Not Known Until Apply",
			"moves, restore, first or dns_service is known only during apply, so this plan cannot show which Services move "+
				"to which IPs, and the apply will move Services nobody reviewed. The usual cause is a k8scidr_service_moves "+
				"data source that references or depends_on a resource with changes in this plan: give it only variables "+
				"and locals, or apply that resource first (-target).")
		plan.Recreated, plan.NotMoved = types.MapUnknown(recreatedType), types.MapUnknown(types.StringType)
		plan.CompletedAt, plan.DNSMovedAt, plan.Bridges = types.StringUnknown(), types.StringUnknown(), types.MapUnknown(bridgeType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	p := plan.planned(ctx, &resp.Diagnostics)
	prior := &state
	if creating {
		prior = nil
	}
	plan.planBridges(ctx, prior, p, &resp.Diagnostics)
	work := len(p.Moves) > 0 || len(p.Restore) > 0
	dnsMoves := p.DNSService != "" && (slices.ContainsFunc(p.Moves, func(m k8sops.Move) bool { return m.Key == p.DNSService }) ||
		slices.ContainsFunc(p.Restore, func(m k8sops.Restore) bool { return m.Key == p.DNSService }))
	switch {
	case work:
		plan.Recreated, plan.NotMoved, plan.CompletedAt = types.MapUnknown(recreatedType), types.MapUnknown(types.StringType), types.StringUnknown()
	case creating:
		plan.Recreated, plan.NotMoved, plan.CompletedAt = recreatedValue(nil, &resp.Diagnostics), stringMapValue(nil, &resp.Diagnostics), types.StringUnknown()
	default:
		plan.Recreated, plan.NotMoved, plan.CompletedAt = state.Recreated, state.NotMoved, state.CompletedAt
	}
	switch {
	case dnsMoves:
		plan.DNSMovedAt = types.StringUnknown()
	case creating:
		plan.DNSMovedAt = types.StringNull()
	default:
		plan.DNSMovedAt = state.DNSMovedAt
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if work || creating || !plan.DNSBridge.Equal(state.DNSBridge) {
		r.warnNotReady(ctx, &plan, p, &resp.Diagnostics)
	}
	if _, checked := plan.bridgeRemovals(ctx, prior, &resp.Diagnostics); r.data != nil && r.data.client != nil {
		checkOldIPBridgeRemoval(ctx, r.data.client, &plan, checked, &resp.Diagnostics, false)
	}
	if work && r.data != nil && r.data.client != nil {
		found, err := k8sops.RecreationHazards(ctx, r.data.client, p)
		warnHazards(found, err, &resp.Diagnostics)
	}
}

// checkJournalChange refuses a change of journal_namespace or journal_group while the old
// journal holds entries: neither this resource nor its data source would read them again, and
// the Services an interrupted apply deleted would stay deleted.
func (r *serviceRecreationResource) checkJournalChange(ctx context.Context, plan, state *serviceRecreationModel, diags *diag.Diagnostics) {
	if r.data == nil || r.data.client == nil || plan.JournalNamespace.IsUnknown() || plan.JournalGroup.IsUnknown() ||
		state.JournalNamespace.IsNull() || plan.journal() == state.journal() {
		return
	}
	at := path.Root("journal_group")
	if !plan.JournalNamespace.Equal(state.JournalNamespace) {
		at = path.Root("journal_namespace")
	}
	left, err := k8sops.JournalLeftovers(ctx, r.data.client, state.journal())
	switch {
	case err != nil:
		diags.AddAttributeError(at, "Old Journal Not Readable", fmt.Sprintf("The journal changes from %s to %s, and the old "+
			"one could not be read to check that it holds nothing: %s", state.journal(), plan.journal(), apiErrorText(err)))
	case len(left) > 0:
		diags.AddAttributeError(at, "Old Journal Still Holds Entries", fmt.Sprintf("The journal changes from %s to %s, but "+
			"the old one holds entries of an interrupted apply for %s: after the change nothing would read them, and "+
			"those Services would stay deleted. Apply once more with the old journal_namespace and journal_group (on "+
			"this resource and its k8scidr_service_moves data source): that apply restores them and removes the "+
			"journal. Then change both.", state.journal(), plan.journal(), strings.Join(left, ", ")))
	}
}

// warnNotReady reads what the apply will refuse to start without, and warns: it may be created
// in the same apply (a ServiceCIDR this resource depends on).
func (r *serviceRecreationResource) warnNotReady(ctx context.Context, plan *serviceRecreationModel, p k8sops.PlannedRecreation, diags *diag.Diagnostics) {
	if r.data == nil || r.data.client == nil || plan.DNSBridgeName.IsUnknown() || plan.DNSBridge.IsUnknown() || plan.JournalNamespace.IsUnknown() || plan.JournalGroup.IsUnknown() {
		return
	}
	snap, err := k8sops.TakeBridgeSnapshot(ctx, r.data.client, p.DNSService, plan.DNSBridgeName.ValueString(), plan.journal())
	if err != nil {
		diags.AddWarning("Cluster Not Readable", "The plan could not check that the target ranges are served: "+apiErrorText(err))
		return
	}
	addFindings(diags, k8sops.RecreationPreflight(snap, p, plan.bridge()), false)
	checkBridgeRemoval(ctx, r.data.client, snap, plan, diags, false)
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

// apply checks each planned move against the cluster, makes those that hold, and fills the
// computed values; false when state must not change.
func (r *serviceRecreationResource) apply(ctx context.Context, plan, prior *serviceRecreationModel, diags *diag.Diagnostics) bool {
	timeout := plan.Timeouts.Create
	if prior != nil {
		timeout = plan.Timeouts.Update
	}
	client, ctx, cancel := r.data.begin(ctx, timeout, serviceRecreationTimeout, diags)
	defer cancel()
	if client == nil {
		return false
	}
	planned := plan.planned(ctx, diags)
	if addFindings(diags, k8sops.ValidatePlanned(planned), true); diags.HasError() {
		return false
	}
	snap, err := k8sops.TakeSnapshot(ctx, client, plan.journal(), true)
	if err != nil {
		diags.AddError("Cluster Not Readable", apiErrorText(err))
		return false
	}
	if plan.Bridges.IsUnknown() { // what the plan could not know yet (moves from an unknown data source) is known now
		plan.planBridges(ctx, prior, planned, diags)
	}
	expiredBridges, checked := plan.bridgeRemovals(ctx, prior, diags)
	if checkOldIPBridgeRemoval(ctx, client, plan, checked, diags, true); diags.HasError() {
		return false
	}
	bridges := plan.bridge()
	bridges.RemoveOldIPs = expiredBridges
	for _, b := range checked {
		bridges.RemoveOldIPs = append(bridges.RemoveOldIPs, b.Key())
	}
	steps, errs := k8sops.PrepareRecreation(snap, planned, bridges)
	if addFindings(diags, errs, true); diags.HasError() {
		return false
	}
	if steps.RemoveBridge != "" {
		if checkBridgeRemoval(ctx, client, snap, plan, diags, true); diags.HasError() {
			return false
		}
	}
	addNotMoved(diags, steps.NotMoved)
	if len(steps.Unplanned) > 0 {
		diags.AddWarning("Journal Entries Not in the Plan",
			fmt.Sprintf("The journal in %s holds entries the plan did not show for %d Services (%s): an apply interrupted "+
				"after this plan was made, or a k8scidr_service_moves data source whose journal_namespace or journal_group "+
				"differs from this resource's. They are left as they are; make both read the same journal and plan again: "+
				"the plan then shows them under restore.", plan.journal(), len(steps.Unplanned), strings.Join(steps.Unplanned, ", ")))
	}
	res, err := k8sops.ExecuteRecreation(ctx, client, snap, steps, k8sops.ExecOptions{
		Parallelism: int(plan.Parallelism.ValueInt64()), Journal: plan.journal(),
		SliceWait:        plan.endpointWait(),
		Log:              func(msg string, f map[string]any) { tflog.Info(ctx, msg, f) },
		DelayAfterDelete: faultDelay("AFTER_DELETE"), DelayBeforeDelete: faultDelay("BEFORE_DELETE"),
	})
	for _, n := range res.Notes {
		diags.AddWarning("Service Recreation", n)
	}
	maps.Copy(steps.NotMoved, res.NotMoved)
	addNotMoved(diags, res.NotMoved)
	if err != nil {
		diags.AddError("Services Not All Moved", fmt.Sprintf("%s. Moved %d Services before the error.", apiErrorText(err), len(res.Recreated)))
		return false
	}
	if len(res.Restored) > 0 {
		diags.AddWarning("Restored Services From an Interrupted Apply",
			fmt.Sprintf("Recreated %d journaled Services first: %s.", len(res.Restored), strings.Join(res.Restored, ", ")))
	}
	plan.fillApplied(res, steps, prior, diags)
	plan.fillBridges(ctx, res, diags)
	if todo := res.FollowUps(steps); len(todo) > 0 {
		diags.AddWarning("What To Do Next", "- "+strings.Join(todo, "\n- "))
	}
	return !diags.HasError()
}

// Read sets moves, restore and first to the converged value, empty: only the data source
// computes what is outstanding, so it shows as a diff.
func (r *serviceRecreationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceRecreationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	state.Moves = movesValue(nil, &resp.Diagnostics)
	if !state.Restore.IsNull() {
		state.Restore = restoreValue(nil, &resp.Diagnostics)
	}
	if !state.First.IsNull() {
		state.First = ipsValue(nil, &resp.Diagnostics)
	}
	if client, diags := r.data.Client(); !diags.HasError() {
		state.refreshBridges(ctx, client, &resp.Diagnostics)
	}
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
	if len(k8sops.ValidateServiceCIDRs(k8sops.At("id"), cidrs)) > 0 || len(cidrs) == 0 {
		resp.Diagnostics.AddError("Invalid Import ID", "Use the target ranges, comma-separated: e.g. 172.24.0.0/15 or 172.24.0.0/15,fd00:24::/108.")
		return
	}
	m := serviceRecreationModel{
		ID: types.StringValue(strings.Join(cidrs, ",")), TargetCIDRs: ipsValue(cidrs, &resp.Diagnostics),
		Moves: movesValue(nil, &resp.Diagnostics), Restore: types.MapNull(restoreType), First: types.ListNull(types.StringType),
		DNSService: types.StringNull(), DNSBridge: types.BoolValue(true), DNSBridgeName: types.StringValue(k8sops.DefaultDNSBridgeName),
		Parallelism: types.Int64Value(k8sops.DefaultParallelism), JournalNamespace: types.StringValue(k8sops.DefaultJournalNamespace), JournalGroup: types.StringNull(),
		EndpointWait: types.StringValue(defaultEndpointWait),
		Recreated:    recreatedValue(nil, &resp.Diagnostics), NotMoved: stringMapValue(nil, &resp.Diagnostics),
		CompletedAt: types.StringNull(), DNSMovedAt: types.StringNull(), OldIPBridges: types.StringValue(k8sops.BridgesDNS),
		OldIPBridgeTTL: types.StringNull(), OldIPForceRemoval: types.BoolNull(), Bridges: bridgesValue(nil, &resp.Diagnostics),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType})},
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// faultDelay is the fault-injection delay at a point of each move (AFTER_DELETE, BEFORE_DELETE),
// always zero in the shipped provider: the crash, kill and fault suites build it with
// -tags k8scidr_faults (fault_hook.go), which reads it from the environment.
var faultDelay = func(string) time.Duration { return 0 }

// plannedKnown reports whether every value the apply acts on is known.
func (m *serviceRecreationModel) plannedKnown() bool {
	return !slices.ContainsFunc([]attr.Value{m.TargetCIDRs, m.Moves, m.Restore, m.First, m.DNSService},
		func(v attr.Value) bool { return !fullyKnown(v) })
}

// planned is what the apply does, from known configuration.
func (m *serviceRecreationModel) planned(ctx context.Context, diags *diag.Diagnostics) k8sops.PlannedRecreation {
	p := k8sops.PlannedRecreation{TargetCIDRs: stringList(ctx, m.TargetCIDRs, diags), Moves: movesFrom(ctx, m.Moves, diags),
		Restore: restoresFrom(ctx, m.Restore, diags), DNSService: m.DNSService.ValueString()}
	if !m.First.IsNull() {
		p.First = stringList(ctx, m.First, diags)
	}
	return p
}

func (m *serviceRecreationModel) bridge() k8sops.BridgeOptions {
	return k8sops.BridgeOptions{Enabled: m.DNSBridge.ValueBool(), Name: m.DNSBridgeName.ValueString(),
		OldIPs: m.OldIPBridges.ValueString(), Group: m.journal().Group}
}

type serviceRecreationModel struct {
	ID               types.String   `tfsdk:"id"`
	TargetCIDRs      types.List     `tfsdk:"target_cidrs"`
	Moves            types.Map      `tfsdk:"moves"`
	Restore          types.Map      `tfsdk:"restore"`
	First            types.List     `tfsdk:"first"`
	DNSService       types.String   `tfsdk:"dns_service"`
	DNSBridge        types.Bool     `tfsdk:"dns_bridge"`
	ForceRemoval     types.Bool     `tfsdk:"dns_bridge_force_removal"`
	DNSBridgeName    types.String   `tfsdk:"dns_bridge_name"`
	Parallelism      types.Int64    `tfsdk:"parallelism"`
	EndpointWait     types.String   `tfsdk:"endpoint_wait"`
	JournalNamespace types.String   `tfsdk:"journal_namespace"`
	JournalGroup     types.String   `tfsdk:"journal_group"`
	Recreated        types.Map      `tfsdk:"recreated"`
	NotMoved         types.Map      `tfsdk:"not_moved"`
	CompletedAt      types.String   `tfsdk:"completed_at"`
	DNSMovedAt       types.String   `tfsdk:"dns_moved_at"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
	// recreation_bridges.go
	OldIPBridges      types.String `tfsdk:"old_ip_bridges"`
	OldIPBridgeTTL    types.String `tfsdk:"old_ip_bridge_ttl"`
	OldIPForceRemoval types.Bool   `tfsdk:"old_ip_bridges_force_removal"`
	Bridges           types.Map    `tfsdk:"bridges"`
}

const defaultEndpointWait = "2m"

// endpointWait is endpoint_wait as a duration (validated at plan).
func (m *serviceRecreationModel) endpointWait() time.Duration {
	d, err := time.ParseDuration(m.EndpointWait.ValueString())
	if err != nil {
		d, _ = time.ParseDuration(defaultEndpointWait)
	}
	return d
}

// journal is the resource's own journal.
func (m *serviceRecreationModel) journal() k8sops.Journal {
	return k8sops.Journal{Namespace: m.JournalNamespace.ValueString(), Group: stringOr(m.JournalGroup, k8sops.DefaultJournalGroup)}
}
