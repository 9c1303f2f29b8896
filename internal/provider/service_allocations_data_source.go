// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_service_allocations: Service IPs against given ranges, and the ranges that keep staying IPs valid.
package provider

import (
	"context"
	"errors"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
)

var _ datasource.DataSourceWithConfigure = (*serviceAllocationsDataSource)(nil)

type serviceAllocationsDataSource struct {
	data *providerData
}

func newServiceAllocationsDataSource() datasource.DataSource { return &serviceAllocationsDataSource{} }

func (d *serviceAllocationsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_allocations"
}

func (d *serviceAllocationsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	strList := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Where every Service IP stands against the given ranges, and `covering_cidrs`: the ranges to " +
			"create (as `k8scidr_service_cidr`) so that the IPs that stay where they are (LoadBalancer Services, the DNS " +
			"bridge and old-IP bridges, `also_keep`) remain valid when the old range is retired. One list of Services and one of IPAddresses.",
		Attributes: map[string]schema.Attribute{
			"cidrs": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Ranges to report against, e.g. the new Service range. Default: every ServiceCIDR's ranges.",
				Validators:          listOf(cidrValidator()),
			},
			"also_keep": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Further Services (`namespace/name`) whose IPs stay where they are. Unset, only LoadBalancer " +
					"Services and the bridges stay. What a planned Service move keeps (the cluster DNS Service's old IP, for its " +
					"bridge) is in the `k8scidr_service_moves` data source's `keep_cidrs`.",
				Validators: listOf(stringvalidator.RegexMatches(namespacedNameRegexp, "must be namespace/name")),
			},
			"ranges": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: "Usage of each range, counted from IPAddress objects (from Services where the API has none).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cidr":     str("Range."),
					"capacity": schema.NumberAttribute{Computed: true, MarkdownDescription: "Allocatable addresses."},
					"used":     schema.Int64Attribute{Computed: true, MarkdownDescription: "Addresses allocated."},
					"free":     schema.NumberAttribute{Computed: true, MarkdownDescription: "capacity − used."},
				}},
			},
			"services": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: "Every Service with a ClusterIP (headless and ExternalName have none), by namespace/name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"namespace":   str("Namespace."),
					"name":        str("Name."),
					"type":        str("Service type."),
					"cluster_ips": strList("ClusterIPs."),
					"ranges":      strList("For each of `cluster_ips`, the given range holding it, or \"\" when none does."),
					"stays":       schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether its IPs stay where they are (LoadBalancer, `also_keep`, the bridges)."},
					"bridge_for": schema.StringAttribute{Computed: true, MarkdownDescription: "For a bridge (the DNS bridge, or an old-IP " +
						"bridge of `k8scidr_service_recreation`), the Service (`namespace/name`) whose old IPs it keeps; null for " +
						"an ordinary Service."},
				}},
			},
			"outside":        strList("Services (`namespace/name`) with an IP in none of the ranges."),
			"covering_cidrs": strList("Narrowest valid Service ranges in which the staying IPs outside the ranges are allocatable (an IP on a range's network or IPv4 broadcast address is not), grouped by /24 (IPv4) or /120 (IPv6)."),
		},
	}
}

func (d *serviceAllocationsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *serviceAllocationsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m serviceAllocationsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	a, err := servicecidr.ReadAllocations(ctx, client, stringList(ctx, m.CIDRs, &resp.Diagnostics), servicecidr.AllocationOptions{
		AlsoKeep: stringList(ctx, m.AlsoKeep, &resp.Diagnostics)})
	if f, ok := errors.AsType[k8sops.Finding](err); ok {
		addFindings(&resp.Diagnostics, []k8sops.Finding{f}, true)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Service Allocations Not Readable", apiErrorText(err))
		return
	}
	m.Ranges = make([]rangeUsageModel, 0, len(a.Ranges))
	for _, r := range a.Ranges {
		m.Ranges = append(m.Ranges, rangeUsageModel{
			CIDR: types.StringValue(r.Prefix.String()), Used: types.Int64Value(int64(r.Used)),
			Capacity: types.NumberValue(new(big.Float).SetInt(r.Capacity)), Free: types.NumberValue(new(big.Float).SetInt(r.Free())),
		})
	}
	m.Services = make([]serviceIPsModel, 0, len(a.Services))
	for _, s := range a.Services {
		ips, holders := make([]string, len(s.ClusterIPs)), make([]string, len(s.Ranges))
		for i, ip := range s.ClusterIPs {
			ips[i] = ip.String()
			if s.Ranges[i].IsValid() {
				holders[i] = s.Ranges[i].String()
			}
		}
		item := serviceIPsModel{Namespace: types.StringValue(s.Namespace), Name: types.StringValue(s.Name), Type: types.StringValue(s.Type),
			Stays: types.BoolValue(s.Stays), BridgeFor: types.StringNull()}
		if s.BridgeFor != "" {
			item.BridgeFor = types.StringValue(s.BridgeFor)
		}
		item.ClusterIPs, diags = types.ListValueFrom(ctx, types.StringType, ips)
		resp.Diagnostics.Append(diags...)
		item.Ranges, diags = types.ListValueFrom(ctx, types.StringType, holders)
		resp.Diagnostics.Append(diags...)
		m.Services = append(m.Services, item)
	}
	m.Outside, diags = types.ListValueFrom(ctx, types.StringType, nonNil(a.Outside))
	resp.Diagnostics.Append(diags...)
	covering := make([]string, 0, len(a.Covering))
	for _, p := range a.Covering {
		covering = append(covering, p.String())
	}
	m.Covering, diags = types.ListValueFrom(ctx, types.StringType, covering)
	resp.Diagnostics.Append(diags...)
	if len(covering) > 0 {
		resp.Diagnostics.AddWarning("Keep-Ranges Also Take New Allocations",
			"A Ready ServiceCIDR created from covering_cidrs keeps the staying IPs valid, but it is also a target for other "+
				"clients' dynamic ClusterIP allocations (on Kubernetes 1.34 the allocator picks among Ready ranges at random). "+
				"Set explicit IPs, or move Services with k8scidr_service_recreation, which always does.")
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type serviceAllocationsModel struct {
	CIDRs    types.List        `tfsdk:"cidrs"`
	AlsoKeep types.List        `tfsdk:"also_keep"`
	Ranges   []rangeUsageModel `tfsdk:"ranges"`
	Services []serviceIPsModel `tfsdk:"services"`
	Outside  types.List        `tfsdk:"outside"`
	Covering types.List        `tfsdk:"covering_cidrs"`
}

type rangeUsageModel struct {
	CIDR     types.String `tfsdk:"cidr"`
	Capacity types.Number `tfsdk:"capacity"`
	Used     types.Int64  `tfsdk:"used"`
	Free     types.Number `tfsdk:"free"`
}

type serviceIPsModel struct {
	Namespace  types.String `tfsdk:"namespace"`
	Name       types.String `tfsdk:"name"`
	Type       types.String `tfsdk:"type"`
	ClusterIPs types.List   `tfsdk:"cluster_ips"`
	Ranges     types.List   `tfsdk:"ranges"`
	Stays      types.Bool   `tfsdk:"stays"`
	BridgeFor  types.String `tfsdk:"bridge_for"`
}
