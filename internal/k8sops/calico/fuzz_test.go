// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package calico

import (
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

func FuzzValidateIPPool(f *testing.F) {
	f.Add("10.20.0.0/16", 26, "Always", "Never", "10.10.0.0/18")
	f.Add("fd00:20::/64", 122, "Never", "CrossSubnet", "fd00:10::/64")
	f.Add("10.20.0.1/16", 0, "always", "", "")
	f.Add("10.20.0.0/24", 22, "Never", "Never", "10.20.0.0/25")
	f.Fuzz(func(t *testing.T, cidr string, block int, ipip, vxlan, other string) {
		pool := IPPoolSpec{Name: "new", CIDR: cidr, BlockSize: block, IPIPMode: ipip, VXLANMode: vxlan}
		findings := ValidateIPPool(pool, []IPPoolSpec{{Name: "old", CIDR: other}})
		for _, fd := range findings {
			if fd.Summary == "" || fd.Detail == "" {
				t.Fatalf("ValidateIPPool(%+v): malformed finding %+v", pool, fd)
			}
		}
		if len(findings) > 0 {
			return
		}
		// Accepted: a masked prefix, a block size the family allows and the pool can hold, and
		// no overlap with the other pool.
		p, err := k8sops.ParseCIDR(cidr)
		if err != nil {
			t.Fatalf("ValidateIPPool accepted %q: %v", cidr, err)
		}
		size := block
		if size == 0 {
			size = DefaultBlockSize(cidr)
		}
		if size < p.Bits() || size > p.Addr().BitLen() {
			t.Fatalf("ValidateIPPool accepted %s with block size %d", p, size)
		}
		if o, err := k8sops.ParseCIDR(other); err == nil && o.Overlaps(p) {
			t.Fatalf("ValidateIPPool accepted %s overlapping %s", p, o)
		}
	})
}
