// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The preflight checks each resource shows as plan warnings: those about its own stage, over
// the ranges its configuration names.
package preflight

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/workloadroll"
)

// Stage subsets of the checks.
var (
	// MovesChecks the moves data source answers itself: it leaves a Service whose clusterIP a
	// tool applies again out of the plan, and warns (recreation.RecreationPlan.Pinned).
	MovesChecks        = []string{CheckClusterIPPinned}
	ServiceStageChecks = []string{CheckDNSPinned, CheckWebhookFailClosed, CheckAdmissionPolicy}
	PoolCreateChecks   = []string{CheckPoolPlacement, CheckKubeProxyCIDR}
	PoolDisableChecks  = []string{CheckPodsPinnedToOldPool, CheckCNIIPAM}
	RollStageChecks    = []string{CheckPodsPinnedToOldPool, CheckDisruptionBudget, CheckRolloutStuck}
)

// RecreationHazards are the hazards of moving exactly the planned Services: their old IPs are
// the old Service range, the targets the new one.
func RecreationHazards(ctx context.Context, c *k8sops.Client, p recreation.PlannedRecreation) ([]PreflightFinding, error) {
	var r PreflightRanges
	for _, m := range p.Moves {
		for _, s := range m.OldIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				r.OldService = append(r.OldService, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	if len(r.OldService) == 0 {
		return nil, nil
	}
	r.NewService = k8sops.ParsePrefixes(p.TargetCIDRs)
	return Preflight(ctx, c, r, ServiceStageChecks)
}

// PoolHazards are the hazards of creating a pool (its CIDR is the new pod range) or of
// disabling one (its CIDR is the old pod range).
func PoolHazards(ctx context.Context, c *k8sops.Client, cidr netip.Prefix, disabling bool) ([]PreflightFinding, error) {
	if disabling {
		return Preflight(ctx, c, PreflightRanges{OldPod: []netip.Prefix{cidr}}, PoolDisableChecks)
	}
	return Preflight(ctx, c, PreflightRanges{NewPod: []netip.Prefix{cidr}}, PoolCreateChecks)
}

// RollHazards are the hazards of rolling the planned workloads out of pod_cidrs: pods pinned to
// those ranges, budgets over bare pods in them, and stuck Deployments among the workloads.
func RollHazards(ctx context.Context, c *k8sops.Client, p workloadroll.PlannedRoll) ([]PreflightFinding, error) {
	checks := []string{CheckRolloutStuck}
	if len(p.PodCIDRs) > 0 {
		checks = RollStageChecks
	}
	found, err := Preflight(ctx, c, PreflightRanges{OldPod: p.PodCIDRs}, checks)
	rolled := slices.Concat(p.Workloads, p.Include)
	return slices.DeleteFunc(found, func(f PreflightFinding) bool {
		return f.Check == CheckRolloutStuck &&
			!slices.Contains(rolled, f.Object.Namespace+"/"+strings.ToLower(f.Object.Kind)+"/"+f.Object.Name)
	}), err
}
