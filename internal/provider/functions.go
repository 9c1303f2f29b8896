// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Provider functions for plan-time CIDR math (Terraform 1.8+).
package provider

import (
	"context"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// cidrFunction is a function of string arguments computed by a k8sops helper.
type cidrFunction[T bool | string] struct {
	name, summary, description string
	params                     []function.Parameter
	ret                        function.Return
	run                        func(args []string) (T, error)
}

func (f *cidrFunction[T]) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = f.name
}

func (f *cidrFunction[T]) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{Summary: f.summary, MarkdownDescription: f.description, Parameters: f.params, Return: f.ret}
}

func (f *cidrFunction[T]) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	args := make([]string, len(f.params))
	targets := make([]any, len(args))
	for i := range args {
		targets[i] = &args[i]
	}
	if resp.Error = req.Arguments.Get(ctx, targets...); resp.Error != nil {
		return
	}
	out, err := f.run(args)
	if err != nil {
		resp.Error = funcError(err)
		return
	}
	resp.Error = resp.Result.Set(ctx, out)
}

// funcError points at the argument a k8sops CIDR error names, if it names one.
func funcError(err error) *function.FuncError {
	var f k8sops.Finding
	if errors.As(err, &f) {
		if arg, ok := f.Path.Argument(); ok {
			return function.NewArgumentFuncError(int64(arg), f.Detail)
		}
	}
	return function.NewFuncError(err.Error())
}

func str(name, desc string) function.Parameter {
	return function.StringParameter{Name: name, MarkdownDescription: desc}
}

func newCIDROverlapsFunction() function.Function {
	return &cidrFunction[bool]{
		name: "cidr_overlaps", summary: "Whether two CIDRs share any address",
		description: "Returns true when the two ranges share at least one address (false across IP families), e.g. " +
			"`provider::k8scidr::cidr_overlaps(\"100.64.0.0/13\", \"100.64.0.0/10\")` is true: kOps' Service range inside " +
			"Tailscale's CGNAT range. A CIDR with host bits set is an error.",
		params: []function.Parameter{str("a", "A CIDR."), str("b", "Another CIDR.")},
		ret:    function.BoolReturn{},
		run:    func(a []string) (bool, error) { return k8sops.CIDROverlaps(a[0], a[1]) },
	}
}

func newCIDRContainsFunction() function.Function {
	return &cidrFunction[bool]{
		name: "cidr_contains", summary: "Whether a CIDR contains an address or another CIDR",
		description: "Returns true when `ip_or_cidr` (an address, or a whole CIDR) lies inside `cidr`, e.g. " +
			"`provider::k8scidr::cidr_contains(\"172.24.0.0/15\", \"172.24.0.10\")`.",
		params: []function.Parameter{str("cidr", "The containing CIDR."), str("ip_or_cidr", "An IP address or a CIDR.")},
		ret:    function.BoolReturn{},
		run:    func(a []string) (bool, error) { return k8sops.CIDRContains(a[0], a[1]) },
	}
}

func newCIDRMapOffsetFunction() function.Function {
	return &cidrFunction[string]{
		name: "cidr_map_offset", summary: "Where preserve_offset moves an address",
		description: "Maps `ip` from `from_cidr` to the same offset in `to_cidr` (modulo its size), skipping the target's " +
			"network, IPv4 broadcast and first address, as `k8scidr_service_recreation` with `ip_assignment = " +
			"\"preserve_offset\"` does when nothing else is in the way. Use it for values outside the cluster that must " +
			"follow kube-dns, e.g. kOps' `kubeDNS.serverIP` or kubelet `clusterDNS`: " +
			"`provider::k8scidr::cidr_map_offset(\"100.64.0.10\", \"100.64.0.0/13\", \"172.24.0.0/15\")` is `172.24.0.10`. " +
			"(`dns_service_ips` of the data source `k8scidr_service_moves` gives the IP it actually takes.)",
		params: []function.Parameter{str("ip", "The address to map."), str("from_cidr", "The range it is in."), str("to_cidr", "The range it moves to.")},
		ret:    function.StringReturn{},
		run:    func(a []string) (string, error) { return k8sops.MapOffset(a[0], a[1], a[2]) },
	}
}
