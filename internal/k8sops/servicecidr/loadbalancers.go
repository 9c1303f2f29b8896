// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// LoadBalancer Services as the migration sees them: their ingress (what DNS records point at)
// and whether their ClusterIPs are still covered by a Ready ServiceCIDR.
package servicecidr

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// LoadBalancer is one Service of type LoadBalancer.
type LoadBalancer struct {
	Namespace, Name string
	// ClusterIPs with, for each, whether a Ready ServiceCIDR can hold it. False is the
	// write-up's ClusterIPOutOfRange: the repair loop reports it until a range covers it again.
	ClusterIPs            []string
	Covered               []bool
	IngressHostnames      []string
	IngressIPs            []string
	ExternalTrafficPolicy string
}

// Key is "namespace/name".
func (lb LoadBalancer) Key() string { return lb.Namespace + "/" + lb.Name }

// ListLoadBalancers reads every LoadBalancer Service (one paginated list of Services) and the
// ServiceCIDRs that cover their ClusterIPs, sorted by namespace and name.
func ListLoadBalancers(ctx context.Context, c *k8sops.Client) ([]LoadBalancer, error) {
	ranges, _, err := k8sops.ListServiceCIDRObjects(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []LoadBalancer
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Services("").List), func(svc *corev1.Service) error {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, loadBalancer(svc, ranges))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	slices.SortFunc(out, func(a, b LoadBalancer) int { return strings.Compare(a.Key(), b.Key()) })
	return out, nil
}

func loadBalancer(svc *corev1.Service, ranges []k8sops.ServiceCIDR) LoadBalancer {
	lb := LoadBalancer{Namespace: svc.Namespace, Name: svc.Name, ExternalTrafficPolicy: string(svc.Spec.ExternalTrafficPolicy),
		ClusterIPs: []string{}, Covered: []bool{}, IngressHostnames: []string{}, IngressIPs: []string{}}
	for _, ip := range k8sops.ClusterIPs(svc) {
		lb.ClusterIPs = append(lb.ClusterIPs, ip.String())
		lb.Covered = append(lb.Covered, k8sops.ReadyHolds(ranges, ip))
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.Hostname != "" {
			lb.IngressHostnames = append(lb.IngressHostnames, in.Hostname)
		}
		if _, err := netip.ParseAddr(in.IP); err == nil {
			lb.IngressIPs = append(lb.IngressIPs, in.IP)
		}
	}
	return lb
}
