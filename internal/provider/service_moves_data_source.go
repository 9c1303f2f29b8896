// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_service_moves: which Services move into the target range, to which IPs,
// read at plan time so that the reviewed plan shows exactly what k8scidr_service_recreation does.
package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

var (
	_ datasource.DataSourceWithConfigure      = (*serviceMovesDataSource)(nil)
	_ datasource.DataSourceWithValidateConfig = (*serviceMovesDataSource)(nil)
)

type serviceMovesDataSource struct {
	data *providerData
}

func newServiceMovesDataSource() datasource.DataSource { return &serviceMovesDataSource{} }

func (d *serviceMovesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_moves"
}

func (d *serviceMovesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	nsName := stringvalidator.RegexMatches(namespacedNameRegexp, "must be namespace/name")
	strSet := func(desc string, v validator.String) schema.SetAttribute {
		return schema.SetAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: desc,
			Validators: setOf(v)}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Plans a Service move: every matching Service whose ClusterIP lies outside `target_cidrs`, with " +
			"the IP it gets there, and why the others stay. Give it whole to `k8scidr_service_recreation` (`plan = data." +
			"k8scidr_service_moves.NAME`), which does exactly this. Read at plan time, its values are stored in a saved plan and are what the apply does, however the " +
			"cluster changes meanwhile — so give it only variables and locals, never a resource's attribute or " +
			"`depends_on` (Terraform would then read it only during apply, and the plan could not show the moves).",
		Attributes: map[string]schema.Attribute{
			"target_cidrs": schema.ListAttribute{Required: true, ElementType: types.StringType,
				MarkdownDescription: "The new Service range(s), one per IP family, e.g. `[var.service_cidr]`.",
				Validators:          []validator.List{listvalidator.SizeBetween(1, 2), noNulls(cidrRule)}},
			"namespaces":         strSet("Only Services in these namespaces. Default: all.", namespaceName()),
			"exclude_namespaces": strSet("Never Services in these namespaces. Unset, none is excluded.", namespaceName()),
			"selector": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Only Services whose labels match this label selector (`kubectl -l` syntax). Unset, labels do not matter.",
				Validators:          []validator.String{labelSelectorValidator()}},
			"exclude": strSet("Services (`namespace/name`) never moved. Unset, none is excluded.", nsName),
			"include_load_balancers": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Also move LoadBalancer Services: recreating one replaces its cloud load balancer and " +
					"address. Keep their IPs valid with a small `k8scidr_service_cidr` instead. Default `false`."},
			"include_owned": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Also move Services owned by a controller (ownerReference with `controller: true`), which " +
					"could recreate them on its own between delete and create. Default `false`."},
			"include_pinned": strSet("Services (`namespace/name`) moved although a tool that applies its fields again (Helm, "+
				"Argo CD, Flux, `kubectl apply`, Terraform, any server-side apply) owns their `spec.clusterIP`. Such a Service "+
				"is otherwise skipped, with a plan warning naming the tool: moved, the tool's next sync would fail "+
				"(`clusterIP` is immutable) or put it back at its old IP. List it once its `clusterIP` is gone from what "+
				"the tool applies (an update's ownership of the field outlives that). Unset, none is.", nsName),
			"first": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Services (`namespace/name`) moved and verified before the rest, in this order, and placed " +
					"first. Default: the cluster DNS Service (`kube-system/kube-dns`) where it exists. Every Service listed must exist.",
				Validators: listOf(nsName)},
			"ip_assignment": schema.StringAttribute{Optional: true,
				MarkdownDescription: "`preserve_offset`: keep each IP's offset in its old range, modulo the target's size " +
					"(100.64.0.10 in 100.64.0.0/13 → 172.24.0.10 in 172.24.0.0/15), probing forward past taken addresses. " +
					"`next_free`: the lowest free addresses. Either way never the target's network, broadcast or first (.1) " +
					"address. `previous`: the way back: each Service returns to the IPs it had before `k8scidr_service_recreation` " +
					"last moved it (recorded on it, annotation `" + k8sops.PreviousClusterIPsAnnotation + "`; arithmetic cannot " +
					"invert `preserve_offset` from a larger range into a smaller one), also where its own bridge holds them now: the " +
					"move deletes that bridge right before it creates the Service there. A Service with nothing recorded, or whose " +
					"earlier IP another Service holds, is placed as `preserve_offset` places it, and the plan warns. Default `" +
					k8sops.PreserveOffset + "`.",
				Validators: []validator.String{stringvalidator.OneOf(k8sops.PreserveOffset, k8sops.NextFree, k8sops.Previous)}},
			"journal_namespace": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Namespace of the recreation journal (ConfigMaps labelled `k8scidr.io/journal`, the Lease of " +
					"one apply, progress Events): a namespace of its own, so that a Role there grants the journal's writes and no " +
					"other ConfigMap's. The apply creates it when it is missing and its identity may. Default `" +
					recreation.DefaultJournalNamespace + "`.",
				Validators: []validator.String{namespaceName()}},
			"journal_group": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Whose journal this is (label `k8scidr.io/journal-group`): give each migration of a cluster " +
					"applied side by side (e.g. one per namespace group) its own, so that none restores or removes another's " +
					"entries. The recreation takes it with the rest of this data source. Default `" + recreation.DefaultJournalGroup + "`.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(labelValueRegexp,
					"must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")}},
			"dns_bridge": schema.BoolAttribute{Optional: true, Computed: true,
				MarkdownDescription: "When the cluster DNS Service moves, a bridge Service answers on its old IP (same selector " +
					"and ports) so that pods and kubelets still using the old resolver keep working; it stays until this is " +
					"set to false, after kubelets' `clusterDNS` changed and pods restarted. Its old IP counts in `keep_cidrs` " +
					"while it is on. Moving the cluster DNS Service with it off is a plan error unless `dns_bridge_off_reason` " +
					"says why nothing resolves through the old IP. Default `true`."},
			"dns_bridge_off_reason": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Why moving the cluster DNS Service without its bridge is safe here (e.g. every node " +
					"runs NodeLocal DNSCache on its own address). Only read when `dns_bridge = false` and the DNS Service moves. " +
					"Unset, moving the DNS Service without its bridge is a plan error.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
			"moves": schema.MapAttribute{Computed: true, ElementType: moveType, MarkdownDescription: movesDescription},
			"restore": schema.MapNestedAttribute{Computed: true, MarkdownDescription: restoreDescription,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"new_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "IPs it has, or is recreated with."},
					"journal": schema.StringAttribute{Computed: true, MarkdownDescription: "Journal ConfigMap holding it."},
				}}},
			"skipped": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Services outside the target that do not move, by `namespace/name`, with the reason. " +
					"Where a ValidatingAdmissionPolicy or webhook matches Service creates, each move is asked of admission (a " +
					"server-side dry-run create, which needs `create` on Services: a read-only identity is warned instead) and " +
					"those it would refuse are here with its message."},
			"first_moves": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The keys of `first` that move, in order: the resource's `first`."},
			"dns_service": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: dnsServiceInputDescription + " After the read: the Service found, null when the " +
					"cluster has none.",
				Validators: []validator.String{nsName}},
			"keep_cidrs": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The narrowest valid Service ranges that keep valid every IP outside `target_cidrs` that " +
					"stays where it is once the plan is carried out: skipped LoadBalancer Services and, with `dns_bridge`, the " +
					"cluster DNS Service's old IP (its bridge). Not the old-IP bridges of `k8scidr_service_recreation`: a " +
					"keep-range is Ready, and new Services would get IPs there; their IPs hold the retired old range " +
					"(Terminating: nothing new is allocated in it) until they are removed. Create one `k8scidr_service_cidr` for each before the " +
					"old range is retired. With `dns_bridge = false` the DNS bridge's range drops out, in the same apply " +
					"that removes the bridge."},
			"dns_service_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The cluster DNS Service's ClusterIPs once the moves are done: the value for the kubelet " +
					"`clusterDNS` setting (kOps: `kubeDNS.serverIP`). Empty without a cluster DNS Service."},
			"dns_moved_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "RFC 3339 time the cluster DNS Service got its current IPs (its creation, or the time " +
					"`k8scidr_service_recreation` handed it over to them, recorded on it as `k8scidr.io/moved-at`); null without one. Pods started before it may still resolve through its old IP: feed " +
					"it to `k8scidr_workload_restarts.started_before` once it has moved."},
			"bridges": schema.MapNestedAttribute{Computed: true,
				MarkdownDescription: "The old-IP bridges in the cluster of `journal_group` (`k8scidr_service_recreation`'s " +
					"`old_ip_bridges = \"all\"`), by their `namespace/name`: the `service` each stands in for, the old `ips` it " +
					"keeps, `created_at`. A Service moved twice has two. Bridges are never moved, and are not listed in `moves` or `skipped`.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"service":    schema.StringAttribute{Computed: true, MarkdownDescription: "The Service it stands in for (`namespace/name`)."},
					"ips":        schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "The old IPs it keeps."},
					"created_at": schema.StringAttribute{Computed: true, MarkdownDescription: "When it was created (RFC 3339)."},
				}}},
		},
	}
}

func (d *serviceMovesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks what needs no cluster, before the cluster is read.
func (d *serviceMovesDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var m serviceMovesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if complete(m.TargetCIDRs) && !m.TargetCIDRs.IsNull() {
		addFindings(&resp.Diagnostics, k8sops.ValidateServiceCIDRs(k8sops.At("target_cidrs"), stringList(ctx, m.TargetCIDRs, &resp.Diagnostics)), true)
	}
}

// admissionParallelism is how many dry-run creates the plan has in flight where admission
// policies make it ask about each move.
const admissionParallelism = 8

func (d *serviceMovesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m serviceMovesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	journal := recreation.Journal{Namespace: stringOr(m.JournalNamespace, recreation.DefaultJournalNamespace),
		Group: stringOr(m.JournalGroup, recreation.DefaultJournalGroup)}
	snap, err := recreation.TakeSnapshot(ctx, client, journal, false)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", apiErrorText(err))
		return
	}
	o := m.options(ctx, &resp.Diagnostics)
	if !o.DNSBridge {
		d.data.dnsBridgeOff.Store(true)
	}
	p := recreation.PlanRecreation(snap, o)
	if len(p.Errors) == 0 {
		switch note, err := recreation.PlanAdmission(ctx, client, snap, &p, admissionParallelism); {
		case err != nil:
			resp.Diagnostics.AddWarning("Admission Not Asked", "Which moves admission would refuse could not be asked at plan: "+
				apiErrorText(err)+". The apply asks before each delete and lists the refused ones in not_moved.")
		case note != "":
			resp.Diagnostics.AddWarning("Admission Not Asked", note)
		}
	}
	addFindings(&resp.Diagnostics, p.Errors, true)
	if !resp.Diagnostics.HasError() {
		// The same static checks the recreation makes of this value: an outage is refused here, at plan.
		addFindings(&resp.Diagnostics, recreation.ValidatePlanned(recreation.PlannedRecreation{TargetCIDRs: o.TargetCIDRs,
			Moves: p.Moves, Restore: p.Restore, First: p.First, DNSService: p.DNSService, DNSBridge: o.DNSBridge,
			DNSBridgeOffReason: m.DNSBridgeOffReason.ValueString()}), true)
	}
	for _, f := range p.Warnings {
		resp.Diagnostics.AddAttributeWarning(pathOf(f.Path), f.Summary, f.Detail+" k8scidr_service_recreation refuses to start until it is.")
	}
	for _, n := range p.Notes {
		resp.Diagnostics.AddWarning("Check Before Moving the Cluster DNS Service", n)
	}
	for _, n := range p.WayBack {
		resp.Diagnostics.AddAttributeWarning(pathOf(k8sops.At("ip_assignment")), "The Way Back", n)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if n := len(p.Restore); n > 0 {
		resp.Diagnostics.AddWarning("Interrupted Apply Left Work in the Journal",
			fmt.Sprintf("%d journal entries are left (%s): the recreation's next apply settles them first, recreating any "+
				"Service that is missing.", n, restoreKeys(p.Restore)))
	}
	// skipped is not shown in a plan: the reviewer would see only fewer moves.
	if len(p.Refused) > 0 {
		resp.Diagnostics.AddWarning("Admission Refuses Some Recreations",
			fmt.Sprintf("%d Service(s) stay in their old range: admission answered a dry-run create of their moved copy with a "+
				"refusal, so they are not moved.\n%s\nAllow the recreation in the policy or webhook named and plan again, or "+
				"leave them out of the move (exclude) and keep the old range for them.", len(p.Refused), listedReasons(p.Refused)))
	}
	if len(p.Pinned) > 0 {
		resp.Diagnostics.AddAttributeWarning(path.Root("include_pinned"), "Cluster IPs Pinned by a Tool That Applies Them Again",
			fmt.Sprintf("%d Service(s) stay in their old range: a tool that applies its fields again owns their spec.clusterIP, "+
				"and would fail its next sync, or put the Service back at its old IP, once it moved.\n%s\nRemove clusterIP "+
				"(and clusterIPs) from what that tool applies (Helm values, the Git manifest, a kubernetes_service's cluster_ip), "+
				"then list the Services in include_pinned; or move them with their tool and keep the old range for them meanwhile.",
				len(p.Pinned), listedReasons(p.Pinned)))
	}
	if len(p.Dropped) > 0 {
		var lines []string
		for _, k := range slices.Sorted(maps.Keys(p.Dropped)) {
			lines = append(lines, fmt.Sprintf("- %s: %s", k, p.Dropped[k]))
		}
		resp.Diagnostics.AddWarning("Journal Entries Dropped, Not Restored",
			fmt.Sprintf("%d journal entries of an interrupted apply are not restored: their Service could only be "+
				"recreated in a namespace that is being deleted or gone.\n%s\nThe recreation's next apply removes them.",
				len(p.Dropped), strings.Join(lines, "\n")))
	}
	m.Moves = movesValue(p.Moves, &resp.Diagnostics)
	m.Restore = restoreValue(p.Restore, &resp.Diagnostics)
	m.Skipped = stringMapValue(p.Skipped, &resp.Diagnostics)
	m.FirstMoves = ipsValue(p.First, &resp.Diagnostics)
	m.DNSService, m.DNSMovedAt = types.StringNull(), types.StringNull()
	if p.DNSService != "" {
		m.DNSService = types.StringValue(p.DNSService)
	}
	if !p.DNSMovedAt.IsZero() {
		m.DNSMovedAt = types.StringValue(p.DNSMovedAt.Format(time.RFC3339))
	}
	m.DNSServiceIPs = ipsValue(p.DNSIPs, &resp.Diagnostics)
	m.JournalNamespace, m.JournalGroup = types.StringValue(journal.Namespace), types.StringValue(journal.Group)
	m.DNSBridge = types.BoolValue(o.DNSBridge)
	keep := make([]string, len(p.KeepCovering))
	for i, c := range p.KeepCovering {
		keep[i] = c.String()
	}
	m.KeepCIDRs = ipsValue(keep, &resp.Diagnostics)
	m.Bridges = bridgesValue(bridgesOf(slices.DeleteFunc(p.OldIPBridges, func(b recreation.OldIPBridge) bool { return b.Group != journal.Group })), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func restoreKeys(rs []recreation.Restore) string {
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = r.Key
	}
	return strings.Join(keys, ", ")
}

func (m *serviceMovesModel) options(ctx context.Context, diags *diag.Diagnostics) recreation.RecreationOptions {
	set := func(s types.Set) []string {
		var out []string
		diags.Append(s.ElementsAs(ctx, &out, false)...)
		slices.Sort(out)
		return out
	}
	o := recreation.RecreationOptions{
		TargetCIDRs: stringList(ctx, m.TargetCIDRs, diags), Namespaces: set(m.Namespaces), ExcludeNamespaces: set(m.ExcludeNamespaces),
		Selector: m.Selector.ValueString(), Exclude: set(m.Exclude), IncludeLoadBalancers: m.IncludeLoadBalancers.ValueBool(),
		IncludeOwned: m.IncludeOwned.ValueBool(), IncludePinned: set(m.IncludePinned), IPAssignment: stringOr(m.IPAssignment, k8sops.PreserveOffset),
		DNSService: m.DNSService.ValueString(), DNSBridge: m.DNSBridge.IsNull() || m.DNSBridge.ValueBool(),
	}
	if !m.First.IsNull() {
		o.First = append([]string{}, stringList(ctx, m.First, diags)...)
	}
	return o
}

type serviceMovesModel struct {
	TargetCIDRs          types.List   `tfsdk:"target_cidrs"`
	Namespaces           types.Set    `tfsdk:"namespaces"`
	ExcludeNamespaces    types.Set    `tfsdk:"exclude_namespaces"`
	Selector             types.String `tfsdk:"selector"`
	Exclude              types.Set    `tfsdk:"exclude"`
	IncludeLoadBalancers types.Bool   `tfsdk:"include_load_balancers"`
	IncludeOwned         types.Bool   `tfsdk:"include_owned"`
	IncludePinned        types.Set    `tfsdk:"include_pinned"`
	First                types.List   `tfsdk:"first"`
	IPAssignment         types.String `tfsdk:"ip_assignment"`
	JournalNamespace     types.String `tfsdk:"journal_namespace"`
	JournalGroup         types.String `tfsdk:"journal_group"`
	DNSBridge            types.Bool   `tfsdk:"dns_bridge"`
	DNSBridgeOffReason   types.String `tfsdk:"dns_bridge_off_reason"`
	KeepCIDRs            types.List   `tfsdk:"keep_cidrs"`
	Moves                types.Map    `tfsdk:"moves"`
	Restore              types.Map    `tfsdk:"restore"`
	Skipped              types.Map    `tfsdk:"skipped"`
	FirstMoves           types.List   `tfsdk:"first_moves"`
	DNSService           types.String `tfsdk:"dns_service"`
	DNSServiceIPs        types.List   `tfsdk:"dns_service_ips"`
	DNSMovedAt           types.String `tfsdk:"dns_moved_at"`
	Bridges              types.Map    `tfsdk:"bridges"`
}

// listedReasons lists the first 20 Services of reasons with theirs, one per line.
func listedReasons(reasons map[string]string) string {
	keys := slices.Sorted(maps.Keys(reasons))
	var lines []string
	for _, k := range keys[:min(len(keys), 20)] {
		lines = append(lines, fmt.Sprintf("- %s: %s", k, reasons[k]))
	}
	if len(keys) > 20 {
		lines = append(lines, fmt.Sprintf("- and %d more (the data source's skipped lists them all)", len(keys)-20))
	}
	return strings.Join(lines, "\n")
}
