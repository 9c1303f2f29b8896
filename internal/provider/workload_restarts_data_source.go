// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_workload_restarts: the workloads whose pods must move, read at plan time
// so that the reviewed plan shows exactly what k8scidr_workload_roll restarts.
package provider

import (
	"context"
	"net/netip"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/workloadroll"
)

var (
	_ datasource.DataSourceWithConfigure      = (*workloadRestartsDataSource)(nil)
	_ datasource.DataSourceWithValidateConfig = (*workloadRestartsDataSource)(nil)
)

type workloadRestartsDataSource struct {
	data *providerData
}

func newWorkloadRestartsDataSource() datasource.DataSource { return &workloadRestartsDataSource{} }

func (d *workloadRestartsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_workload_restarts"
}

// Trigger attributes, the same on the data source and on k8scidr_workload_roll.
const (
	podCIDRsDescription = "Trigger: pods with an IP inside these ranges (the old pool). hostNetwork pods never match."
	startedBeforeDesc   = "Trigger: pods started before this RFC 3339 time, e.g. the cluster DNS Service's " +
		"`dns_moved_at`, so every pod gets the new DNS server. hostNetwork pods match only with `dnsPolicy: " +
		"ClusterFirstWithHostNet`, unless `include_host_network`."
	includeHostNetworkDesc = "Make `started_before` match hostNetwork pods whatever their `dnsPolicy` (static pods are " +
		"listed under `unmanaged`). Set it when `started_before` is the apiserver Service's move " +
		"(`k8scidr_cluster_info.apiserver_service_created_at`): hostNetwork pods resolve through the node, but got " +
		"`default/kubernetes`'s old IP in `KUBERNETES_SERVICE_HOST` like every pod. Default `false`: the DNS move's " +
		"restarts leave them alone."
)

func (d *workloadRestartsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Plans a roll: the Deployments, StatefulSets and DaemonSets with a pod that matches a trigger " +
			"(an IP in the old pool, or started before the DNS move), and what matches but cannot be rolled, with why. " +
			"Give `workloads` to `k8scidr_workload_roll`, which restarts exactly those. Read at plan time, its values are " +
			"stored in a saved plan; give it only variables, locals and other data sources, never a resource's attribute " +
			"or `depends_on` (Terraform would then read it only during apply, and the plan could not show the restarts).",
		Attributes: map[string]schema.Attribute{
			"namespaces": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Only these namespaces. Default: all.",
				Validators:          setOf(namespaceName())},
			"exclude_namespaces": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Never these namespaces. Unset, none is excluded.",
				Validators:          setOf(namespaceName())},
			"selector": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Label selector on the workloads' labels (a bare pod's own labels), e.g. `tier != system`. Unset, labels do not matter.",
				Validators:          []validator.String{labelSelectorValidator()}},
			"kinds": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Workload kinds rolled: `Deployment`, `StatefulSet`, `DaemonSet`. Default: all three.",
				Validators:          setOf(stringvalidator.OneOf(workloadroll.RollKinds...))},
			"pod_cidrs": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: podCIDRsDescription + " Unset, pod addresses are no trigger (set this or `started_before`).",
				Validators:          listOf(cidrValidator())},
			"started_before": schema.StringAttribute{Optional: true,
				MarkdownDescription: startedBeforeDesc + " Unset, start times are no trigger (set this or `pod_cidrs`).",
				Validators:          []validator.String{rfc3339Validator()}},
			"include_host_network": schema.BoolAttribute{Optional: true, MarkdownDescription: includeHostNetworkDesc},
			"evict_bare_pods": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "List matching bare pods in `workloads` (as `namespace/pod/name`), for the roll to evict " +
					"through the Eviction API, so PodDisruptionBudgets hold. Default `false`: they are listed under `unmanaged`."},
			"workloads": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The workloads to restart (`namespace/kind/name`; bare pods to evict `namespace/pod/name`), sorted."},
			"pods": schema.MapAttribute{Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "For information: each of `workloads` → its pods that match a trigger now."},
			"unmanaged": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "What matches but is not rolled, and why (bare pods, Job pods, OnDelete workloads, paused " +
					"Deployments, workloads another controller owns)."},
		},
	}
}

func (d *workloadRestartsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks what needs no cluster.
func (d *workloadRestartsDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var m workloadRestartsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.PodCIDRs.IsNull() && m.StartedBefore.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("pod_cidrs"), "No Trigger",
			"Set pod_cidrs (the old pool) or started_before (e.g. the DNS move's time): otherwise nothing matches.")
	}
}

func (d *workloadRestartsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m workloadRestartsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	client, diags := d.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	o := m.options(ctx, &resp.Diagnostics)
	snap, err := workloadroll.PlanRollSnapshot(ctx, client)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", apiErrorText(err))
		return
	}
	p := workloadroll.PlanRoll(snap, o)
	m.Workloads = ipsValue(p.Order, &resp.Diagnostics)
	m.Pods = pendingValue(p.Pending, &resp.Diagnostics)
	m.Unmanaged = stringMapValue(p.Unmanaged, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (m *workloadRestartsModel) options(ctx context.Context, diags *diag.Diagnostics) workloadroll.RollOptions {
	set := func(s types.Set) []string {
		var out []string
		diags.Append(s.ElementsAs(ctx, &out, false)...)
		return out
	}
	o := workloadroll.RollOptions{Namespaces: set(m.Namespaces), ExcludeNamespaces: set(m.ExcludeNamespaces), Kinds: set(m.Kinds),
		EvictBarePods: m.EvictBarePods.ValueBool(), Triggers: triggers(ctx, m.PodCIDRs, m.StartedBefore, m.IncludeHostNet, diags)}
	if !m.Selector.IsNull() {
		o.Selector, _ = labels.Parse(m.Selector.ValueString())
	}
	return o
}

// triggers reads pod_cidrs, started_before and include_host_network, validated already.
func triggers(ctx context.Context, podCIDRs types.List, startedBefore types.String, hostNetwork types.Bool, diags *diag.Diagnostics) workloadroll.Triggers {
	t := workloadroll.Triggers{HostNetwork: hostNetwork.ValueBool()}
	for _, c := range stringList(ctx, podCIDRs, diags) {
		if p, err := netip.ParsePrefix(c); err == nil {
			t.PodCIDRs = append(t.PodCIDRs, p)
		}
	}
	if !startedBefore.IsNull() {
		if at, err := time.Parse(time.RFC3339, startedBefore.ValueString()); err == nil {
			t.StartedBefore = &at
		}
	}
	return t
}

func pendingValue(p map[string]int, diags *diag.Diagnostics) types.Map {
	m := map[string]int64{}
	for k, v := range p {
		m[k] = int64(v)
	}
	v, d := types.MapValueFrom(context.Background(), types.Int64Type, m)
	diags.Append(d...)
	return v
}

type workloadRestartsModel struct {
	Namespaces        types.Set    `tfsdk:"namespaces"`
	ExcludeNamespaces types.Set    `tfsdk:"exclude_namespaces"`
	Selector          types.String `tfsdk:"selector"`
	Kinds             types.Set    `tfsdk:"kinds"`
	PodCIDRs          types.List   `tfsdk:"pod_cidrs"`
	StartedBefore     types.String `tfsdk:"started_before"`
	IncludeHostNet    types.Bool   `tfsdk:"include_host_network"`
	EvictBarePods     types.Bool   `tfsdk:"evict_bare_pods"`
	Workloads         types.List   `tfsdk:"workloads"`
	Pods              types.Map    `tfsdk:"pods"`
	Unmanaged         types.Map    `tfsdk:"unmanaged"`
}
