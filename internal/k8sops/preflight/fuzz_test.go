// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package preflight

import (
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

func FuzzFindConflicts(f *testing.F) {
	f.Add("10.0.0.0/8", "10.1.0.0/16", "100.64.0.0/13")
	f.Add("fd00::/8", "fd00:10::/108", "10.0.0.0/8")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var ranges []NamedRange
		for i, s := range []string{a, b, c} {
			if p, err := k8sops.ParseCIDR(s); err == nil {
				ranges = append(ranges, NamedRange{Kind: []string{RangeExtra, RangeServiceCIDR, RangeCalicoPool}[i], Name: s, CIDR: p})
			}
		}
		for _, cf := range FindConflicts(ranges) {
			if !cf.A.CIDR.Overlaps(cf.B.CIDR) || !cf.A.CIDR.Contains(cf.Overlap.Addr()) || !cf.B.CIDR.Contains(cf.Overlap.Addr()) {
				t.Fatalf("conflict %+v: the ranges do not share its overlap", cf)
			}
		}
	})
}
