// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Terraform values of a Service recreation plan, shared by k8scidr_service_moves (which
// computes them) and k8scidr_service_recreation (which takes them as configuration), and the
// values and warnings an apply of the resource reports back.
package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
)

var (
	ipListType = types.ListType{ElemType: types.StringType}
	// moveType is one planned move, as the data source reports it and the resource takes it:
	// movetext's one line per Service.
	moveType = types.StringType
	// restoreType is one journal entry to restore.
	restoreType = types.ObjectType{AttrTypes: map[string]attr.Type{"new_ips": ipListType, "journal": types.StringType}}
	// recreatedType is one Service an apply recreated: "old to new".
	recreatedType = types.StringType
)

// Descriptions shared by the data source's outputs and the resource's inputs.
const (
	movesDescription = "Services to move, by `namespace/name`, one line each: its `spec.clusterIPs` before and after " +
		"(comma-separated in family order; IPs already in the target stay), and the type and UID of the object planned " +
		"from, as in `\"100.64.0.10 to 172.24.0.10 (ClusterIP, uid 0f8e7a52-…)\"`."
	restoreDescription = "Services an interrupted apply left in the journal, by `namespace/name`: a missing one is " +
		"recreated first at `new_ips`; one that exists keeps its IPs (shown as `new_ips`) and gets back the Endpoints " +
		"and EndpointSlices its move took along. `journal` is the journal ConfigMap holding the entry."
	firstDescription = "Services (`namespace/name`) moved and verified before the rest, in this order: the cluster " +
		"DNS Service by default."
	dnsServiceDescription = "The cluster DNS Service (`namespace/name`); null when the cluster has none. Its move " +
		"brings the DNS bridge."
	dnsServiceInputDescription = "The cluster DNS Service (`namespace/name`). Unset, it is found as it is, not by name: the " +
		"kube-system Service whose ClusterIP the kubelets' `clusterDNS` names (kubeadm's `kube-system/kubelet-config`; a " +
		"link-local NodeLocal DNSCache address decides nothing), else `kube-system/kube-dns`, else the only kube-system " +
		"Service labelled `k8s-app=kube-dns` (e.g. `kube-system/coredns`). Several such Services and nothing to tell them " +
		"apart is a plan error asking for this attribute. It is moved first, and the DNS bridge keeps its old IP."
)

func ipsValue(ips []string, diags *diag.Diagnostics) types.List {
	return stringListValue(ips, diags)
}

func movesValue(moves []recreation.Move, diags *diag.Diagnostics) types.Map {
	out := make(map[string]attr.Value, len(moves))
	for _, m := range moves {
		out[m.Key] = types.StringValue(movetext.Move{OldIPs: m.OldIPs, NewIPs: m.NewIPs, Type: m.Type, UID: m.UID}.String())
	}
	return mapValue(moveType, out, diags)
}

func recreatedValue(moves []recreation.Move, diags *diag.Diagnostics) types.Map {
	out := make(map[string]attr.Value, len(moves))
	for _, m := range moves {
		out[m.Key] = types.StringValue(movetext.Pair(m.OldIPs, m.NewIPs))
	}
	return mapValue(recreatedType, out, diags)
}

func restoreValue(rs []recreation.Restore, diags *diag.Diagnostics) types.Map {
	out := make(map[string]attr.Value, len(rs))
	for _, r := range rs {
		out[r.Key] = objectValue(restoreType, map[string]attr.Value{"new_ips": ipsValue(r.NewIPs, diags), "journal": types.StringValue(r.Journal)}, diags)
	}
	return mapValue(restoreType, out, diags)
}

func objectValue(t types.ObjectType, v map[string]attr.Value, diags *diag.Diagnostics) types.Object {
	o, d := types.ObjectValue(t.AttrTypes, v)
	diags.Append(d...)
	return o
}

func mapValue(t attr.Type, v map[string]attr.Value, diags *diag.Diagnostics) types.Map {
	m, d := types.MapValue(t, v)
	diags.Append(d...)
	return m
}

type restoreModel struct {
	NewIPs  []string `tfsdk:"new_ips"`
	Journal string   `tfsdk:"journal"`
}

// movesFrom reads a known moves value (plan.moves), sorted by key; a line no data source
// writes is an error naming its key.
func movesFrom(ctx context.Context, m types.Map, diags *diag.Diagnostics) []recreation.Move {
	var in map[string]string
	diags.Append(m.ElementsAs(ctx, &in, false)...)
	out := make([]recreation.Move, 0, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v, err := movetext.Parse(in[k])
		if err != nil {
			at := path.Root("plan").AtName("moves").AtMapKey(k)
			diags.AddAttributeError(at, "Invalid Move", fmt.Sprintf("%s: %v. Give plan the k8scidr_service_moves data "+
				"source whole: plan = data.k8scidr_service_moves.NAME.", at, err))
			continue
		}
		out = append(out, recreation.Move{Key: k, UID: v.UID, Type: v.Type, OldIPs: v.OldIPs, NewIPs: v.NewIPs})
	}
	return out
}

// restoresFrom reads a known restore value (null is none), sorted by key.
func restoresFrom(ctx context.Context, m types.Map, diags *diag.Diagnostics) []recreation.Restore {
	var in map[string]restoreModel
	if !m.IsNull() {
		diags.Append(m.ElementsAs(ctx, &in, false)...)
	}
	out := make([]recreation.Restore, 0, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		out = append(out, recreation.Restore{Key: k, NewIPs: in[k].NewIPs, Journal: in[k].Journal})
	}
	return out
}

// fillApplied sets the computed values after an apply; what the plan knew stays as planned.
func (m *serviceRecreationModel) fillApplied(res recreation.RecreationResult, steps recreation.RecreationSteps, prior *serviceRecreationModel, diags *diag.Diagnostics) {
	now := types.StringValue(time.Now().UTC().Format(time.RFC3339))
	if m.Recreated.IsUnknown() {
		m.Recreated = recreatedValue(res.Recreated, diags)
	}
	if m.NotMoved.IsUnknown() {
		m.NotMoved = stringMapValue(steps.NotMoved, diags)
	}
	if m.CompletedAt.IsUnknown() {
		switch {
		case len(res.Recreated) > 0 || prior == nil:
			m.CompletedAt = now
		default:
			m.CompletedAt = prior.CompletedAt
		}
	}
	if m.Summary.IsUnknown() {
		m.Summary = types.StringNull()
		if res.Summary != "" {
			m.Summary = types.StringValue(res.Summary)
		}
	}
	if m.NextSteps.IsUnknown() {
		m.NextSteps = stringListValue(res.FollowUps(steps), diags)
	}
	if m.DNSServiceIPs.IsUnknown() {
		switch i := slices.IndexFunc(res.Recreated, func(mv recreation.Move) bool { return mv.Key == steps.DNSService }); {
		case i >= 0:
			m.DNSServiceIPs = ipsValue(res.Recreated[i].NewIPs, diags) // as it got them, planned or not
		case prior != nil:
			m.DNSServiceIPs = prior.DNSServiceIPs
		default:
			m.DNSServiceIPs = types.ListNull(types.StringType)
		}
	}
	if m.DNSMovedAt.IsUnknown() {
		switch {
		case !res.DNSMovedAt.IsZero():
			m.DNSMovedAt = types.StringValue(res.DNSMovedAt.Format(time.RFC3339))
		case prior != nil:
			m.DNSMovedAt = prior.DNSMovedAt
		default:
			m.DNSMovedAt = types.StringNull()
		}
	}
}

// addNotMoved warns about the planned moves that no longer hold.
func addNotMoved(diags *diag.Diagnostics, notMoved map[string]string) {
	if len(notMoved) == 0 {
		return
	}
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(notMoved)) {
		lines = append(lines, fmt.Sprintf("- %s: %s", k, notMoved[k]))
	}
	diags.AddWarning("Planned Moves That No Longer Hold Were Not Made",
		fmt.Sprintf("%d of the planned moves no longer hold in the cluster and were left alone (listed in not_moved):\n%s\n"+
			"The next plan shows what is still to move.", len(notMoved), strings.Join(lines, "\n")))
}

// recreationPlanType is k8scidr_service_recreation's plan: the attributes of the moves data
// source the apply acts on. Terraform converts the data source's whole object to it, dropping
// the rest.
var recreationPlanType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"target_cidrs": ipListType, "moves": types.MapType{ElemType: moveType}, "restore": types.MapType{ElemType: restoreType},
	"first_moves": ipListType, "dns_service": types.StringType, "dns_bridge": types.BoolType,
	"dns_bridge_off_reason": types.StringType, "journal_namespace": types.StringType, "journal_group": types.StringType,
}}

type recreationPlanModel struct {
	TargetCIDRs        types.List   `tfsdk:"target_cidrs"`
	Moves              types.Map    `tfsdk:"moves"`
	Restore            types.Map    `tfsdk:"restore"`
	FirstMoves         types.List   `tfsdk:"first_moves"`
	DNSService         types.String `tfsdk:"dns_service"`
	DNSBridge          types.Bool   `tfsdk:"dns_bridge"`
	DNSBridgeOffReason types.String `tfsdk:"dns_bridge_off_reason"`
	JournalNamespace   types.String `tfsdk:"journal_namespace"`
	JournalGroup       types.String `tfsdk:"journal_group"`
}

// values are the plan's attributes; each unknown while the plan is unknown or null.
func (m *serviceRecreationModel) values() recreationPlanModel {
	if m.Plan.IsNull() || m.Plan.IsUnknown() {
		str := types.StringUnknown()
		return recreationPlanModel{TargetCIDRs: types.ListUnknown(types.StringType), Moves: types.MapUnknown(moveType),
			Restore: types.MapUnknown(restoreType), FirstMoves: types.ListUnknown(types.StringType), DNSService: str,
			DNSBridge: types.BoolUnknown(), DNSBridgeOffReason: str, JournalNamespace: str, JournalGroup: str}
	}
	var v recreationPlanModel
	// Cannot fail: the schema gives the object exactly this type.
	_ = m.Plan.As(context.Background(), &v, basetypes.ObjectAsOptions{})
	return v
}

// converged is the plan with nothing left to do: what Read stores, and what the data source
// reads once every move is made.
func (v recreationPlanModel) converged(diags *diag.Diagnostics) types.Object {
	v.Moves, v.Restore, v.FirstMoves = movesValue(nil, diags), restoreValue(nil, diags), ipsValue(nil, diags)
	o, d := types.ObjectValueFrom(context.Background(), recreationPlanType.AttrTypes, v)
	diags.Append(d...)
	return o
}

// planFindings puts the findings about the plan's attributes under plan, as the resource's
// schema has them (k8sops names them as the data source does).
func planFindings(fs []k8sops.Finding) []k8sops.Finding {
	for i, f := range fs {
		if len(f.Path.Steps) == 0 || f.Path.Steps[0].Kind != k8sops.StepAttr {
			continue
		}
		name := f.Path.Steps[0].Name
		switch name {
		case "first":
			name = "first_moves"
		case "target_cidrs", "moves", "restore", "dns_service", "dns_bridge", "journal_namespace", "journal_group":
		default:
			continue
		}
		p := k8sops.At("plan").Attr(name)
		p.Steps = append(p.Steps, f.Path.Steps[1:]...)
		fs[i].Path = p
	}
	return fs
}

// checkPlanNames refuses names in a plan written by hand that no data source produces.
func checkPlanNames(v recreationPlanModel, diags *diag.Diagnostics) {
	check := func(name string, s types.String, why func(string) string) {
		if s.IsNull() || s.IsUnknown() {
			return
		}
		if reason := why(s.ValueString()); reason != "" {
			diags.AddAttributeError(path.Root("plan").AtName(name), "Invalid Plan", fmt.Sprintf("%s %s. Give plan the "+
				"k8scidr_service_moves data source whole: plan = data.k8scidr_service_moves.NAME.", name, reason))
		}
	}
	check("dns_service", v.DNSService, func(s string) string {
		if !namespacedNameRegexp.MatchString(s) {
			return fmt.Sprintf("%q is not namespace/name", s)
		}
		return ""
	})
	check("journal_namespace", v.JournalNamespace, namespaceName().check)
	check("journal_group", v.JournalGroup, func(s string) string {
		if len(s) > 63 || !labelValueRegexp.MatchString(s) {
			return fmt.Sprintf("%q is not a label value", s)
		}
		return ""
	})
}
