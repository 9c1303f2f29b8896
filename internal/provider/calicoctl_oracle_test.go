// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// calicoctlAgrees checks that the k8scidr_calico_ippools data source at addr reports, per pool
// and for the blocks in no pool, the same addresses in use, capacity and blocks as
// `calicoctl ipam show --show-blocks`.
func (e *calicoEnv) calicoctlAgrees(addr string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s not in state", addr)
		}
		attrs := rs.Primary.Attributes
		oracle, err := e.c.CalicoctlUsage(context.Background())
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(attrs["pools.#"])
		seen := map[string]bool{}
		for i := range n {
			at := func(k string) string { return attrs[fmt.Sprintf("pools.%d.%s", i, k)] }
			cidr := at("cidr")
			seen[cidr] = true
			want, ok := oracle[cidr]
			if !ok {
				return fmt.Errorf("pool %s (%s): calicoctl shows no such pool (it shows %v)", at("name"), cidr, slices.Sorted(maps.Keys(oracle)))
			}
			used, _ := strconv.Atoi(at("used"))
			blocks, _ := strconv.Atoi(at("blocks"))
			capacity, _ := strconv.ParseFloat(at("capacity"), 64)
			if used != want.InUse || blocks != len(want.Blocks) || fmt.Sprintf("%.5g", capacity) != fmt.Sprintf("%.5g", want.Capacity) {
				return fmt.Errorf("pool %s (%s): provider used=%d blocks=%d capacity=%s; calicoctl in use=%d blocks=%d (%v) total=%.5g",
					at("name"), cidr, used, blocks, at("capacity"), want.InUse, len(want.Blocks), want.Blocks, want.Capacity)
			}
		}
		m, _ := strconv.Atoi(attrs["orphaned_blocks.#"])
		orphans := map[string]int{}
		for i := range m {
			used, _ := strconv.Atoi(attrs[fmt.Sprintf("orphaned_blocks.%d.used", i)])
			orphans[attrs[fmt.Sprintf("orphaned_blocks.%d.cidr", i)]] = used
		}
		if want := oracle[""].Blocks; !maps.Equal(orphans, want) && len(orphans)+len(want) > 0 {
			return fmt.Errorf("orphaned blocks: provider %v, calicoctl %v", orphans, want)
		}
		for cidr := range oracle {
			if cidr != "" && !seen[cidr] {
				return fmt.Errorf("calicoctl shows pool %s, the provider does not", cidr)
			}
		}
		return nil
	}
}

// calicoctlClean checks that `calicoctl ipam check` finds no problem: no leaked or orphaned
// allocation, no handle without addresses, no address in use without an allocation.
func (e *calicoEnv) calicoctlClean() error {
	r, err := e.c.CalicoctlCheck(context.Background())
	if err != nil {
		return err
	}
	if r.Problems != 0 {
		return fmt.Errorf("calicoctl ipam check found %d problems:\n%s", r.Problems, r.Output)
	}
	return nil
}

// calicoctlLeaks returns the addresses in cidr that `calicoctl ipam check` finds allocated but
// not in use by any pod or node, and those it finds in use.
func (e *calicoEnv) calicoctlLeaks(cidr string) (leaked, inUse []string, err error) {
	r, err := e.c.CalicoctlCheck(context.Background())
	if err != nil {
		return nil, nil, err
	}
	pfx := netip.MustParsePrefix(cidr)
	for ip, allocs := range r.Allocations {
		if !pfx.Contains(netip.MustParseAddr(ip)) {
			continue
		}
		for _, a := range allocs {
			if a.InUse {
				inUse = append(inUse, ip)
			} else {
				leaked = append(leaked, ip)
			}
		}
	}
	slices.Sort(leaked)
	slices.Sort(inUse)
	return leaked, inUse, nil
}
