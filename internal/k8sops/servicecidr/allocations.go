// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Where Service IPs stand relative to given ranges, and which ranges keep the staying IPs valid.
package servicecidr

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Allocations is the report of k8scidr_service_allocations.
type Allocations struct {
	Ranges   []RangeUsage
	Services []ServiceIPs
	// Outside lists "namespace/name" of Services with an IP in none of the ranges.
	Outside []string
	// Covering are the narrowest valid Service ranges that keep the staying IPs outside the
	// ranges allocatable: LoadBalancer Services, the bridges', and the ones asked for.
	Covering []netip.Prefix
}

// RangeUsage is how full one range is.
type RangeUsage struct {
	Prefix   netip.Prefix
	Capacity *big.Int
	Used     int
}

// Free is Capacity − Used.
func (r RangeUsage) Free() *big.Int { return new(big.Int).Sub(r.Capacity, big.NewInt(int64(r.Used))) }

// ServiceIPs is one Service with a ClusterIP and the range holding each of its IPs.
type ServiceIPs struct {
	Namespace, Name, Type string
	ClusterIPs            []netip.Addr
	// Ranges[i] holds ClusterIPs[i]; the zero Prefix when no range does.
	Ranges []netip.Prefix
	Stays  bool // its IPs must stay valid where they are
	// BridgeFor is, for a bridge (the DNS bridge or an old-IP bridge), the Service it stands in
	// for (namespace/name); "" for an ordinary Service.
	BridgeFor string
}

// AllocationOptions say which IPs stay where they are besides LoadBalancer Services' and the
// bridges'. What a planned move keeps (the cluster DNS Service's old IP, for its bridge) is
// the moves data source's keep_cidrs (RecreationPlan.KeepCovering), where dns_bridge is set.
type AllocationOptions struct {
	// AlsoKeep are further Services ("namespace/name") whose IPs stay.
	AlsoKeep []string
}

// ReadAllocations lists Services (and IPAddresses where served) once each and reports them
// against ranges; with no ranges given, against every ServiceCIDR's ranges.
func ReadAllocations(ctx context.Context, c *k8sops.Client, ranges []string, o AllocationOptions) (Allocations, error) {
	caps, err := c.Capabilities()
	if err != nil {
		return Allocations{}, err
	}
	if len(ranges) == 0 && caps.ServiceCIDRVersion != "" {
		all, err := k8sops.ListServiceCIDRs(ctx, c)
		if err != nil {
			return Allocations{}, err
		}
		for _, sc := range all {
			ranges = append(ranges, sc.CIDRs...)
		}
	}
	var services []corev1.Service
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Services("").List), func(svc *corev1.Service) error {
		services = append(services, *svc)
		return nil
	})
	if err != nil {
		return Allocations{}, fmt.Errorf("listing Services: %w", err)
	}
	var used []netip.Addr
	if caps.ServiceCIDRVersion != "" {
		ips, err := k8sops.ListIPAddresses(ctx, c, caps)
		if err != nil {
			return Allocations{}, err
		}
		for _, ip := range ips {
			used = append(used, ip.IP)
		}
	}
	return PlanAllocations(k8sops.ParsePrefixes(dedupe(ranges)), services, used, o)
}

// PlanAllocations is the pure part of ReadAllocations. used holds the IPAddress objects'
// addresses; when nil (no IPAddress API), the Services' ClusterIPs are counted instead.
func PlanAllocations(ranges []netip.Prefix, services []corev1.Service, used []netip.Addr, o AllocationOptions) (Allocations, error) {
	keep := map[string]bool{}
	for _, k := range o.AlsoKeep {
		keep[k] = true
	}
	var a Allocations
	var staying []netip.Addr
	countServices := used == nil
	for _, svc := range services {
		s, ok := serviceIPs(svc, ranges)
		if !ok {
			continue
		}
		key := k8sops.SvcKey(&svc)
		s.BridgeFor = svc.Annotations[k8sops.BridgeForAnnotation]
		if !k8sops.IsBridge(&svc) {
			s.BridgeFor = ""
		}
		// A bridge stays until k8scidr_service_recreation removes it.
		s.Stays = svc.Spec.Type == corev1.ServiceTypeLoadBalancer || keep[key] || k8sops.IsBridge(&svc)
		delete(keep, key)
		outside := false
		for i, ip := range s.ClusterIPs {
			if s.Ranges[i].IsValid() {
				continue
			}
			outside = true
			// The apiserver's bridge has its own keep-range. Old-IP bridges get none: a keep-range
			// is a Ready range, where new Services would get IPs in the old range; their IPs hold
			// the retired old range, Terminating, until the bridges go.
			if s.Stays && svc.Labels[k8sops.APIServerBridgeLabel] == "" && svc.Labels[k8sops.OldIPBridgeLabel] != "true" {
				staying = append(staying, ip)
			}
		}
		if outside {
			a.Outside = append(a.Outside, key)
		}
		if countServices {
			used = append(used, s.ClusterIPs...)
		}
		a.Services = append(a.Services, s)
	}
	if len(keep) > 0 {
		return a, fmt.Errorf("also_keep names Services that do not exist or have no ClusterIP: %v", slices.Sorted(maps.Keys(keep)))
	}
	for _, r := range ranges {
		u := RangeUsage{Prefix: r, Capacity: k8sops.Capacity(r)}
		for _, ip := range used {
			if k8sops.Allocatable(r, ip) {
				u.Used++
			}
		}
		a.Ranges = append(a.Ranges, u)
	}
	var err error
	a.Covering, err = k8sops.CoveringSet(staying)
	slices.SortFunc(a.Services, func(x, y ServiceIPs) int { return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name) })
	slices.Sort(a.Outside)
	return a, err
}

// serviceIPs reads a Service's ClusterIPs; headless and ExternalName Services have none.
func serviceIPs(svc corev1.Service, ranges []netip.Prefix) (ServiceIPs, bool) {
	s := ServiceIPs{Namespace: svc.Namespace, Name: svc.Name, Type: string(svc.Spec.Type)}
	for _, ip := range k8sops.ClusterIPs(&svc) {
		s.ClusterIPs = append(s.ClusterIPs, ip)
		holder := netip.Prefix{}
		for _, r := range ranges {
			if k8sops.Allocatable(r, ip) {
				holder = r
				break
			}
		}
		s.Ranges = append(s.Ranges, holder)
	}
	return s, len(s.ClusterIPs) > 0
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
