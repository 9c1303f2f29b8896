// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The bridges of k8scidr_service_recreation: the DNS bridge's removal check, and the old-IP
// bridges' settings, planned `bridges` (from the moves and the prior state only), removal
// guard and refresh.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// bridgeType is one old-IP bridge, keyed by its namespace/name: a Service moved twice has two.
var bridgeType = types.ObjectType{AttrTypes: map[string]attr.Type{"service": types.StringType, "ips": ipListType, "created_at": types.StringType}}

func oldIPBridgeAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"old_ip_bridges": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(recreation.DefaultOldIPBridges),
			MarkdownDescription: "Which moved Services keep answering on their old ClusterIPs. `all` (the default): every moved " +
				"Service, each through an old-IP bridge, a ClusterIP Service on the IPs its move frees with its selector and " +
				"ports (no node ports), named `<name>-old-<hash>` beside it (a Service moved again gets another for the IPs " +
				"that move frees): the hand-over's own bridge, kept, or created right after the delete of a Service moved by " +
				"delete and create, serving at once; a selector-less Service's bridge gets a copy of its Endpoints, brought in " +
				"step by every apply that runs (a change to those Endpoints alone makes no plan: until an apply, the bridge " +
				"serves the copy). Clients that kept the old IP (resolved once at start, a DNS cache, a Service environment " +
				"variable) keep working until they restart. Each bridge counts against its namespace's Service quota (the plan " +
				"warns where there is no room, and a move without room for its bridge is not made); the bridges' IPs must stay " +
				"inside a ServiceCIDR that is Ready when they are made. `dns`: only the cluster DNS Service, by the DNS bridge " +
				"(`dns_bridge`); other clients that kept an old IP fail from `dns_ttl` after the move until they restart. " +
				"Setting `dns` once the pods started before the moves have restarted removes the bridges, refused while such " +
				"a pod still runs (see `old_ip_bridges_force_removal`). Default `all`.",
			Validators: []validator.String{stringvalidator.OneOf(recreation.BridgesDNS, recreation.BridgesAll)}},
		"old_ip_bridge_ttl": schema.StringAttribute{Optional: true,
			MarkdownDescription: "How long old-IP bridges stay, as a Go duration (e.g. `168h`): the first plan after a bridge " +
				"is this old (as of the plan's refresh) removes it, without the check of `old_ip_bridges_force_removal`; a " +
				"saved plan applied after a bridge's time ran out keeps it, as it showed. Unset, bridges stay until " +
				"`old_ip_bridges` is set to `dns`.",
			Validators: []validator.String{durationBetween(time.Second, 10*365*24*time.Hour)}},
		"old_ip_bridges_force_removal": schema.BoolAttribute{Optional: true,
			MarkdownDescription: "Remove old-IP bridges when `old_ip_bridges` is set to `dns` even though running pods may " +
				"still use an old IP. Without it the apply refuses, naming them, while a pod started before a bridged " +
				"Service moved still runs and resolves through the cluster DNS, or runs in the Service's namespace with " +
				"Service environment variables. Default `false`.",
		},
		"bridges": schema.MapAttribute{Computed: true, ElementType: bridgeType,
			MarkdownDescription: "The old-IP bridges of this resource, by their `namespace/name`: the `service` " +
				"(`namespace/name`) each stands in for, the `ips` (old IPs) it keeps, and `created_at` (RFC 3339; null for a " +
				"planned bridge whose move the apply did not make). The plan shows the bridges an apply creates " +
				"and removes; a refresh reads them from the cluster."},
	}
}

type bridgeModel struct {
	Service   string       `tfsdk:"service"`
	IPs       []string     `tfsdk:"ips"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func bridgesValue(in map[string]bridgeModel, diags *diag.Diagnostics) types.Map {
	out := make(map[string]attr.Value, len(in))
	for k, b := range in {
		out[k] = objectValue(bridgeType, map[string]attr.Value{"service": types.StringValue(b.Service), "ips": ipsValue(b.IPs, diags),
			"created_at": b.CreatedAt}, diags)
	}
	return mapValue(bridgeType, out, diags)
}

func bridgesFrom(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]bridgeModel {
	out := map[string]bridgeModel{}
	if !m.IsNull() && !m.IsUnknown() {
		diags.Append(m.ElementsAs(ctx, &out, false)...)
	}
	return out
}

func bridgesOf(list []recreation.OldIPBridge) map[string]bridgeModel {
	out := map[string]bridgeModel{}
	for _, b := range list {
		out[b.Key()] = bridgeModel{Service: b.For, IPs: b.IPs, CreatedAt: types.StringValue(b.Created.Format(time.RFC3339))}
	}
	return out
}

// ttl is old_ip_bridge_ttl, 0 when unset (validated at plan).
func (m *serviceRecreationModel) ttl() time.Duration {
	d, _ := time.ParseDuration(m.OldIPBridgeTTL.ValueString())
	return d
}

// bridgesCheckedKey is the private-state key of the time the last refresh took as now for
// old_ip_bridge_ttl. The plan, Terraform's final plan at apply and the apply judge bridges'
// lifetimes by it, never by the clock: a saved plan applied after a TTL ran out does what it
// showed (keeps the bridges) instead of failing as an inconsistent final plan, and the next
// refreshing plan removes them.
const bridgesCheckedKey = "bridges_checked_at"

// privateKeys is the private state of a request (ModifyPlan's, Update's); a nil one reads as
// empty.
type privateKeys interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

// bridgesCheckedAt is the time the last refresh recorded (bridgesCheckedKey); zero, which
// expires nothing, when none did (a state no refresh of this provider has read yet).
func bridgesCheckedAt(ctx context.Context, p privateKeys) time.Time {
	raw, _ := p.GetKey(ctx, bridgesCheckedKey)
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// bridgesChecked is the value of bridgesCheckedKey for a refresh now.
func bridgesChecked(now time.Time) []byte {
	b, _ := json.Marshal(now.UTC().Format(time.RFC3339Nano))
	return b
}

// expired reports whether a bridge created at createdAt has outlived ttl at now.
func expired(createdAt types.String, ttl time.Duration, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, createdAt.ValueString())
	return ttl > 0 && err == nil && !t.Add(ttl).After(now)
}

// planBridges plans `bridges` from the configuration and the prior state only: with "all", the
// bridges there are (as the refresh read them) but those past old_ip_bridge_ttl, and one for
// each planned move but the cluster DNS Service's; with "dns", none. What the prior state has
// and the plan not is what the apply removes.
func (m *serviceRecreationModel) planBridges(ctx context.Context, state *serviceRecreationModel, p recreation.PlannedRecreation, now time.Time, diags *diag.Diagnostics) {
	if m.OldIPBridges.IsUnknown() || m.OldIPBridgeTTL.IsUnknown() {
		m.Bridges = types.MapUnknown(bridgeType)
		return
	}
	want := map[string]bridgeModel{}
	if m.OldIPBridges.ValueString() == recreation.BridgesAll {
		if state != nil {
			for k, b := range bridgesFrom(ctx, state.Bridges, diags) {
				if !expired(b.CreatedAt, m.ttl(), now) && !takenOver(p.Moves, b) {
					want[k] = b
				}
			}
		}
		for _, mv := range p.Moves {
			ns, name, _ := strings.Cut(mv.Key, "/")
			moving := recreation.MovingIPs(mv.OldIPs, mv.NewIPs)
			key := ns + "/" + recreation.OldIPBridgeName(ns, name, moving)
			if _, ok := want[key]; ok || mv.Key == p.DNSService || len(moving) == 0 {
				continue
			}
			want[key] = bridgeModel{Service: mv.Key, IPs: moving, CreatedAt: types.StringUnknown()}
		}
	}
	m.Bridges = bridgesValue(want, diags)
}

// takenOver reports whether a move takes b's IPs back for the Service b stands in for (the way
// back, ip_assignment = "previous"): the move deletes b itself, unchecked, as it creates the
// Service on them.
func takenOver(moves []recreation.Move, b bridgeModel) bool {
	return slices.ContainsFunc(moves, func(mv recreation.Move) bool {
		return mv.Key == b.Service && slices.ContainsFunc(b.IPs, func(ip string) bool { return slices.Contains(mv.NewIPs, ip) })
	})
}

// bridgeRemovals are the bridges the prior state has and the plan not, namespace/name, split
// into those past old_ip_bridge_ttl and the rest (removed only after CheckOldIPBridgeRemoval).
// Bridges a planned move takes over are neither: the move deletes them.
func (m *serviceRecreationModel) bridgeRemovals(ctx context.Context, prior *serviceRecreationModel, moves []recreation.Move, now time.Time, diags *diag.Diagnostics) (expiredKeys []string, checked []recreation.OldIPBridge) {
	if prior == nil {
		return nil, nil
	}
	planned := bridgesFrom(ctx, m.Bridges, diags)
	had := bridgesFrom(ctx, prior.Bridges, diags)
	for _, key := range slices.Sorted(maps.Keys(had)) {
		b := had[key]
		if _, stays := planned[key]; stays || takenOver(moves, b) {
			continue
		}
		if expired(b.CreatedAt, prior.ttl(), now) || expired(b.CreatedAt, m.ttl(), now) {
			expiredKeys = append(expiredKeys, key)
			continue
		}
		_, name, _ := strings.Cut(key, "/")
		created, _ := time.Parse(time.RFC3339, b.CreatedAt.ValueString())
		checked = append(checked, recreation.OldIPBridge{Name: name, For: b.Service, IPs: b.IPs, Created: created})
	}
	return expiredKeys, checked
}

// checkBridgeRemoval reads whether deleting the DNS bridges, which dns_bridge = false asks for,
// would take DNS from running pods: refused at apply (errors), shown at plan (warnings).
func checkBridgeRemoval(ctx context.Context, client *k8sops.Client, snap recreation.Snapshot, plan *serviceRecreationModel, diags *diag.Diagnostics, apply bool) {
	if on := plan.values().DNSBridge; on.IsUnknown() || on.ValueBool() || plan.ForceRemoval.ValueBool() {
		return
	}
	dnsService := plan.values().DNSService.ValueString()
	bridges := snap.DNSBridges(dnsService)
	if len(bridges) == 0 {
		return
	}
	findings, notes, err := recreation.CheckBridgeRemoval(ctx, client, bridges, snap.ServiceIPs(dnsService))
	if err != nil {
		diags.AddAttributeError(path.Root("plan").AtName("dns_bridge"), "Cluster Not Readable", "Whether pods still use the DNS bridge could not be checked: "+apiErrorText(err))
		return
	}
	addFindings(diags, planFindings(findings), apply)
	for _, n := range notes {
		diags.AddAttributeWarning(path.Root("dns_bridge"), "DNS Bridge Removal Not Fully Checked", n)
	}
}

// checkOldIPBridgeRemoval reads whether removing the bridges that old_ip_bridges = "dns" asks
// for would cut off running pods: refused at apply (errors), shown at plan (warnings).
func checkOldIPBridgeRemoval(ctx context.Context, client *k8sops.Client, m *serviceRecreationModel, bridges []recreation.OldIPBridge, diags *diag.Diagnostics, apply bool) {
	if len(bridges) == 0 || m.OldIPForceRemoval.ValueBool() {
		return
	}
	findings, err := recreation.CheckOldIPBridgeRemoval(ctx, client, bridges)
	if err != nil {
		diags.AddAttributeError(path.Root("old_ip_bridges"), "Cluster Not Readable", "Whether pods still use the old-IP bridges could not be checked: "+apiErrorText(err))
		return
	}
	addFindings(diags, findings, apply)
}

// fillBridges sets `bridges` after an apply: as planned, with the creation times of the
// bridges made (null for a planned one whose move was not made).
func (m *serviceRecreationModel) fillBridges(ctx context.Context, res recreation.RecreationResult, diags *diag.Diagnostics) {
	planned := bridgesFrom(ctx, m.Bridges, diags)
	made := bridgesOf(res.OldIPBridgesCreated)
	for k, b := range planned {
		if !b.CreatedAt.IsUnknown() {
			continue
		}
		b.CreatedAt = types.StringNull()
		if got, ok := made[k]; ok {
			b.CreatedAt = got.CreatedAt
		}
		planned[k] = b
	}
	m.Bridges = bridgesValue(planned, diags)
}

// refreshBridges reads this resource's old-IP bridges from the cluster.
func (m *serviceRecreationModel) refreshBridges(ctx context.Context, client *k8sops.Client, diags *diag.Diagnostics) {
	list, err := recreation.ListOldIPBridges(ctx, client, m.journal().Group)
	if err != nil {
		diags.AddError("Cluster Not Readable", fmt.Sprintf("Reading the old-IP bridges: %s", apiErrorText(err)))
		return
	}
	m.Bridges = bridgesValue(bridgesOf(list), diags)
}
