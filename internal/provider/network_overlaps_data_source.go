// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_network_overlaps: the cluster's ranges checked pairwise and against
// reserved ranges, for check blocks and preconditions.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
)

var _ datasource.DataSourceWithConfigure = (*networkOverlapsDataSource)(nil)

type networkOverlapsDataSource struct {
	data *providerData
}

func newNetworkOverlapsDataSource() datasource.DataSource { return &networkOverlapsDataSource{} }

func (d *networkOverlapsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_network_overlaps"
}

var rangeAttrs = map[string]schema.Attribute{
	"kind": schema.StringAttribute{Computed: true, MarkdownDescription: "`node_address`, `node_pod_cidr`, `service_cidr`, `calico_pool`, `extra` or `reserved`."},
	"name": schema.StringAttribute{Computed: true, MarkdownDescription: "Node (and address type), ServiceCIDR, pool, or the key given."},
	"cidr": schema.StringAttribute{Computed: true, MarkdownDescription: "The range."},
}

func (d *networkOverlapsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	named := func(desc string) schema.ListNestedAttribute {
		return schema.ListNestedAttribute{Computed: true, MarkdownDescription: desc, NestedObject: schema.NestedAttributeObject{Attributes: rangeAttrs}}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Gathers the cluster's address ranges — node addresses, node podCIDRs, ServiceCIDRs, Calico pools — " +
			"plus `extra` named ranges, and checks every pair, and each against `reserved`. Pairs that overlap by design are " +
			"not conflicts: node podCIDRs inside a Calico pool, nested ServiceCIDRs (a keep-range inside the old range). " +
			"`conflict_free` fits `check` blocks and `precondition`s.",
		Attributes: map[string]schema.Attribute{
			"reserved": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Ranges that belong to something else, by name, e.g. `{ tailscale = \"100.64.0.0/10\" }`. Unset, nothing is reserved.",
				Validators:          mapOf(cidrValidator())},
			"extra": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "More ranges to check, by name, e.g. a planned pool or the VPC. Unset, only the cluster's own ranges and `reserved` are checked.",
				Validators:          mapOf(cidrValidator())},
			"ranges": named("Every range checked, by kind and name."),
			"conflicts": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Every overlapping pair and the prefix they share.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"a":       schema.SingleNestedAttribute{Computed: true, Attributes: rangeAttrs, MarkdownDescription: "One range."},
					"b":       schema.SingleNestedAttribute{Computed: true, Attributes: rangeAttrs, MarkdownDescription: "The other."},
					"overlap": schema.StringAttribute{Computed: true, MarkdownDescription: "The shared prefix (the narrower range)."},
				}}},
			"conflict_free": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether there is no conflict."},
		},
	}
}

func (d *networkOverlapsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *networkOverlapsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m networkOverlapsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	reserved, okReserved := namedCIDRs(ctx, preflight.RangeReserved, m.Reserved, &resp.Diagnostics)
	extra, okExtra := namedCIDRs(ctx, preflight.RangeExtra, m.Extra, &resp.Diagnostics)
	if !okReserved || !okExtra || resp.Diagnostics.HasError() {
		return // the validators said why
	}
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	ranges, err := preflight.GatherRanges(ctx, client)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", apiErrorText(err))
		return
	}
	ranges = append(append(ranges, extra...), reserved...)
	m.Ranges = []rangeItem{}
	for _, r := range ranges {
		m.Ranges = append(m.Ranges, item(r))
	}
	m.Conflicts = []conflictItem{}
	for _, c := range preflight.FindConflicts(ranges) {
		m.Conflicts = append(m.Conflicts, conflictItem{A: item(c.A), B: item(c.B), Overlap: types.StringValue(c.Overlap.String())})
	}
	m.ConflictFree = types.BoolValue(len(m.Conflicts) == 0)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type networkOverlapsModel struct {
	Reserved     types.Map      `tfsdk:"reserved"`
	Extra        types.Map      `tfsdk:"extra"`
	Ranges       []rangeItem    `tfsdk:"ranges"`
	Conflicts    []conflictItem `tfsdk:"conflicts"`
	ConflictFree types.Bool     `tfsdk:"conflict_free"`
}

func item(r preflight.NamedRange) rangeItem {
	return rangeItem{Kind: types.StringValue(r.Kind), Name: types.StringValue(r.Name), CIDR: types.StringValue(r.CIDR.String())}
}

type rangeItem struct {
	Kind types.String `tfsdk:"kind"`
	Name types.String `tfsdk:"name"`
	CIDR types.String `tfsdk:"cidr"`
}

type conflictItem struct {
	A       rangeItem    `tfsdk:"a"`
	B       rangeItem    `tfsdk:"b"`
	Overlap types.String `tfsdk:"overlap"`
}
