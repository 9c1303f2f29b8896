// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

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
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
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
			"`moves` and `restore` of a `k8scidr_service_moves` data source (`plan`), which the plan shows. Apply re-checks each " +
			"move against the live Service and makes only those that still hold (the same object, at the planned old IPs, " +
			"its planned IPs free); the others are reported in `not_moved`, and the next plan shows what remains. Each " +
			"Service is journaled in the cluster before it is deleted, so an interrupted apply loses nothing: the next " +
			"plan lists the leftovers under the data source's `restore`. The cluster DNS Service moves first, and a DNS " +
			"bridge Service keeps its old IP answering until kubelets and pods follow. Destroy forgets (it moves nothing " +
			"back), and is refused while the journal holds entries of an interrupted apply: they are Services that would stay deleted.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The target ranges, comma-separated.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			// plan is one object attribute, the moves data source whole: nothing to wire by hand or
			// forget. Its maps are maps of objects, not nested attributes: the framework plans a
			// nested map by copying the whole map once per element (fwserver.mapElemObject),
			// quadratic in the number of Services (38 s and 10 GB allocated per plan at 10,000 moves).
			"plan": schema.ObjectAttribute{Required: true, AttributeTypes: recreationPlanType.AttrTypes,
				MarkdownDescription: "What to do: a `k8scidr_service_moves` data source, whole (`plan = " +
					"data.k8scidr_service_moves.NAME`; Terraform keeps the attributes listed here and drops the rest). " +
					"Its `target_cidrs` must each be served by a Ready ServiceCIDR when the apply starts (order this resource " +
					"after the `k8scidr_service_cidr` that creates it with `depends_on`). After a refresh `moves`, `restore` " +
					"and `first_moves` read as empty, so the next plan shows only what the data source still finds. " +
					"`moves`: " + movesDescription + " `restore`: " + restoreDescription + " `first_moves`: " +
					firstDescription + " If a first move no longer holds at apply, nothing is moved. `dns_service`: " +
					dnsServiceDescription + " `dns_bridge`, `dns_bridge_off_reason`: whether the DNS bridge is on, and why " +
					"not. `journal_namespace`, `journal_group`: the journal the data source read, which this resource writes.",
				Validators: []validator.Object{noNulls("must be what the `k8scidr_service_moves` data source gives")}},
			"dns_bridge_force_removal": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Delete the bridge when the plan's `dns_bridge` is false even though running pods may still resolve " +
					"through it. Without it the apply refuses, naming them, while a pod that uses the cluster resolver started " +
					"before the DNS move (or before the last change of kubeadm's `kube-system/kubelet-config`) still runs, or " +
					"while kubelet-config's `clusterDNS` still names the bridge's IP, or, where kubelet-config does not exist (kOps, EKS, GKE), " +
					"while a Ready node registered before the DNS move remains. Default `false`.",
			},
			"dns_bridge_name": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(recreation.DefaultDNSBridgeName),
				MarkdownDescription: "Name of the DNS bridge Service, beside the cluster DNS Service. A bridge keeps the old " +
					"IPs of one move: when the DNS Service moves again while a bridge exists (a second migration), the new bridge " +
					"on the IPs it frees then is `<name>-<hash>`, and both stay until `dns_bridge` is switched off, which removes " +
					"every one. Default `kube-dns-legacy`.",
				Validators: []validator.String{stringvalidator.RegexMatches(dns1035LabelRegexp,
					"must be a Service name: a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit)"),
					stringvalidator.LengthBetween(1, 63)}},
			"parallelism": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(recreation.DefaultParallelism),
				MarkdownDescription: fmt.Sprintf("Most Services in flight at once. The apply runs fewer while "+
					"kube-controller-manager is slow to write the new Services' EndpointSlices, steering each Service's "+
					"downtime (delete to a ready EndpointSlice) to about 150 ms. Default `%d`.", recreation.DefaultParallelism),
				Validators: []validator.Int64{int64validator.Between(1, 200)}},
			"endpoint_wait": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultEndpointWait),
				MarkdownDescription: "How long a moved Service that had ready endpoints may wait for kube-controller-manager " +
					"to write its new EndpointSlice, as a Go duration. Past it the Service is reported, not failed; after 5 " +
					"moves in a row without one the apply starts no further move and fails, naming them " +
					"(kube-controller-manager is down or stuck, and every further move would be one more Service without " +
					"endpoints). The next apply moves the rest. Default `" + defaultEndpointWait + "`.",
				Validators: []validator.String{durationBetween(time.Second, time.Hour)}},
			"recreated": schema.MapAttribute{Computed: true, ElementType: recreatedType,
				MarkdownDescription: "Services the last apply that moved anything recreated, with the IPs they had and got, " +
					"one line each: `\"100.64.0.10 to 172.24.0.10\"` (each side comma-separated in family order)."},
			"not_moved": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Planned moves and restores the last apply did not make because they no longer held, with " +
					"the reason (deleted, replaced, already moved, planned IP taken, type changed …)."},
			"completed_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time of the last apply that moved Services (or of creation)."},
			"summary": schema.StringAttribute{Computed: true,
				MarkdownDescription: "How the last apply that had Services to move went: `\"Finished: 32 of 32 Services moved, " +
					"0.8/s, 41s elapsed\"`; null until one has. While an apply runs, its progress is posted as Events on " +
					"the journal's Lease (`kubectl get events -n <journal namespace> --field-selector " +
					"involvedObject.name=k8scidr-journal-<group> -w`)."},
			"next_steps": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "What is left to do outside this resource after the last apply that moved Services, one " +
					"step each: the kubelets' `clusterDNS` and a node roll once the cluster DNS Service moved, the restarts " +
					"of pods still resolving through its old IP, `default/kubernetes`'s move. Empty when nothing is; an " +
					"output of it is what a pipeline shows after the apply (a successful apply prints no warning)."},
			"dns_service_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The cluster DNS Service's ClusterIPs as the apply that moved it left them: the value for " +
					"the kubelets' `clusterDNS` (kOps: `kubeDNS.serverIP`). They are the planned IPs (the data source's " +
					"`dns_service_ips`) unless another client took one during the apply, and the Service got the next free " +
					"address instead (the apply warns); use this value, which is the one the Service has. Null until this " +
					"resource moved it."},
			"dns_moved_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time this resource moved the cluster DNS Service; null until it has. Pods started " +
					"before it may still resolve through the old IP (see `k8scidr_workload_restarts.started_before`)."},
		},
		Blocks: map[string]schema.Block{"timeouts": timeoutsBlock(ctx, serviceRecreationTimeout, serviceRecreationTimeout, 0)},
	}
	maps.Copy(resp.Schema.Attributes, oldIPBridgeAttributes())
	maps.Copy(resp.Schema.Attributes, handOverAttributes())
}

func (r *serviceRecreationResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig refuses, before the cluster is read, moves no data source produces: target
// ranges the apiserver would refuse, new IPs outside them or on a reserved address, duplicates.
func (r *serviceRecreationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m serviceRecreationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.plannedKnown() {
		return
	}
	v := m.values()
	checkPlanNames(v, &resp.Diagnostics)
	addFindings(&resp.Diagnostics, planFindings(recreation.ValidatePlanned(m.planned(ctx, &resp.Diagnostics))), true)
}

// ModifyPlan plans the computed values from the configuration and prior state only, and reads
// the cluster for warnings: a target or bridge IP that no Ready range serves yet, a taken
// bridge name. The apply refuses those before touching anything.
func (r *serviceRecreationResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		r.refuseDestroyWithJournal(ctx, req.State, &resp.Diagnostics)
		return
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
	if v := plan.values(); complete(v.TargetCIDRs) {
		plan.ID = types.StringValue(strings.Join(stringList(ctx, v.TargetCIDRs, &resp.Diagnostics), ","))
	}
	if !plan.plannedKnown() {
		resp.Diagnostics.AddWarning("Service Moves Not Known Until Apply",
			"plan is known only during apply, so this plan cannot show which Services move "+
				"to which IPs, and the apply will move Services nobody reviewed. The usual cause is a k8scidr_service_moves "+
				"data source that references or depends_on a resource with changes in this plan: give it only variables "+
				"and locals, or apply that resource first (-target).")
		plan.Recreated, plan.NotMoved = types.MapUnknown(recreatedType), types.MapUnknown(types.StringType)
		plan.CompletedAt, plan.DNSMovedAt, plan.Bridges = types.StringUnknown(), types.StringUnknown(), types.MapUnknown(bridgeType)
		plan.DNSServiceIPs = types.ListUnknown(types.StringType)
		plan.Summary, plan.NextSteps = types.StringUnknown(), types.ListUnknown(types.StringType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	p := plan.planned(ctx, &resp.Diagnostics)
	journal := r.checkJournalRestored(ctx, &plan, p, &resp.Diagnostics)
	prior := &state
	if creating {
		prior = nil
	}
	checkedAt := bridgesCheckedAt(ctx, req.Private)
	plan.planBridges(ctx, prior, p, checkedAt, &resp.Diagnostics)
	work := len(p.Moves) > 0 || len(p.Restore) > 0
	dnsMoves := p.DNSService != "" && (slices.ContainsFunc(p.Moves, func(m recreation.Move) bool { return m.Key == p.DNSService }) ||
		slices.ContainsFunc(p.Restore, func(m recreation.Restore) bool { return m.Key == p.DNSService }))
	switch {
	case work:
		plan.Recreated, plan.NotMoved, plan.CompletedAt = types.MapUnknown(recreatedType), types.MapUnknown(types.StringType), types.StringUnknown()
		plan.Summary, plan.NextSteps = types.StringUnknown(), types.ListUnknown(types.StringType)
	case creating:
		plan.Recreated, plan.NotMoved, plan.CompletedAt = recreatedValue(nil, &resp.Diagnostics), stringMapValue(nil, &resp.Diagnostics), types.StringUnknown()
		plan.Summary, plan.NextSteps = types.StringNull(), stringListValue(nil, &resp.Diagnostics)
	default:
		plan.Recreated, plan.NotMoved, plan.CompletedAt = state.Recreated, state.NotMoved, state.CompletedAt
		plan.Summary, plan.NextSteps = state.Summary, state.NextSteps
	}
	switch {
	case dnsMoves:
		plan.DNSMovedAt, plan.DNSServiceIPs = types.StringUnknown(), types.ListUnknown(types.StringType)
	case creating:
		plan.DNSMovedAt, plan.DNSServiceIPs = types.StringNull(), types.ListNull(types.StringType)
	default:
		plan.DNSMovedAt, plan.DNSServiceIPs = state.DNSMovedAt, state.DNSServiceIPs
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if work || creating || !plan.values().DNSBridge.Equal(state.values().DNSBridge) {
		r.warnNotReady(ctx, &plan, p, journal, &resp.Diagnostics)
	}
	if _, checked := plan.bridgeRemovals(ctx, prior, p.Moves, checkedAt, &resp.Diagnostics); r.data != nil && r.data.client != nil {
		checkOldIPBridgeRemoval(ctx, r.data.client, &plan, checked, &resp.Diagnostics, false)
	}
	if work && r.data != nil && r.data.client != nil {
		found, err := preflight.RecreationHazards(ctx, r.data.client, p)
		warnHazards(found, err, &resp.Diagnostics)
		warnBridgeQuota(ctx, r.data.client, &plan, p, dnsMoves, &resp.Diagnostics)
	}
}

// warnBridgeQuota warns where a namespace's ResourceQuota leaves no room for the bridges this
// apply creates there: the moves whose bridge does not fit are not made (the apply asks
// admission before each delete). The moves themselves need no room: each delete frees it.
func warnBridgeQuota(ctx context.Context, c *k8sops.Client, plan *serviceRecreationModel, p recreation.PlannedRecreation, dnsMoves bool, diags *diag.Diagnostics) {
	need := map[string]int{}
	for key, b := range bridgesFrom(ctx, plan.Bridges, diags) {
		if b.CreatedAt.IsUnknown() { // made by this apply
			ns, _, _ := strings.Cut(key, "/")
			need[ns]++
		}
	}
	if dnsMoves && p.DNSBridge {
		ns, _, _ := strings.Cut(p.DNSService, "/")
		need[ns]++
	}
	short, err := recreation.ServiceQuotaShortfalls(ctx, c, need)
	if err != nil {
		diags.AddWarning("Service Quotas Not Read", "Whether ResourceQuotas leave room for the bridges this apply creates "+
			"could not be checked: "+apiErrorText(err)+". A move whose bridge a full quota refuses is not made.")
		return
	}
	for _, q := range short {
		// One summary per namespace: Terraform folds warnings with equal summaries into one.
		diags.AddWarning("Service Quota Full in Namespace "+q.Namespace, fmt.Sprintf("ResourceQuota %s/%s admits %d more "+
			"Services (%s: hard %d, used %d), and this apply creates %d bridges there. The moves whose bridge does not fit are "+
			"not made: their Services stay where they are and are listed in not_moved. Raise its %s to at least %d for the "+
			"migration, or set old_ip_bridges = \"dns\" if nothing uses their old IPs.",
			q.Namespace, q.Quota, q.Free(), q.Resource, q.Hard, q.Used, q.Need, q.Resource, q.Used+q.Need))
	}
}

// checkJournalChange refuses a change of journal_namespace or journal_group while the old
// journal holds entries: neither this resource nor its data source would read them again, and
// the Services an interrupted apply deleted would stay deleted.
func (r *serviceRecreationResource) checkJournalChange(ctx context.Context, plan, state *serviceRecreationModel, diags *diag.Diagnostics) {
	pv, sv := plan.values(), state.values()
	if r.data == nil || r.data.client == nil || pv.JournalNamespace.IsUnknown() || pv.JournalGroup.IsUnknown() ||
		sv.JournalNamespace.IsNull() || plan.journal() == state.journal() {
		return
	}
	at := path.Root("plan").AtName("journal_group")
	if !pv.JournalNamespace.Equal(sv.JournalNamespace) {
		at = path.Root("plan").AtName("journal_namespace")
	}
	left, err := recreation.JournalLeftovers(ctx, r.data.client, state.journal())
	switch {
	case err != nil:
		diags.AddAttributeError(at, "Old Journal Not Readable", fmt.Sprintf("The journal changes from %s to %s, and the old "+
			"one could not be read to check that it holds nothing: %s", state.journal(), plan.journal(), apiErrorText(err)))
	case len(left) > 0:
		diags.AddAttributeError(at, "Old Journal Still Holds Entries", fmt.Sprintf("The journal changes from %s to %s, but "+
			"the old one holds entries of an interrupted apply for %s: after the change nothing would read them, and "+
			"those Services would stay deleted. Apply once more with the old journal_namespace and journal_group on the "+
			"k8scidr_service_moves data source: that apply restores them and removes the journal. Then change them.", state.journal(), plan.journal(), strings.Join(left, ", ")))
	}
}

// checkJournalRestored refuses a plan whose restore leaves out entries of its journal that need
// one: an apply would leave them, and a Service an interrupted apply deleted would stay deleted.
// A plan the data source made lists them all; one written by hand, or read from another journal,
// may not. Terraform plans each resource again at apply, so a saved plan made before the journal
// filled stops here too, before anything changes. It returns the journal it read, for the
// plan's other checks.
func (r *serviceRecreationResource) checkJournalRestored(ctx context.Context, plan *serviceRecreationModel, p recreation.PlannedRecreation, diags *diag.Diagnostics) []recreation.JournalEntry {
	if r.data == nil || r.data.client == nil {
		return nil
	}
	journal, err := recreation.ReadJournal(ctx, r.data.client, plan.journal())
	var left []string
	if err == nil {
		left, err = recreation.UnrestoredJournal(ctx, r.data.client, journal, p)
	}
	switch {
	case err != nil:
		diags.AddAttributeError(path.Root("plan").AtName("restore"), "Journal Not Readable", fmt.Sprintf("Whether the journal in %s "+
			"holds entries this plan does not restore could not be checked: %s", plan.journal(), apiErrorText(err)))
	case len(left) > 0:
		diags.AddAttributeError(path.Root("plan").AtName("restore"), "Journal Entries Not Restored", fmt.Sprintf("The journal in %s "+
			"holds entries of an interrupted apply for %s, which plan.restore does not list: the apply would leave them, and "+
			"a Service that apply deleted would stay deleted. Nothing was changed. Give plan the k8scidr_service_moves data "+
			"source whole (plan = data.k8scidr_service_moves.NAME, with this journal_namespace and journal_group) and run "+
			"terraform plan again (a saved plan made before that apply was interrupted is stale): its restore lists them.",
			plan.journal(), strings.Join(left, ", ")))
	}
	return journal
}

// warnNotReady reads what the apply will refuse to start without, and warns: a target or bridge
// IP that no Ready range serves, counting the ServiceCIDRs this run creates first (the apply
// re-checks live).
func (r *serviceRecreationResource) warnNotReady(ctx context.Context, plan *serviceRecreationModel, p recreation.PlannedRecreation,
	journal []recreation.JournalEntry, diags *diag.Diagnostics) {
	if r.data == nil || r.data.client == nil || plan.DNSBridgeName.IsUnknown() {
		return
	}
	snap, err := recreation.TakeBridgeSnapshot(ctx, r.data.client, p.DNSService, plan.DNSBridgeName.ValueString(), journal)
	if err != nil {
		diags.AddWarning("Cluster Not Readable", "The plan could not check that the target ranges are served: "+apiErrorText(err))
		return
	}
	snap.Ranges = r.data.rangesWithPlanned(snap.Ranges)
	addFindings(diags, planFindings(recreation.RecreationPreflight(snap, p, plan.bridge())), false)
	checkBridgeRemoval(ctx, r.data.client, snap, plan, diags, false)
}

func (r *serviceRecreationResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan serviceRecreationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.apply(ctx, &plan, nil, time.Time{}, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *serviceRecreationResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state serviceRecreationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if r.apply(ctx, &plan, &state, bridgesCheckedAt(ctx, req.Private), &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	} else {
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...) // keep the last good state
	}
}

// apply checks each planned move against the cluster, makes those that hold, and fills the
// computed values; false when state must not change. Bridges' lifetimes are judged as of
// checkedAt, as the plan judged them (bridgesCheckedKey).
func (r *serviceRecreationResource) apply(ctx context.Context, plan, prior *serviceRecreationModel, checkedAt time.Time, diags *diag.Diagnostics) bool {
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
	if addFindings(diags, planFindings(recreation.ValidatePlanned(planned)), true); diags.HasError() {
		return false
	}
	logInfo := func(msg string, f map[string]any) { tflog.Info(ctx, msg, f) }
	var watches *recreation.Watches
	if len(planned.Moves) > 0 || len(planned.Restore) > 0 { // they sync while the snapshot lists
		watches = recreation.StartWatches(ctx, client, logInfo)
		defer watches.Stop()
	}
	// The journal is read once this apply holds it: an apply that held it until a moment ago
	// may have written or deleted entries until then.
	lease, err := recreation.HoldJournal(ctx, client, plan.journal(), recreation.LeaseOptions{Log: logInfo, Now: faultClock()})
	if err != nil {
		diags.AddError("Services Not All Moved", fmt.Sprintf("%s. Moved 0 Services before the error.", apiErrorText(err)))
		return false
	}
	defer lease.Release()
	snap, err := recreation.TakeSnapshot(lease.Context(), client, plan.journal(), true)
	if err != nil {
		diags.AddError("Cluster Not Readable", apiErrorText(err))
		return false
	}
	if plan.Bridges.IsUnknown() { // what the plan could not know yet (moves from an unknown data source) is known now
		plan.planBridges(ctx, prior, planned, checkedAt, diags)
	}
	expiredBridges, checked := plan.bridgeRemovals(ctx, prior, planned.Moves, checkedAt, diags)
	if checkOldIPBridgeRemoval(ctx, client, plan, checked, diags, true); diags.HasError() {
		return false
	}
	bridges := plan.bridge()
	bridges.RemoveOldIPs = expiredBridges
	for _, b := range checked {
		bridges.RemoveOldIPs = append(bridges.RemoveOldIPs, b.Key())
	}
	steps, errs := recreation.PrepareRecreation(snap, planned, bridges)
	if addFindings(diags, planFindings(errs), true); diags.HasError() {
		return false
	}
	if len(steps.RemoveBridges) > 0 {
		if checkBridgeRemoval(ctx, client, snap, plan, diags, true); diags.HasError() {
			return false
		}
	}
	addNotMoved(diags, steps.NotMoved)
	if len(steps.Unplanned) > 0 {
		diags.AddWarning("Journal Entries Not in the Plan",
			fmt.Sprintf("The journal in %s holds entries the plan did not show for %d Services (%s): an apply interrupted "+
				"after this plan was made. They are left as they are; plan again: the plan then shows them under restore.", plan.journal(), len(steps.Unplanned), strings.Join(steps.Unplanned, ", ")))
	}
	res, err := recreation.ExecuteRecreation(ctx, client, snap, steps, recreation.ExecOptions{
		Parallelism: int(plan.Parallelism.ValueInt64()), Journal: plan.journal(),
		SliceWait: plan.endpointWait(), HandOver: plan.handOver(),
		Log: logInfo, Watches: watches,
		HoldAfterDelete: faultHold("AFTER_DELETE"), HoldBeforeDelete: faultHold("BEFORE_DELETE"),
		HoldAfterAdmission: faultHold("AFTER_ADMISSION"), Lease: lease,
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
	return !diags.HasError()
}

// Read sets the plan's moves, restore and first_moves to the converged value, empty: only the
// data source computes what is outstanding, so it shows as a diff.
func (r *serviceRecreationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceRecreationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	state.Plan = state.values().converged(&resp.Diagnostics)
	if client, diags := r.data.Client(); !diags.HasError() {
		state.refreshBridges(ctx, client, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, bridgesCheckedKey, bridgesChecked(time.Now()))...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete forgets: moved Services stay where they are. It re-checks the journal, which may
// have filled since the plan.
func (r *serviceRecreationResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	r.refuseDestroyWithJournal(ctx, req.State, &resp.Diagnostics)
}

// refuseDestroyWithJournal refuses to forget a recreation whose journal holds entries: they
// are Services an interrupted apply deleted, and nothing else would ever restore them.
func (r *serviceRecreationResource) refuseDestroyWithJournal(ctx context.Context, st tfsdk.State, diags *diag.Diagnostics) {
	var state serviceRecreationModel
	if diags.Append(st.Get(ctx, &state)...); diags.HasError() {
		return
	}
	client, d := r.data.Client()
	if d.HasError() {
		diags.AddError("Journal Not Checked", "Destroying k8scidr_service_recreation needs the cluster, to check that its "+
			"journal holds no Service an interrupted apply deleted: "+d[0].Detail())
		return
	}
	j := state.journal()
	left, err := recreation.JournalLeftovers(ctx, client, j)
	switch {
	case err != nil:
		diags.AddError("Journal Not Readable", fmt.Sprintf("Destroying k8scidr_service_recreation forgets its journal %s, "+
			"which could not be read to check that it holds nothing: %s", j, apiErrorText(err)))
	case len(left) > 0:
		diags.AddError("Journal Still Holds Deleted Services", fmt.Sprintf("The journal %s holds entries of an interrupted "+
			"apply for %s: Services deleted and not yet recreated. Destroying (or removing) this resource would forget "+
			"them, and they would stay deleted. Keep the resource and apply once more: the k8scidr_service_moves data "+
			"source lists them under restore, and that apply recreates them and empties the journal. Then destroy.",
			j, strings.Join(left, ", ")))
	}
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
	v := recreationPlanModel{TargetCIDRs: ipsValue(cidrs, &resp.Diagnostics), DNSService: types.StringNull(), DNSBridge: types.BoolValue(true),
		DNSBridgeOffReason: types.StringNull(), JournalNamespace: types.StringValue(recreation.DefaultJournalNamespace),
		JournalGroup: types.StringValue(recreation.DefaultJournalGroup)}
	m := serviceRecreationModel{
		ID: types.StringValue(strings.Join(cidrs, ",")), Plan: v.converged(&resp.Diagnostics),
		DNSBridgeName: types.StringValue(recreation.DefaultDNSBridgeName), Parallelism: types.Int64Value(recreation.DefaultParallelism),
		EndpointWait: types.StringValue(defaultEndpointWait),
		Recreated:    recreatedValue(nil, &resp.Diagnostics), NotMoved: stringMapValue(nil, &resp.Diagnostics),
		CompletedAt: types.StringNull(), Summary: types.StringNull(), NextSteps: stringListValue(nil, &resp.Diagnostics), DNSMovedAt: types.StringNull(), DNSServiceIPs: types.ListNull(types.StringType), OldIPBridges: types.StringValue(recreation.DefaultOldIPBridges),
		OldIPBridgeTTL: types.StringNull(), OldIPForceRemoval: types.BoolNull(), Bridges: bridgesValue(nil, &resp.Diagnostics),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType})},
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// faultHold is the fault-injection hold at a point of each move (AFTER_DELETE, BEFORE_DELETE,
// AFTER_ADMISSION),
// always nil in the shipped provider: the crash, kill and fault suites build it with
// -tags k8scidr_faults (fault_hook.go), which reads it from the environment.
var faultHold = func(string) func(context.Context, string) { return nil }

// faultClock is the clock the journal's lease times are written by: a skewed one in the fault
// suite's provider (K8SCIDR_FAULT_CLOCK_SKEW), nil (the process's own) otherwise.
var faultClock = func() func() time.Time { return nil }

// plannedKnown reports whether every value the apply acts on is known.
func (m *serviceRecreationModel) plannedKnown() bool { return complete(m.Plan) }

// planned is what the apply does, from known configuration.
func (m *serviceRecreationModel) planned(ctx context.Context, diags *diag.Diagnostics) recreation.PlannedRecreation {
	v := m.values()
	p := recreation.PlannedRecreation{TargetCIDRs: stringList(ctx, v.TargetCIDRs, diags), Moves: movesFrom(ctx, v.Moves, diags),
		Restore: restoresFrom(ctx, v.Restore, diags), DNSService: v.DNSService.ValueString(), DNSBridge: v.DNSBridge.ValueBool(),
		DNSBridgeOffReason: v.DNSBridgeOffReason.ValueString()}
	if !v.FirstMoves.IsNull() {
		p.First = stringList(ctx, v.FirstMoves, diags)
	}
	return p
}

func (m *serviceRecreationModel) bridge() recreation.BridgeOptions {
	return recreation.BridgeOptions{Enabled: m.values().DNSBridge.ValueBool(), Name: m.DNSBridgeName.ValueString(),
		OldIPs: m.OldIPBridges.ValueString(), Group: m.journal().Group}
}

type serviceRecreationModel struct {
	ID            types.String   `tfsdk:"id"`
	Plan          types.Object   `tfsdk:"plan"`
	ForceRemoval  types.Bool     `tfsdk:"dns_bridge_force_removal"`
	DNSBridgeName types.String   `tfsdk:"dns_bridge_name"`
	Parallelism   types.Int64    `tfsdk:"parallelism"`
	EndpointWait  types.String   `tfsdk:"endpoint_wait"`
	Recreated     types.Map      `tfsdk:"recreated"`
	NotMoved      types.Map      `tfsdk:"not_moved"`
	CompletedAt   types.String   `tfsdk:"completed_at"`
	Summary       types.String   `tfsdk:"summary"`
	NextSteps     types.List     `tfsdk:"next_steps"`
	DNSMovedAt    types.String   `tfsdk:"dns_moved_at"`
	DNSServiceIPs types.List     `tfsdk:"dns_service_ips"`
	Timeouts      timeouts.Value `tfsdk:"timeouts"`
	// recreation_bridges.go
	OldIPBridges      types.String `tfsdk:"old_ip_bridges"`
	OldIPBridgeTTL    types.String `tfsdk:"old_ip_bridge_ttl"`
	OldIPForceRemoval types.Bool   `tfsdk:"old_ip_bridges_force_removal"`
	Bridges           types.Map    `tfsdk:"bridges"`
	// recreation_handover.go
	HandOver      types.Bool   `tfsdk:"hand_over"`
	ClusterDomain types.String `tfsdk:"cluster_domain"`
	ProxySyncWait types.String `tfsdk:"proxy_sync_wait"`
	DNSTTL        types.String `tfsdk:"dns_ttl"`
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

// journal is the journal the plan's data source read, which this resource writes.
func (m *serviceRecreationModel) journal() recreation.Journal {
	v := m.values()
	return recreation.Journal{Namespace: stringOr(v.JournalNamespace, recreation.DefaultJournalNamespace),
		Group: stringOr(v.JournalGroup, recreation.DefaultJournalGroup)}
}
