// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_load_balancers: every LoadBalancer Service, its ingress and whether its
// ClusterIPs are still covered by a Ready ServiceCIDR.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
)

var _ datasource.DataSourceWithConfigure = (*loadBalancersDataSource)(nil)

type loadBalancersDataSource struct {
	data *providerData
}

func newLoadBalancersDataSource() datasource.DataSource { return &loadBalancersDataSource{} }

func (d *loadBalancersDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_load_balancers"
}

func (d *loadBalancersDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	strList := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every Service of type LoadBalancer, keyed `namespace/name`, with its ClusterIPs, the " +
			"ingress hostnames and IPs its load balancer reports (`status.loadBalancer`), its `externalTrafficPolicy`, " +
			"and whether each ClusterIP is covered by a Ready ServiceCIDR. An uncovered ClusterIP is the apiserver's " +
			"`ClusterIPOutOfRange`: keep a range for it (`k8scidr_service_allocations.covering_cidrs`) or recreate the " +
			"Service. Use `for_each` over `load_balancers` to keep DNS records pointing at the ingress when LoadBalancer " +
			"Services are recreated on purpose (`include_load_balancers`): a recreated Service gets a new load balancer.",
		Attributes: map[string]schema.Attribute{
			"load_balancers": schema.MapNestedAttribute{
				Computed:            true,
				MarkdownDescription: "LoadBalancer Services by `namespace/name`.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"namespace":   schema.StringAttribute{Computed: true, MarkdownDescription: "Namespace."},
					"name":        schema.StringAttribute{Computed: true, MarkdownDescription: "Service name."},
					"cluster_ips": strList("ClusterIPs, one per IP family."),
					"cluster_ips_covered": schema.ListAttribute{Computed: true, ElementType: types.BoolType,
						MarkdownDescription: "For each of `cluster_ips`, whether a Ready ServiceCIDR can hold it."},
					"covered":                 schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether every ClusterIP is covered."},
					"ingress_hostnames":       strList("Hostnames from `status.loadBalancer.ingress` (e.g. an AWS ELB's DNS name)."),
					"ingress_ips":             strList("IPs from `status.loadBalancer.ingress`."),
					"external_traffic_policy": schema.StringAttribute{Computed: true, MarkdownDescription: "`Cluster` or `Local`."},
				}},
			},
		},
	}
}

func (d *loadBalancersDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *loadBalancersDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	lbs, err := servicecidr.ListLoadBalancers(ctx, client)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", "Reading LoadBalancer Services failed: "+apiErrorText(err))
		return
	}
	m := loadBalancersModel{LoadBalancers: map[string]loadBalancerModel{}}
	for _, lb := range lbs {
		covered := true
		for _, c := range lb.Covered {
			covered = covered && c
		}
		e := loadBalancerModel{Namespace: types.StringValue(lb.Namespace), Name: types.StringValue(lb.Name),
			Covered: types.BoolValue(covered), ExternalTrafficPolicy: nullableString(lb.ExternalTrafficPolicy)}
		var dd [4]diag.Diagnostics
		e.ClusterIPs, dd[0] = types.ListValueFrom(ctx, types.StringType, lb.ClusterIPs)
		e.ClusterIPsCovered, dd[1] = types.ListValueFrom(ctx, types.BoolType, lb.Covered)
		e.IngressHostnames, dd[2] = types.ListValueFrom(ctx, types.StringType, lb.IngressHostnames)
		e.IngressIPs, dd[3] = types.ListValueFrom(ctx, types.StringType, lb.IngressIPs)
		for _, d := range dd {
			resp.Diagnostics.Append(d...)
		}
		m.LoadBalancers[lb.Key()] = e
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type loadBalancersModel struct {
	LoadBalancers map[string]loadBalancerModel `tfsdk:"load_balancers"`
}

type loadBalancerModel struct {
	Namespace             types.String `tfsdk:"namespace"`
	Name                  types.String `tfsdk:"name"`
	ClusterIPs            types.List   `tfsdk:"cluster_ips"`
	ClusterIPsCovered     types.List   `tfsdk:"cluster_ips_covered"`
	Covered               types.Bool   `tfsdk:"covered"`
	IngressHostnames      types.List   `tfsdk:"ingress_hostnames"`
	IngressIPs            types.List   `tfsdk:"ingress_ips"`
	ExternalTrafficPolicy types.String `tfsdk:"external_traffic_policy"`
}
