// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_calico_ippools: every Calico IPPool with its spec and IPAM usage, and the
// IPAM blocks no pool contains.
package provider

import (
	"context"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

var _ datasource.DataSourceWithConfigure = (*calicoIPPoolsDataSource)(nil)

type calicoIPPoolsDataSource struct {
	data *providerData
}

func newCalicoIPPoolsDataSource() datasource.DataSource { return &calicoIPPoolsDataSource{} }

func (d *calicoIPPoolsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_calico_ippools"
}

func (d *calicoIPPoolsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.Attribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	boolean := func(desc string) schema.Attribute {
		return schema.BoolAttribute{Computed: true, MarkdownDescription: desc}
	}
	count := func(desc string) schema.Attribute {
		return schema.Int64Attribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every Calico IPPool with its spec (Calico's defaults filled in) and IPAM usage, and the IPAM blocks " +
			"that lie in no pool. Read with one list of IPPools and one of IPAMBlocks; blocks marked deleted are ignored.",
		Attributes: map[string]schema.Attribute{
			"api_group": str("The API group/version the pools were read through."),
			"pools": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: "Pools, by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":               str("Name."),
					"cidr":               str("Range."),
					"block_size":         count("Block prefix length."),
					"ipip_mode":          str("IPIP mode."),
					"vxlan_mode":         str("VXLAN mode."),
					"nat_outgoing":       boolean("Outgoing NAT."),
					"disabled":           boolean("Whether new addresses are no longer assigned from it."),
					"disable_bgp_export": boolean("Whether its routes are not exported over BGP."),
					"node_selector":      str("Nodes that use it."),
					"allowed_uses": schema.ListAttribute{Computed: true, ElementType: types.StringType,
						MarkdownDescription: "Allowed uses; null where the installed CRD has no allowedUses."},
					"assignment_mode": str("Assignment mode; null where the installed CRD has no assignmentMode."),
					"capacity":        schema.NumberAttribute{Computed: true, MarkdownDescription: "Addresses in the pool."},
					"used":            count("Allocated addresses: over the blocks inside the pool, capacity minus unallocated."),
					"blocks":          count("IPAM blocks inside the pool."),
					"blocks_per_node": schema.MapAttribute{Computed: true, ElementType: types.Int64Type,
						MarkdownDescription: "Blocks by affine node (\"\" for blocks without affinity)."},
				}},
			},
			"orphaned_blocks": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: "IPAM blocks inside no pool (e.g. left by a pool deleted while addresses were allocated).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cidr": str("Block range."),
					"node": str("Affine node, or \"\"."),
					"used": count("Allocated addresses."),
				}},
			},
		},
	}
}

func (d *calicoIPPoolsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *calicoIPPoolsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	api := calicoAPI(ctx, client, &resp.Diagnostics)
	if api == nil {
		return
	}
	pools, err := api.ListIPPools(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Calico Not Readable", apiErrorText(err))
		return
	}
	blocks, err := api.ListBlocks(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Calico IPAM Not Readable", apiErrorText(err))
		return
	}
	m := calicoIPPoolsModel{APIGroup: types.StringValue(api.Group), Pools: []calicoPoolItem{}, OrphanedBlocks: []orphanedBlockItem{}}
	for _, p := range pools {
		s := p.Settings
		usage := calico.UsageOf(p.Prefix(), blocks)
		item := calicoPoolItem{
			Name: types.StringValue(p.Name), CIDR: types.StringValue(s.CIDR), BlockSize: types.Int64Value(int64(s.BlockSize)),
			IPIPMode: types.StringValue(s.IPIPMode), VXLANMode: types.StringValue(s.VXLANMode), NATOutgoing: types.BoolValue(s.NATOutgoing),
			Disabled: types.BoolValue(s.Disabled), DisableBGPExport: types.BoolValue(s.DisableBGPExport),
			NodeSelector: types.StringValue(s.NodeSelector), AllowedUses: types.ListNull(types.StringType), AssignmentMode: types.StringNull(),
			Capacity: types.NumberValue(new(big.Float).SetInt(usage.Capacity)),
			Used:     types.Int64Value(int64(usage.Used)), Blocks: types.Int64Value(int64(usage.Blocks)),
		}
		if s.AllowedUses != nil {
			item.AllowedUses, diags = types.ListValueFrom(ctx, types.StringType, s.AllowedUses)
			resp.Diagnostics.Append(diags...)
		}
		if s.AssignmentMode != "" {
			item.AssignmentMode = types.StringValue(s.AssignmentMode)
		}
		perNode := map[string]int64{}
		for node, n := range usage.BlocksByNode {
			perNode[node] = int64(n)
		}
		item.BlocksPerNode, diags = types.MapValueFrom(ctx, types.Int64Type, perNode)
		resp.Diagnostics.Append(diags...)
		m.Pools = append(m.Pools, item)
	}
	for _, b := range calico.OrphanedBlocks(pools, blocks) {
		m.OrphanedBlocks = append(m.OrphanedBlocks, orphanedBlockItem{
			CIDR: types.StringValue(b.CIDR.String()), Node: types.StringValue(b.Node), Used: types.Int64Value(int64(b.Used())),
		})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type calicoIPPoolsModel struct {
	APIGroup       types.String        `tfsdk:"api_group"`
	Pools          []calicoPoolItem    `tfsdk:"pools"`
	OrphanedBlocks []orphanedBlockItem `tfsdk:"orphaned_blocks"`
}

type calicoPoolItem struct {
	Name             types.String `tfsdk:"name"`
	CIDR             types.String `tfsdk:"cidr"`
	BlockSize        types.Int64  `tfsdk:"block_size"`
	IPIPMode         types.String `tfsdk:"ipip_mode"`
	VXLANMode        types.String `tfsdk:"vxlan_mode"`
	NATOutgoing      types.Bool   `tfsdk:"nat_outgoing"`
	Disabled         types.Bool   `tfsdk:"disabled"`
	DisableBGPExport types.Bool   `tfsdk:"disable_bgp_export"`
	NodeSelector     types.String `tfsdk:"node_selector"`
	AllowedUses      types.List   `tfsdk:"allowed_uses"`
	AssignmentMode   types.String `tfsdk:"assignment_mode"`
	Capacity         types.Number `tfsdk:"capacity"`
	Used             types.Int64  `tfsdk:"used"`
	Blocks           types.Int64  `tfsdk:"blocks"`
	BlocksPerNode    types.Map    `tfsdk:"blocks_per_node"`
}

type orphanedBlockItem struct {
	CIDR types.String `tfsdk:"cidr"`
	Node types.String `tfsdk:"node"`
	Used types.Int64  `tfsdk:"used"`
}
