// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"net/netip"
	"slices"
	"testing"
)

// TestOutsideExpected: an address is judged only against the ranges of its own family.
func TestOutsideExpected(t *testing.T) {
	v4 := []netip.Prefix{netip.MustParsePrefix("172.16.0.0/13")}
	both := append(slices.Clone(v4), netip.MustParsePrefix("fd00:16::/64"))
	for _, c := range []struct {
		ips    []string
		expect []netip.Prefix
		want   []string
	}{
		{[]string{"172.16.3.4"}, v4, nil},
		{[]string{"100.96.0.5"}, v4, []string{"100.96.0.5"}},
		{[]string{"172.16.3.4", "fd00:96::5"}, v4, nil}, // IPv6 not judged: no IPv6 range expected
		{[]string{"172.16.3.4", "fd00:96::5"}, both, []string{"fd00:96::5"}},
		{[]string{"not-an-ip"}, v4, []string{"not-an-ip"}},
	} {
		if got := outsideExpected(c.ips, c.expect); !slices.Equal(got, c.want) {
			t.Errorf("outsideExpected(%v, %v) = %v, want %v", c.ips, c.expect, got, c.want)
		}
	}
}
