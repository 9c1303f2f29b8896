// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_pod_allocations: pods per range, pods outside by workload, and node
// podCIDRs against a cluster CIDR.
package provider

import (
	"context"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/workloadroll"
)

var _ datasource.DataSourceWithConfigure = (*podAllocationsDataSource)(nil)

type podAllocationsDataSource struct {
	data *providerData
}

func newPodAllocationsDataSource() datasource.DataSource { return &podAllocationsDataSource{} }

func (d *podAllocationsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pod_allocations"
}

func (d *podAllocationsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Where the pods' addresses are: pods per range, pods outside every range grouped by the workload " +
			"that owns them, and every node's `podCIDRs` with whether each lies inside `cluster_cidr` (kube-controller-manager " +
			"refuses to start when a node's podCIDR is outside a changed `--cluster-cidr`, the kubeadm failure of a pool move). " +
			"hostNetwork pods are not counted. Read with paginated lists of nodes, pods and ReplicaSets.",
		Attributes: map[string]schema.Attribute{
			"cidrs": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Ranges to count pods in, e.g. the old and the new pool. Unset, `ranges` is empty and every pod with an address counts under `outside`.",
				Validators:          []validator.List{noNulls(cidrRule)}},
			"cluster_cidr": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "The (new) `--cluster-cidr`, one range per family: each node podCIDR is checked against it. " +
					"Unset, no podCIDR is checked and `inside_cluster_cidr` is null.",
				Validators: []validator.List{noNulls(cidrRule)}},
			"ranges": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Pods per range of `cidrs`.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cidr": schema.StringAttribute{Computed: true, MarkdownDescription: "Range."},
					"pods": schema.Int64Attribute{Computed: true, MarkdownDescription: "Pods with an address in it."},
				}}},
			"outside": schema.MapAttribute{Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "Pods with an address outside every range of `cidrs`, by owner (`namespace/kind/name`; bare pods `namespace/pod/name`)."},
			"nodes": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Nodes, by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":      schema.StringAttribute{Computed: true, MarkdownDescription: "Node name."},
					"pod_cidrs": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "spec.podCIDRs."},
					"inside_cluster_cidr": schema.ListAttribute{Computed: true, ElementType: types.BoolType,
						MarkdownDescription: "Per podCIDR, whether it lies inside `cluster_cidr`; null without `cluster_cidr`."},
				}}},
		},
	}
}

func (d *podAllocationsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *podAllocationsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m podAllocationsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	parse := func(attr string, l types.List) []netip.Prefix {
		var out []netip.Prefix
		for i, s := range stringList(ctx, l, &resp.Diagnostics) {
			p, err := k8sops.ParseCIDR(s)
			if err != nil {
				resp.Diagnostics.AddAttributeError(path.Root(attr).AtListIndex(i), "Invalid CIDR", err.Error()+", e.g. 10.20.0.0/16.")
				continue
			}
			out = append(out, p)
		}
		return out
	}
	cidrs, cluster := parse("cidrs", m.CIDRs), parse("cluster_cidr", m.ClusterCIDR)
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	a, err := workloadroll.ListPodAllocations(ctx, client, cidrs, cluster)
	if err != nil {
		resp.Diagnostics.AddError("Pods Not Readable", apiErrorText(err))
		return
	}
	m.Ranges = []rangePodsItem{}
	for _, r := range a.Ranges {
		m.Ranges = append(m.Ranges, rangePodsItem{CIDR: types.StringValue(r.CIDR), Pods: types.Int64Value(int64(r.Pods))})
	}
	outside := map[string]int64{}
	for k, v := range a.Outside {
		outside[k] = int64(v)
	}
	m.Outside, diags = types.MapValueFrom(ctx, types.Int64Type, outside)
	resp.Diagnostics.Append(diags...)
	m.Nodes = []nodeItem{}
	for _, n := range a.Nodes {
		item := nodeItem{Name: types.StringValue(n.Name)}
		item.PodCIDRs, diags = types.ListValueFrom(ctx, types.StringType, n.PodCIDRs)
		resp.Diagnostics.Append(diags...)
		item.InsideClusterCIDR, diags = types.ListValueFrom(ctx, types.BoolType, n.Inside)
		resp.Diagnostics.Append(diags...)
		if len(cluster) == 0 {
			item.InsideClusterCIDR = types.ListNull(types.BoolType)
		}
		m.Nodes = append(m.Nodes, item)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type podAllocationsModel struct {
	CIDRs       types.List      `tfsdk:"cidrs"`
	ClusterCIDR types.List      `tfsdk:"cluster_cidr"`
	Ranges      []rangePodsItem `tfsdk:"ranges"`
	Outside     types.Map       `tfsdk:"outside"`
	Nodes       []nodeItem      `tfsdk:"nodes"`
}

type rangePodsItem struct {
	CIDR types.String `tfsdk:"cidr"`
	Pods types.Int64  `tfsdk:"pods"`
}

type nodeItem struct {
	Name              types.String `tfsdk:"name"`
	PodCIDRs          types.List   `tfsdk:"pod_cidrs"`
	InsideClusterCIDR types.List   `tfsdk:"inside_cluster_cidr"`
}
