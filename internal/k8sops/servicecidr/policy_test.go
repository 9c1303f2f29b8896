// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestServiceCIDRPolicyObjects(t *testing.T) {
	p := ServiceCIDRPolicy{Name: "restrict", AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("172.24.0.0/15"), netip.MustParsePrefix("fd00:24::/108")}}
	policy, binding := p.objects()
	if got := policy.Spec.Variables[0].Expression; got != `["172.24.0.0/15", "fd00:24::/108"]` {
		t.Errorf("allowed variable = %s", got)
	}
	conds := policy.Spec.MatchConditions
	if len(conds) != 2 || conds[0].Expression != `request.userInfo.username != "system:apiserver"` ||
		!strings.Contains(conds[1].Expression, "object.spec.cidrs != oldObject.spec.cidrs") {
		t.Errorf("match conditions = %+v", conds)
	}
	if v := policy.Spec.Validations; len(v) != 2 || v[0].Expression != `object.metadata.name != "kubernetes"` ||
		!strings.Contains(v[1].Expression, "cidr(a).containsCIDR(c)") {
		t.Errorf("validations = %+v", v)
	}
	if binding.Spec.PolicyName != "restrict" || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != "Deny" {
		t.Errorf("binding = %+v", binding.Spec)
	}
	if !policySpecEqual(&policy.Spec, &policy.Spec) {
		t.Error("a spec differs from itself")
	}
	other, _ := ServiceCIDRPolicy{Name: "restrict", DenyNew: true}.objects()
	if policySpecEqual(&policy.Spec, &other.Spec) {
		t.Error("allowed and deny_new specs compare equal")
	}
}

func TestServiceCIDRPolicyVerdicts(t *testing.T) {
	allowed := &ServiceCIDRPolicy{AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("172.24.0.0/15")}}
	warn := &ServiceCIDRPolicy{AllowedCIDRs: allowed.AllowedCIDRs, Actions: []string{ActionWarn, ActionAudit}}
	audit := &ServiceCIDRPolicy{DenyNew: true, Actions: []string{ActionAudit}}
	denyNew := &ServiceCIDRPolicy{DenyNew: true}
	for _, c := range []struct {
		p    *ServiceCIDRPolicy
		cidr string
		want verdict
	}{
		{nil, "10.0.0.0/24", admitted},
		{allowed, "172.24.0.0/16", admitted},
		{allowed, "172.24.0.0/14", denied}, // wider than the allowed range
		{allowed, "10.0.0.0/24", denied},
		{warn, "10.0.0.0/24", warned},
		{audit, "10.0.0.0/24", admitted},
		{denyNew, "172.24.0.0/16", denied},
	} {
		if got := c.p.verdictOn(netip.MustParsePrefix(c.cidr)); got != c.want {
			t.Errorf("%+v on %s = %d, want %d", c.p, c.cidr, got, c.want)
		}
	}
	for _, c := range []struct {
		actions []string
		err     string
	}{
		{[]string{"Deny"}, ""}, {[]string{"Deny", "Audit"}, ""}, {[]string{"Warn", "Audit"}, ""},
		{[]string{"Deny", "Warn"}, "cannot be combined"}, {[]string{"Deny", "Deny"}, "twice"}, {[]string{"Block"}, "not one of"},
	} {
		err := ValidateValidationActions(c.actions)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("ValidateValidationActions(%v) = %v, want %q", c.actions, err, c.err)
		}
	}
}
