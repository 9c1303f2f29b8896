// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_cluster_info: what the cluster runs and serves.
package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var _ datasource.DataSourceWithConfigure = (*clusterInfoDataSource)(nil)

type clusterInfoDataSource struct {
	data *providerData
}

func newClusterInfoDataSource() datasource.DataSource { return &clusterInfoDataSource{} }

func (d *clusterInfoDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_info"
}

func (d *clusterInfoDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "What the cluster runs and serves: the facts every migration stage depends on.",
		Attributes: map[string]schema.Attribute{
			"server_version": schema.StringAttribute{Computed: true, MarkdownDescription: "Kubernetes version of the API server, e.g. `v1.34.4`."},
			"service_cidr_api_version": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Served ServiceCIDR API (`networking.k8s.io/v1`, `v1beta1` or `v1alpha1`); null when none is served."},
			"calico_api_group": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Calico API group the provider uses (`projectcalico.org/v3` or `crd.projectcalico.org/v1`, per `calico_api_group`); null without Calico."},
			"cluster_id": schema.StringAttribute{Computed: true, MarkdownDescription: "The cluster's identity: the UID of its " +
				"`kube-system` namespace, stable for the cluster's life whatever address or credentials reach it. Put it in the " +
				"provider's `cluster_id` to make every operation refuse any other cluster."},
			"server":     schema.StringAttribute{Computed: true, MarkdownDescription: "The API server address the provider reached."},
			"node_count": schema.Int64Attribute{Computed: true, MarkdownDescription: "Number of nodes."},
			"default_service_cidrs": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "CIDRs of the apiserver's default `kubernetes` ServiceCIDR (from `--service-cluster-ip-range`); null when it does not exist."},
			"apiserver_service_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "ClusterIPs of `default/kubernetes`, the apiserver's own Service; null when it does not exist."},
			"apiserver_service_created_at": schema.StringAttribute{Computed: true,
				MarkdownDescription: "When `default/kubernetes` was created (RFC 3339): after `k8scidr_apiserver_service` moved it, " +
					"pods started before have its old IP in `KUBERNETES_SERVICE_HOST`. The `started_before` of the roll after that move."},
		},
	}
}

func (d *clusterInfoDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *clusterInfoDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	info, err := k8sops.ReadClusterInfo(ctx, client)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", "Reading what the cluster serves failed: "+apiErrorText(err))
		return
	}
	if info.CalicoWarning != "" {
		resp.Diagnostics.AddWarning("Calico API Group Not Served", info.CalicoWarning)
	}
	m := clusterInfoModel{
		ServerVersion:         types.StringValue(info.ServerVersion),
		ServiceCIDRAPIVersion: nullableString(info.ServiceCIDRVersion),
		CalicoAPIGroup:        nullableString(info.CalicoAPIGroup),
		NodeCount:             types.Int64Value(int64(info.NodeCount)),
		ClusterID:             types.StringValue(info.ID),
		Server:                types.StringValue(info.Server),
		DefaultServiceCIDRs:   types.ListNull(types.StringType),
		APIServerServiceIPs:   types.ListNull(types.StringType),
		APIServerServiceAt:    types.StringNull(),
	}
	if info.APIServerServiceIPs != nil {
		m.APIServerServiceIPs, diags = types.ListValueFrom(ctx, types.StringType, info.APIServerServiceIPs)
		resp.Diagnostics.Append(diags...)
		m.APIServerServiceAt = types.StringValue(info.APIServerServiceCreated.Format(time.RFC3339))
	}
	if info.DefaultServiceCIDRs != nil {
		m.DefaultServiceCIDRs, diags = types.ListValueFrom(ctx, types.StringType, info.DefaultServiceCIDRs)
		resp.Diagnostics.Append(diags...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type clusterInfoModel struct {
	ServerVersion         types.String `tfsdk:"server_version"`
	ServiceCIDRAPIVersion types.String `tfsdk:"service_cidr_api_version"`
	CalicoAPIGroup        types.String `tfsdk:"calico_api_group"`
	NodeCount             types.Int64  `tfsdk:"node_count"`
	ClusterID             types.String `tfsdk:"cluster_id"`
	Server                types.String `tfsdk:"server"`
	DefaultServiceCIDRs   types.List   `tfsdk:"default_service_cidrs"`
	APIServerServiceIPs   types.List   `tfsdk:"apiserver_service_ips"`
	APIServerServiceAt    types.String `tfsdk:"apiserver_service_created_at"`
}
