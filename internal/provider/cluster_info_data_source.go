// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Data source k8scidr_cluster_info: what the cluster runs and serves.
package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
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
			"kubernetes_minor": schema.Int64Attribute{Computed: true, MarkdownDescription: "The API server's Kubernetes minor version, e.g. `34`."},
			"apiserver_service_ranges": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "kube-apiserver's `--service-cluster-ip-range` values, from its mirror pods in `kube-system` (kubeadm and kOps " +
					"run it as a static pod); empty where no such pod shows (managed control planes)."},
			"service_cidrs": schema.MapAttribute{Computed: true, ElementType: types.ListType{ElemType: types.StringType},
				MarkdownDescription: "Every ServiceCIDR by name, with its CIDRs; empty where the ServiceCIDR API is not served."},
			"cluster_cidrs": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "kube-controller-manager's `--cluster-cidr` values (the range node podCIDRs come from), from its mirror pods; empty where none shows."},
			"calico_pools": schema.ListNestedAttribute{Computed: true,
				MarkdownDescription: "Calico's IP pools (the pod ranges where Calico's IPAM hands out addresses); empty without Calico.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":     schema.StringAttribute{Computed: true, MarkdownDescription: "The pool's name."},
					"cidr":     schema.StringAttribute{Computed: true, MarkdownDescription: "Its CIDR."},
					"disabled": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether new pods get no address from it."},
				}}},
			"cni": schema.StringAttribute{Computed: true, MarkdownDescription: "The network plugin found running, by its DaemonSet " +
				"(e.g. `Calico`, `Cilium`, `the AWS VPC CNI`); null when none this provider knows runs (kubenet, a CNI on the hosts). " +
				"The pod stage works only with Calico's IPAM."},
			"cni_daemonset": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name` of the DaemonSet that runs `cni`."},
			"ipam": schema.StringAttribute{Computed: true, MarkdownDescription: "Who hands out pod addresses, where Calico's CNI configuration " +
				"(`kube-system/calico-config`) or the Tigera operator's Installation says: `calico-ipam`, `host-local`, ...; null when neither shows."},
			"pod_range_steps": schema.StringAttribute{Computed: true, MarkdownDescription: "Where Calico's IPAM does not hand out " +
				"the pods' addresses (another CNI, kubenet, Calico on host-local IPAM): why the pod stage moves none, and how this " +
				"cluster's pod range moves instead, by its CNI's own steps; null where Calico's IPAM hands them out and the pod stage applies."},
			"kube_proxy_mode": schema.StringAttribute{Computed: true, MarkdownDescription: "kube-proxy's mode (`iptables`, `nftables`, `ipvs`) " +
				"from its flags or its `kube-system/kube-proxy` ConfigMap; null when neither sets it (kube-proxy then runs iptables on Linux)."},
			"kube_proxy_cluster_cidr": schema.StringAttribute{Computed: true, MarkdownDescription: "kube-proxy's clusterCIDR (traffic from " +
				"outside it is masqueraded), from the same places; null when not set or not visible."},
			"dns_service": schema.StringAttribute{Computed: true, MarkdownDescription: "The cluster DNS Service, `kube-system/kube-dns`; null when it does not exist."},
			"dns_service_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Its ClusterIPs: " +
				"what kubelet clusterDNS names before the move."},
			"coredns_ttl": schema.Int64Attribute{Computed: true, MarkdownDescription: "The TTL of CoreDNS's cluster answers: its kubernetes " +
				"plugin's `ttl` in the Corefile of `kube-system/coredns` (5 where unset; 30 in kubeadm's and kOps'); null when that Corefile is not there."},
			"coredns_cache_ttl": schema.Int64Attribute{Computed: true, MarkdownDescription: "How long CoreDNS's cache plugin keeps a cluster " +
				"answer at most (`cache 30`: 30); 0 when it does not cache them (kubeadm's Corefile since 1.32); null when the Corefile is not there."},
			"node_local_dns": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether NodeLocal DNSCache runs (DaemonSet `kube-system/node-local-dns`)."},
			"node_local_dns_cache_ttl": schema.Int64Attribute{Computed: true, MarkdownDescription: "How long NodeLocal DNSCache keeps a " +
				"cluster answer at most, from `kube-system/node-local-dns`'s Corefile; null when not there."},
			"service_cidr_gate": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether kube-controller-manager runs its ServiceCIDR " +
				"controller: always from 1.33; on 1.29–1.32 only with the `MultiCIDRServiceAllocator` feature gate, read from its mirror pods' " +
				"flags; null when they do not show."},
			"unread": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "What the credentials " +
				"could not read, so the facts from it are missing (grant the reads of the plan role)."},
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
	facts, err := preflight.ReadFacts(ctx, client)
	if err != nil {
		resp.Diagnostics.AddError("Cluster Not Readable", "Reading the cluster's ranges, CNI, kube-proxy and DNS failed: "+apiErrorText(err))
		return
	}
	m.setFacts(info, facts, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

var calicoPoolFactType = types.ObjectType{AttrTypes: map[string]attr.Type{"name": types.StringType, "cidr": types.StringType, "disabled": types.BoolType}}

// setFacts fills the model's facts: a fact not found is null (a list, empty).
func (m *clusterInfoModel) setFacts(info k8sops.ClusterInfo, f preflight.Facts, diags *diag.Diagnostics) {
	ctx := context.Background()
	m.KubernetesMinor = types.Int64Value(int64(info.ServerMinor))
	m.APIServerServiceRanges = stringListValue(f.APIServerServiceRanges, diags)
	scs := map[string][]string{}
	for _, sc := range f.ServiceCIDRs {
		scs[sc.Name] = nonNil(sc.CIDRs)
	}
	var d diag.Diagnostics
	m.ServiceCIDRs, d = types.MapValueFrom(ctx, types.ListType{ElemType: types.StringType}, scs)
	diags.Append(d...)
	m.ClusterCIDRs = stringListValue(f.ClusterCIDRs, diags)
	pools := make([]attr.Value, 0, len(f.Pools))
	for _, p := range f.Pools {
		v, d := types.ObjectValue(calicoPoolFactType.AttrTypes, map[string]attr.Value{"name": types.StringValue(p.Name),
			"cidr": types.StringValue(p.Settings.CIDR), "disabled": types.BoolValue(p.Settings.Disabled)})
		diags.Append(d...)
		pools = append(pools, v)
	}
	m.CalicoPools, d = types.ListValue(calicoPoolFactType, pools)
	diags.Append(d...)
	m.CNI, m.CNIDaemonSet = types.StringNull(), types.StringNull()
	if f.CNI != nil {
		m.CNI, m.CNIDaemonSet = types.StringValue(f.CNI.Name), types.StringValue(f.CNI.Namespace+"/"+f.CNI.DaemonSet)
	}
	m.IPAM = nullableString(f.IPAM)
	m.PodRangeSteps = nullableString(f.PodRangeSteps)
	m.KubeProxyMode, m.KubeProxyClusterCIDR = nullableString(f.KubeProxyMode), nullableString(f.KubeProxyClusterCIDR)
	m.DNSService, m.DNSServiceIPs = nullableString(f.DNSService), stringListValue(f.DNSServiceIPs, diags)
	m.CoreDNSTTL, m.CoreDNSCacheTTL = types.Int64Null(), types.Int64Null()
	if f.Corefile {
		m.CoreDNSTTL, m.CoreDNSCacheTTL = types.Int64Value(int64(f.CoreDNSTTL)), types.Int64Value(int64(f.CoreDNSCacheTTL))
	}
	m.NodeLocalDNS, m.NodeLocalCacheTTL = types.BoolValue(f.NodeLocalDNS), types.Int64Null()
	if f.NodeLocalCacheTTL > 0 {
		m.NodeLocalCacheTTL = types.Int64Value(int64(f.NodeLocalCacheTTL))
	}
	m.ServiceCIDRGate = types.BoolPointerValue(f.ServiceCIDRGate)
	m.Unread = stringListValue(f.Unread, diags)
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

	KubernetesMinor        types.Int64  `tfsdk:"kubernetes_minor"`
	APIServerServiceRanges types.List   `tfsdk:"apiserver_service_ranges"`
	ServiceCIDRs           types.Map    `tfsdk:"service_cidrs"`
	ClusterCIDRs           types.List   `tfsdk:"cluster_cidrs"`
	CalicoPools            types.List   `tfsdk:"calico_pools"`
	CNI                    types.String `tfsdk:"cni"`
	CNIDaemonSet           types.String `tfsdk:"cni_daemonset"`
	IPAM                   types.String `tfsdk:"ipam"`
	PodRangeSteps          types.String `tfsdk:"pod_range_steps"`
	KubeProxyMode          types.String `tfsdk:"kube_proxy_mode"`
	KubeProxyClusterCIDR   types.String `tfsdk:"kube_proxy_cluster_cidr"`
	DNSService             types.String `tfsdk:"dns_service"`
	DNSServiceIPs          types.List   `tfsdk:"dns_service_ips"`
	CoreDNSTTL             types.Int64  `tfsdk:"coredns_ttl"`
	CoreDNSCacheTTL        types.Int64  `tfsdk:"coredns_cache_ttl"`
	NodeLocalDNS           types.Bool   `tfsdk:"node_local_dns"`
	NodeLocalCacheTTL      types.Int64  `tfsdk:"node_local_dns_cache_ttl"`
	ServiceCIDRGate        types.Bool   `tfsdk:"service_cidr_gate"`
	Unread                 types.List   `tfsdk:"unread"`
}
