// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_service_cidrs: every ServiceCIDR with its state and usage.
package provider

import (
	"context"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var _ datasource.DataSourceWithConfigure = (*serviceCIDRsDataSource)(nil)

type serviceCIDRsDataSource struct {
	data *providerData
}

func newServiceCIDRsDataSource() datasource.DataSource { return &serviceCIDRsDataSource{} }

func (d *serviceCIDRsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_cidrs"
}

func (d *serviceCIDRsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every ServiceCIDR of the cluster, the apiserver's default `kubernetes` range included, with its " +
			"state and how many Service IPs it holds. Counted with one list of ServiceCIDRs and one of IPAddresses.",
		Attributes: map[string]schema.Attribute{
			"service_cidrs": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "ServiceCIDRs, by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":        schema.StringAttribute{Computed: true, MarkdownDescription: "Name."},
					"cidrs":       schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Ranges."},
					"api_version": schema.StringAttribute{Computed: true, MarkdownDescription: "API version it was read through."},
					"ready":       schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether it is Ready to allocate from."},
					"terminating": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether it is being deleted (held by its finalizer while IPs depend on it)."},
					"capacity":    schema.NumberAttribute{Computed: true, MarkdownDescription: "Allocatable addresses (network and IPv4 broadcast excluded)."},
					"allocated":   schema.Int64Attribute{Computed: true, MarkdownDescription: "IPAddress objects inside its ranges."},
				}},
			},
		},
	}
}

func (d *serviceCIDRsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *serviceCIDRsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	list, err := k8sops.ListServiceCIDRs(ctx, client)
	if err != nil {
		resp.Diagnostics.AddError("ServiceCIDRs Not Readable", apiErrorText(err))
		return
	}
	m := serviceCIDRsModel{ServiceCIDRs: make([]serviceCIDRItem, 0, len(list))}
	for _, sc := range list {
		cidrs, diags := types.ListValueFrom(ctx, types.StringType, sc.CIDRs)
		resp.Diagnostics.Append(diags...)
		m.ServiceCIDRs = append(m.ServiceCIDRs, serviceCIDRItem{
			Name:        types.StringValue(sc.Name),
			CIDRs:       cidrs,
			APIVersion:  types.StringValue(sc.APIVersion),
			Ready:       types.BoolValue(sc.Ready),
			Terminating: types.BoolValue(sc.Terminating),
			Capacity:    types.NumberValue(new(big.Float).SetInt(sc.Capacity)),
			Allocated:   types.Int64Value(int64(sc.Allocated)),
		})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type serviceCIDRsModel struct {
	ServiceCIDRs []serviceCIDRItem `tfsdk:"service_cidrs"`
}

type serviceCIDRItem struct {
	Name        types.String `tfsdk:"name"`
	CIDRs       types.List   `tfsdk:"cidrs"`
	APIVersion  types.String `tfsdk:"api_version"`
	Ready       types.Bool   `tfsdk:"ready"`
	Terminating types.Bool   `tfsdk:"terminating"`
	Capacity    types.Number `tfsdk:"capacity"`
	Allocated   types.Int64  `tfsdk:"allocated"`
}
