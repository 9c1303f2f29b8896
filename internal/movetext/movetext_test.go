// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package movetext

import (
	"slices"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, m := range []Move{
		{OldIPs: []string{"100.64.0.10"}, NewIPs: []string{"172.24.0.10"}, Type: "ClusterIP", UID: "0f8e7a52-1b2c-4d3e-9f00-123456789abc"},
		{OldIPs: []string{"100.64.0.10", "fd00::a"}, NewIPs: []string{"172.24.0.10", "fd00::a"}, Type: "LoadBalancer", UID: "u"},
	} {
		s := m.String()
		got, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if !slices.Equal(got.OldIPs, m.OldIPs) || !slices.Equal(got.NewIPs, m.NewIPs) || got.Type != m.Type || got.UID != m.UID {
			t.Errorf("Parse(%q) = %+v, want %+v", s, got, m)
		}
	}
	if s := Pair([]string{"100.64.0.10", "fd00::a"}, []string{"172.24.0.10", "fd00::a"}); s != "100.64.0.10,fd00::a to 172.24.0.10,fd00::a" {
		t.Errorf("Pair() = %q", s)
	}
	if s := (Move{OldIPs: []string{"100.64.0.10"}, NewIPs: []string{"172.24.0.10"}, Type: "ClusterIP", UID: "u1"}).String(); s != "100.64.0.10 to 172.24.0.10 (ClusterIP, uid u1)" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "100.64.0.10 -> 172.24.0.10", "100.64.0.10 to 172.24.0.10", "100.64.0.10 to 172.24.0.10 (ClusterIP)",
		"100.64.0.10 to  (ClusterIP, uid u)", "100.64.0.10 to 172.24.0.10 (ClusterIP, uid u) extra"} {
		if m, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", s, m)
		}
	}
}
