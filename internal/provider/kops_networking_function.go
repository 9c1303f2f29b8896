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

var kopsNetworkingType = map[string]attr.Type{
	"service_cluster_ip_range": types.StringType, "pod_cidr": types.StringType, "non_masquerade_cidr": types.StringType,
	"kube_dns_server_ip": types.StringType, "allocate_node_cidrs": types.BoolType, "yaml": types.StringType,
}

func (f *kopsNetworkingFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "kops_networking"
}

func (f *kopsNetworkingFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "The kOps cluster-spec values for new Service and pod ranges",
		MarkdownDescription: "Returns what `kops edit cluster` must say once Services and pods have moved: " +
			"`service_cluster_ip_range` (`serviceClusterIPRange`), `pod_cidr` (`podCIDR`), `non_masquerade_cidr` " +
			"(`nonMasqueradeCIDR`), `kube_dns_server_ip` (`kubeDNS.serverIP` and kubelet `clusterDNS`: the Service " +
			"range's tenth address), `allocate_node_cidrs` (`kubeControllerManager.allocateNodeCIDRs`: false when Calico " +
			"does IPAM, the default; pass `false` as a fourth argument otherwise), and `yaml`, the same as a " +
			"`kops.k8s.io/v1alpha2` fragment to paste. It fails, naming the argument, when the ranges do not fit " +
			"together as kOps requires: both inside `non_masquerade_cidr`, apart from each other, of one IP family, " +
			"the Service range between /12 and /28 (IPv6 /64 to /124) and the pod range at least a /24 (IPv6 /112). " +
			"For a kOps cluster moving off the default ranges: `provider::k8scidr::kops_networking(\"172.24.0.0/15\", \"172.16.0.0/13\", \"172.16.0.0/12\")`.",
		Parameters: []function.Parameter{
			function.StringParameter{Name: "service_cidr", MarkdownDescription: "The new Service range."},
			function.StringParameter{Name: "pod_cidr", MarkdownDescription: "The new pod range (the Calico pool)."},
			function.StringParameter{Name: "non_masquerade_cidr", MarkdownDescription: "The range that holds both: traffic inside it is not masqueraded."},
		},
		VariadicParameter: function.BoolParameter{Name: "calico_ipam",
			MarkdownDescription: "Optional: whether Calico does IPAM (default true), so kube-controller-manager must not allocate node podCIDRs."},
		Return: function.ObjectReturn{AttributeTypes: kopsNetworkingType},
	}
}

func (f *kopsNetworkingFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var svc, pod, nm string
	var calico []bool
	if resp.Error = req.Arguments.Get(ctx, &svc, &pod, &nm, &calico); resp.Error != nil {
		return
	}
	if len(calico) > 1 {
		resp.Error = function.NewArgumentFuncError(4, "calico_ipam is given more than once")
		return
	}
	k, err := k8sops.NewKopsNetworking(svc, pod, nm, len(calico) == 0 || calico[0])
	if err != nil {
		resp.Error = funcError(err)
		return
	}
	obj, diags := types.ObjectValue(kopsNetworkingType, map[string]attr.Value{
		"service_cluster_ip_range": types.StringValue(k.ServiceClusterIPRange), "pod_cidr": types.StringValue(k.PodCIDR),
		"non_masquerade_cidr": types.StringValue(k.NonMasqueradeCIDR), "kube_dns_server_ip": types.StringValue(k.KubeDNSServerIP),
		"allocate_node_cidrs": types.BoolValue(k.AllocateNodeCIDRs), "yaml": types.StringValue(k.YAML),
	})
	if diags.HasError() {
		resp.Error = function.FuncErrorFromDiags(ctx, diags)
		return
	}
	resp.Error = resp.Result.Set(ctx, obj)
}
