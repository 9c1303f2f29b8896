// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Conversions between framework values and the plain Go values k8sops takes and returns.
package provider

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
)

// stringList is the elements of a list of strings (nil for a null list).
func stringList(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

// nullableString maps "" (not present) to null.
func nullableString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// nonNil is s, or an empty list for nil: a computed list attribute is never null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// stringOr is v's value, or def when v is null.
func stringOr(v types.String, def string) string {
	if v.IsNull() {
		return def
	}
	return v.ValueString()
}

// stringListValue is l as a list attribute; nil is an empty list.
func stringListValue(l []string, diags *diag.Diagnostics) types.List {
	v, d := types.ListValueFrom(context.Background(), types.StringType, nonNil(l))
	diags.Append(d...)
	return v
}

// stringMapValue is m as a map attribute; nil is an empty map.
func stringMapValue(m map[string]string, diags *diag.Diagnostics) types.Map {
	if m == nil {
		m = map[string]string{}
	}
	v, d := types.MapValueFrom(context.Background(), types.StringType, m)
	diags.Append(d...)
	return v
}

// complete reports whether v is ready to convert to Go values and check: known all the way, and
// holding no null element (the attribute's noNulls validator reports one).
func complete(v attr.Value) bool {
	tv, err := v.ToTerraformValue(context.Background())
	return err == nil && tv.IsFullyKnown() && len(nullElements(path.Empty(), v)) == 0
}

// valueStrings is the values of a list of known strings.
func valueStrings(vs []types.String) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ValueString()
	}
	return out
}

// cidrList parses a list of CIDRs. Entries that do not parse are left out: the attribute's
// cidrValidator reports them. ok is false when any was left out or the list is not known yet.
func cidrList(ctx context.Context, l types.List, diags *diag.Diagnostics) (out []netip.Prefix, ok bool) {
	if !complete(l) {
		return nil, false
	}
	ok = true
	for _, s := range stringList(ctx, l, diags) {
		p, err := k8sops.ParseCIDR(s)
		if err != nil {
			ok = false
			continue
		}
		out = append(out, p)
	}
	return out, ok
}

// namedCIDRs parses a map of CIDRs by name into ranges of one kind, sorted by name, as cidrList does.
func namedCIDRs(ctx context.Context, kind string, m types.Map, diags *diag.Diagnostics) (out []preflight.NamedRange, ok bool) {
	if !complete(m) {
		return nil, false
	}
	var raw map[string]string
	diags.Append(m.ElementsAs(ctx, &raw, false)...)
	ok = true
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		p, err := k8sops.ParseCIDR(raw[name])
		if err != nil {
			ok = false
			continue
		}
		out = append(out, preflight.NamedRange{Kind: kind, Name: name, CIDR: p})
	}
	return out, ok
}
