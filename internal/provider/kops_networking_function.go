// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Function kops_networking: the kOps cluster-spec values for new Service and pod ranges.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var _ function.Function = (*kopsNetworkingFunction)(nil)

type kopsNetworkingFunction struct{}

func newKopsNetworkingFunction() function.Function { return &kopsNetworkingFunction{} }

var kopsStepType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"name": types.StringType, "when": types.StringType, "roll": types.StringType, "yaml": types.StringType,
}}

var kopsNetworkingType = map[string]attr.Type{
	"service_cluster_ip_range": types.StringType, "pod_cidr": types.StringType, "non_masquerade_cidr": types.StringType,
	"kube_dns_server_ip": types.StringType, "kubelet_cluster_dns": types.StringType, "additional_sans": types.ListType{ElemType: types.StringType},
	"allocate_node_cidrs": types.BoolType, "steps": types.ListType{ElemType: kopsStepType}, "yaml": types.StringType,
}

func (f *kopsNetworkingFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "kops_networking"
}

func (f *kopsNetworkingFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "The kOps cluster-spec changes for new Service and pod ranges, step by step",
		MarkdownDescription: "Returns what `kops edit cluster` must say, in the order kOps' own validation accepts " +
			"(kOps' `pkg/apis/kops/validation`). `steps` lists each change with `name`, `when` it belongs, " +
			"the `roll` it needs and its `yaml` (`kops.k8s.io/v1alpha2` field names): `gates` (only with `kubernetes_version` " +
			"1.29–1.32: the MultiCIDRServiceAllocator gate and the ServiceCIDR API for kube-apiserver and kube-controller-manager, " +
			"before stage 1), `service_range` (after the Services moved: `serviceClusterIPRange`, `kubeDNS.serverIP` and kubelet " +
			"`clusterDNS` together, since kOps accepts none of them alone, and the old `default/kubernetes` IP in `additionalSans` " +
			"while its bridge serves it) and `pod_range` (after the old pool is gone: `nonMasqueradeCIDR`, `podCIDR`, " +
			"kube-controller-manager's `clusterCIDR` and `allocateNodeCIDRs`). `yaml` is all of them in order, each under a comment. " +
			"The values are also returned one by one. It fails, naming the argument, where kOps or kube-apiserver would refuse the " +
			"result: the pod range outside `non_masquerade_cidr`, `non_masquerade_cidr` or the Service range overlapping the " +
			"cloud network, the DNS IP outside the Service range, ranges of mixed IP families or of a size the apiserver refuses. " +
			"For a kOps cluster on AWS leaving the default ranges, which overlap Tailscale's `100.64.0.0/10`, for `172.24.0.0/15` (Services) and `172.16.0.0/13` (pods): `provider::k8scidr::kops_networking(\"172.24.0.0/15\", \"172.16.0.0/13\", \"172.16.0.0/12\", " +
			"\"10.20.0.0/16\", data.k8scidr_service_moves.this.dns_service_ips[0], \"100.64.0.0/13\")`.",
		Parameters: []function.Parameter{
			function.StringParameter{Name: "service_cidr", MarkdownDescription: "The new Service range (`serviceClusterIPRange`)."},
			function.StringParameter{Name: "pod_cidr", MarkdownDescription: "The new pod range (the new Calico pool)."},
			function.StringParameter{Name: "non_masquerade_cidr", MarkdownDescription: "The new `nonMasqueradeCIDR`: it must hold the pod range."},
			function.StringParameter{Name: "network_cidr", AllowNullValue: true, MarkdownDescription: "The cloud network's `networkCIDR` " +
				"(kOps' AWS default is `172.20.0.0/16`, inside `172.16.0.0/12`), or `null` where the cloud has none (GCE, DigitalOcean, Hetzner, OpenStack)."},
			function.StringParameter{Name: "cluster_dns_ip", MarkdownDescription: "The cluster DNS Service's IP after the move " +
				"(`data.k8scidr_service_moves.<name>.dns_service_ips[0]`): `kubeDNS.serverIP`, never assumed to be the range's tenth address."},
			function.StringParameter{Name: "old_service_cidr", MarkdownDescription: "The range the apiserver served before: its first " +
				"address, the old `default/kubernetes` IP, stays in the apiserver certificate (`additionalSans`) while the bridge serves it."},
		},
		VariadicParameter: function.MapParameter{Name: "options", ElementType: types.StringType,
			MarkdownDescription: "Optional, at most one map: `node_local_dns_ip` (NodeLocal DNSCache's local IP, e.g. `169.254.20.10`: " +
				"kubelet `clusterDNS` keeps it), `kubernetes_version` (e.g. `data.k8scidr_cluster_info.this.server_version`; " +
				"1.29–1.32 adds the `gates` step), `calico_ipam` (default `true`; `false` when kube-controller-manager allocates node podCIDRs).",
			Validators: []function.MapParameterValidator{noNulls("must be a string: leave an option out rather than null")}},
		Return: function.ObjectReturn{AttributeTypes: kopsNetworkingType},
	}
}

func (f *kopsNetworkingFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var svc, pod, nm, dns, old string
	var network *string
	var opts []map[string]string
	if resp.Error = req.Arguments.Get(ctx, &svc, &pod, &nm, &network, &dns, &old, &opts); resp.Error != nil {
		return
	}
	in := k8sops.KopsInput{ServiceCIDR: svc, PodCIDR: pod, NonMasqueradeCIDR: nm, ClusterDNSIP: dns, OldServiceCIDR: old, CalicoIPAM: true}
	if network != nil {
		in.NetworkCIDR = *network
	}
	switch len(opts) {
	case 0:
	case 1:
		if err := in.ParseKopsOptions(opts[0]); err != nil {
			resp.Error = funcError(err)
			return
		}
	default:
		resp.Error = function.NewArgumentFuncError(6, "options is given more than once: pass one map")
		return
	}
	k, err := k8sops.NewKopsNetworking(in)
	if err != nil {
		resp.Error = funcError(err)
		return
	}
	steps := make([]attr.Value, 0, len(k.Steps))
	for _, s := range k.Steps {
		v, diags := types.ObjectValue(kopsStepType.AttrTypes, map[string]attr.Value{"name": types.StringValue(s.Name),
			"when": types.StringValue(s.When), "roll": types.StringValue(s.Roll), "yaml": types.StringValue(s.YAML)})
		if diags.HasError() {
			resp.Error = function.FuncErrorFromDiags(ctx, diags)
			return
		}
		steps = append(steps, v)
	}
	sans := make([]attr.Value, 0, len(k.AdditionalSANs))
	for _, s := range k.AdditionalSANs {
		sans = append(sans, types.StringValue(s))
	}
	obj, diags := types.ObjectValue(kopsNetworkingType, map[string]attr.Value{
		"service_cluster_ip_range": types.StringValue(k.ServiceClusterIPRange), "pod_cidr": types.StringValue(k.PodCIDR),
		"non_masquerade_cidr": types.StringValue(k.NonMasqueradeCIDR), "kube_dns_server_ip": types.StringValue(k.KubeDNSServerIP),
		"kubelet_cluster_dns": types.StringValue(k.KubeletClusterDNS), "additional_sans": types.ListValueMust(types.StringType, sans),
		"allocate_node_cidrs": types.BoolValue(k.AllocateNodeCIDRs), "steps": types.ListValueMust(kopsStepType, steps),
		"yaml": types.StringValue(k.YAML),
	})
	if diags.HasError() {
		resp.Error = function.FuncErrorFromDiags(ctx, diags)
		return
	}
	resp.Error = resp.Result.Set(ctx, obj)
}
