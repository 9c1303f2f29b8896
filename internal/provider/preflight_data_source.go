// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_preflight: every hazard in the cluster that would break the migration of
// the given ranges, with a blocker count for a precondition.
package provider

import (
	"context"
	"net/netip"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
)

var (
	_ datasource.DataSourceWithConfigure      = (*preflightDataSource)(nil)
	_ datasource.DataSourceWithValidateConfig = (*preflightDataSource)(nil)
)

type preflightDataSource struct {
	data *providerData
}

func newPreflightDataSource() datasource.DataSource { return &preflightDataSource{} }

func (d *preflightDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_preflight"
}

// preflightRangeAttrs are the migration's ranges, by attribute.
var preflightRangeAttrs = []struct{ name, desc string }{
	{"old_service_cidrs", "The Service ranges Services move out of, e.g. `[\"100.64.0.0/13\"]`. Unset, nothing is checked against an old Service range."},
	{"new_service_cidrs", "The Service ranges they move into. Unset, nothing is checked against a new Service range."},
	{"old_pod_cidrs", "The pod ranges (Calico pools) pods move out of. Unset, nothing is checked against an old pod range."},
	{"new_pod_cidrs", "The pod ranges they move into. Unset, nothing is checked against a new pod range."},
}

func (d *preflightDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	attrs := map[string]schema.Attribute{
		"reserved": schema.MapAttribute{Optional: true, ElementType: types.StringType,
			MarkdownDescription: "Ranges that belong to something else, by name, e.g. `{ tailscale = \"100.64.0.0/10\" }`. " +
				"Unset, nothing is reserved: new ranges are checked against the cluster's ranges and each other only.",
			Validators: mapOf(cidrValidator())},
		"findings": schema.ListNestedAttribute{Computed: true,
			MarkdownDescription: "Every hazard found, blockers first, then by check and object.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"severity": str("`blocker` (fix it before the first apply), `warning` (needs a step of its own) or `info`."),
				"check":    str("The check's stable id (see the table above)."),
				"object": schema.SingleNestedAttribute{Computed: true, MarkdownDescription: "The object it is about.",
					Attributes: map[string]schema.Attribute{
						"kind":      str("Its kind, e.g. `Service`, `Deployment`, `IPPool`; for `check_unread`, what could not be read."),
						"namespace": str("Its namespace; empty for cluster-scoped objects."),
						"name":      str("Its name."),
					}},
				"shown_by": str("The resource that shows this finding as a plan warning (or refuses, for a blocker) of its " +
					"own when its stage comes: `k8scidr_service_moves` (which leaves the Service out), " +
					"`k8scidr_service_recreation`, `k8scidr_calico_ippool` or `k8scidr_workload_roll`; null when no resource does, and only this data source tells of it. A " +
					"`check` block over every stage asserts only the findings with no `shown_by`, so that each plan warns " +
					"of what concerns its own stage."),
				"summary": str("`<check> on <Kind> <namespace>/<name>`, for messages."),
				"detail":  str("What will happen."),
				"fix":     str("What to do."),
			}}},
		"blockers": schema.Int64Attribute{Computed: true, MarkdownDescription: "The number of `blocker` findings: gate the first stage on `blockers == 0`."},
		"warnings": schema.Int64Attribute{Computed: true, MarkdownDescription: "The number of `warning` findings."},
	}
	for _, a := range preflightRangeAttrs {
		attrs[a.name] = schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: a.desc,
			Validators: listOf(cidrValidator())}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Finds, before anything moves, what in the cluster would break the migration of the given ranges: " +
			"tools that apply a Service's old ClusterIP again, DNS settings bound to the old DNS IP, pods pinned to the old " +
			"Calico pool, kube-controller-manager's and kube-proxy's cluster CIDR, policies and BGP advertisements naming the " +
			"old ranges, fail-closed admission, disruption budgets over bare pods, stuck rollouts, and ranges that collide. " +
			"Give it variables or locals only, so it is read at plan.",
		Attributes: attrs,
	}
}

func (d *preflightDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig reports ranges that cannot describe a migration, before the cluster is read.
func (d *preflightDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var m preflightModel
	if resp.Diagnostics.Append(req.Config.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	if r, ok := m.ranges(ctx, &resp.Diagnostics); ok {
		addFindings(&resp.Diagnostics, r.Validate(), true)
	}
}

func (d *preflightDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m preflightModel
	if resp.Diagnostics.Append(req.Config.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	r, ok := m.ranges(ctx, &resp.Diagnostics)
	if !ok {
		return
	}
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	findings, err := preflight.Preflight(ctx, client, r, nil)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", apiErrorText(err))
		return
	}
	m.Findings = make([]preflightFindingModel, 0, len(findings))
	for _, f := range findings {
		m.Findings = append(m.Findings, preflightFindingModel{Severity: types.StringValue(f.Severity), Check: types.StringValue(f.Check),
			Object: objectRefModel{Kind: types.StringValue(f.Object.Kind), Namespace: types.StringValue(f.Object.Namespace),
				Name: types.StringValue(f.Object.Name)},
			ShownBy: shownBy(f.Check), Summary: types.StringValue(f.Summary()), Detail: types.StringValue(f.Detail), Fix: types.StringValue(f.Fix)})
	}
	m.Blockers = types.Int64Value(int64(preflight.CountSeverity(findings, preflight.SeverityBlocker)))
	m.Warnings = types.Int64Value(int64(preflight.CountSeverity(findings, preflight.SeverityWarning)))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// ranges parses the configured ranges; false while any is unknown (validation waits) or invalid
// (the schema validators say why).
func (m *preflightModel) ranges(ctx context.Context, diags *diag.Diagnostics) (preflight.PreflightRanges, bool) {
	var r preflight.PreflightRanges
	all := true
	for _, a := range []struct {
		dst *[]netip.Prefix
		l   types.List
	}{{&r.OldService, m.OldServiceCIDRs}, {&r.NewService, m.NewServiceCIDRs}, {&r.OldPod, m.OldPodCIDRs}, {&r.NewPod, m.NewPodCIDRs}} {
		var ok bool
		*a.dst, ok = cidrList(ctx, a.l, diags)
		all = all && ok
	}
	var ok bool
	r.Reserved, ok = namedCIDRs(ctx, preflight.RangeReserved, m.Reserved, diags)
	return r, all && ok && !diags.HasError()
}

type preflightModel struct {
	OldServiceCIDRs types.List              `tfsdk:"old_service_cidrs"`
	NewServiceCIDRs types.List              `tfsdk:"new_service_cidrs"`
	OldPodCIDRs     types.List              `tfsdk:"old_pod_cidrs"`
	NewPodCIDRs     types.List              `tfsdk:"new_pod_cidrs"`
	Reserved        types.Map               `tfsdk:"reserved"`
	Findings        []preflightFindingModel `tfsdk:"findings"`
	Blockers        types.Int64             `tfsdk:"blockers"`
	Warnings        types.Int64             `tfsdk:"warnings"`
}

type preflightFindingModel struct {
	Severity types.String   `tfsdk:"severity"`
	Check    types.String   `tfsdk:"check"`
	Object   objectRefModel `tfsdk:"object"`
	ShownBy  types.String   `tfsdk:"shown_by"`
	Summary  types.String   `tfsdk:"summary"`
	Detail   types.String   `tfsdk:"detail"`
	Fix      types.String   `tfsdk:"fix"`
}

type objectRefModel struct {
	Kind      types.String `tfsdk:"kind"`
	Namespace types.String `tfsdk:"namespace"`
	Name      types.String `tfsdk:"name"`
}

// stageChecks are the checks each resource (or the moves data source) runs at plan over its own
// stage's ranges, and shows as warnings (preflight's stage subsets), by type.
var stageChecks = []struct {
	resource string
	checks   [][]string
}{
	{"k8scidr_service_moves", [][]string{preflight.MovesChecks}},
	{"k8scidr_service_recreation", [][]string{preflight.ServiceStageChecks}},
	{"k8scidr_calico_ippool", [][]string{preflight.PoolCreateChecks, preflight.PoolDisableChecks}},
	{"k8scidr_workload_roll", [][]string{preflight.RollStageChecks}},
}

// shownBy is the resource type that shows a finding of check at its own stage, or null.
func shownBy(check string) types.String {
	for _, s := range stageChecks {
		if slices.ContainsFunc(s.checks, func(cs []string) bool { return slices.Contains(cs, check) }) {
			return types.StringValue(s.resource)
		}
	}
	return types.StringNull()
}
