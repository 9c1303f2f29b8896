// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The cluster's ServiceCIDRs and IPAddresses as read through whichever API version it serves: every stage reads them.
package k8sops

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// ServiceCIDR is the provider's view of a ServiceCIDR object.
type ServiceCIDR struct {
	Name        string
	APIVersion  string
	CIDRs       []string
	Ready       bool
	Terminating bool
	Conditions  []Condition
	// Capacity is the number of allocatable addresses over all of CIDRs.
	Capacity *big.Int
	// Allocated counts IPAddress objects inside CIDRs; -1 when not counted.
	Allocated int
}

// Condition is one status condition.
type Condition struct {
	Type, Status, Reason, Message string
}

// IPAddressRef is an allocated Service IP and the object holding it.
type IPAddressRef struct {
	IP     netip.Addr
	Parent string // "namespace/name" of the Service, or "resource namespace/name" for others
}

// ServiceCIDRAPI returns the dynamic client for ServiceCIDRs in the served version.
func ServiceCIDRAPI(c *Client) (dynamic.ResourceInterface, Capabilities, error) {
	caps, err := c.Capabilities()
	if err != nil {
		return nil, caps, err
	}
	gvr, err := caps.ServiceCIDRResource()
	if err != nil {
		return nil, caps, err
	}
	return c.Dynamic.Resource(gvr), caps, nil
}

// GetServiceCIDR reads a ServiceCIDR and counts the IPAddresses inside it. A missing object
// gives an error for which apierrors.IsNotFound is true.
func GetServiceCIDR(ctx context.Context, c *Client, name string) (*ServiceCIDR, error) {
	api, caps, err := ServiceCIDRAPI(c)
	if err != nil {
		return nil, err
	}
	obj, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading ServiceCIDR %q: %w", name, err)
	}
	sc, err := ServiceCIDRFrom(obj)
	if err != nil {
		return nil, err
	}
	ips, err := IPAddressesIn(ctx, c, caps, sc.CIDRs)
	if err != nil {
		return nil, err
	}
	sc.Allocated = len(ips)
	return sc, nil
}

func ServiceCIDRFrom(obj *unstructured.Unstructured) (*ServiceCIDR, error) {
	cidrs, _, err := unstructured.NestedStringSlice(obj.Object, "spec", "cidrs")
	if err != nil {
		return nil, fmt.Errorf("reading spec.cidrs of ServiceCIDR %q: %w", obj.GetName(), err)
	}
	sc := &ServiceCIDR{
		Name: obj.GetName(), APIVersion: obj.GetAPIVersion(), CIDRs: cidrs,
		Terminating: obj.GetDeletionTimestamp() != nil, Capacity: new(big.Int), Allocated: -1,
	}
	for _, p := range ParsePrefixes(cidrs) {
		sc.Capacity.Add(sc.Capacity, Capacity(p))
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, raw := range conds {
		m, _ := raw.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		cond := Condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")}
		sc.Conditions = append(sc.Conditions, cond)
		if cond.Type == "Ready" && cond.Status == "True" {
			sc.Ready = true
		}
	}
	return sc, nil
}

// IPAddressesIn lists, in one paginated pass, the IPAddress objects allocatable inside any of
// cidrs, sorted by IP.
func IPAddressesIn(ctx context.Context, c *Client, caps Capabilities, cidrs []string) ([]IPAddressRef, error) {
	prefixes := ParsePrefixes(cidrs)
	if len(prefixes) == 0 {
		return nil, nil
	}
	all, err := ListIPAddresses(ctx, c, caps)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(ip IPAddressRef) bool { return !InAny(prefixes, ip.IP) }), nil
}

// ListIPAddresses lists every IPAddress object in one paginated pass, sorted by IP. The served
// version's typed client reads them as protobuf where client-go has one (v1, v1beta1): at 10,000
// Services that list's JSON decoding was the largest CPU cost between an apply's start and its
// first move. The alpha API of 1.29 and 1.30 is read through the dynamic client.
func ListIPAddresses(ctx context.Context, c *Client, caps Capabilities) ([]IPAddressRef, error) {
	var out []IPAddressRef
	add := func(name, resource, namespace, parent string) {
		if ip, err := netip.ParseAddr(name); err == nil {
			out = append(out, IPAddressRef{IP: ip, Parent: parentName(resource, namespace, parent)})
		}
	}
	var err error
	switch caps.ServiceCIDRVersion {
	case networkingv1.SchemeGroupVersion.String():
		err = EachItem(ctx, ListPages(c.Kube.NetworkingV1().IPAddresses().List), func(a *networkingv1.IPAddress) error {
			r := ptr.Deref(a.Spec.ParentRef, networkingv1.ParentReference{})
			add(a.Name, r.Resource, r.Namespace, r.Name)
			return nil
		})
	case networkingv1beta1.SchemeGroupVersion.String():
		err = EachItem(ctx, ListPages(c.Kube.NetworkingV1beta1().IPAddresses().List), func(a *networkingv1beta1.IPAddress) error {
			r := ptr.Deref(a.Spec.ParentRef, networkingv1beta1.ParentReference{})
			add(a.Name, r.Resource, r.Namespace, r.Name)
			return nil
		})
	default:
		var gv schema.GroupVersion
		if gv, err = schema.ParseGroupVersion(caps.ServiceCIDRVersion); err != nil {
			return nil, err
		}
		err = EachItem(ctx, ListPages(c.Dynamic.Resource(gv.WithResource("ipaddresses")).List), func(u *unstructured.Unstructured) error {
			ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "parentRef")
			add(u.GetName(), ref["resource"], ref["namespace"], ref["name"])
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("listing IPAddresses: %w", err)
	}
	slices.SortFunc(out, func(a, b IPAddressRef) int { return a.IP.Compare(b.IP) })
	return out, nil
}

// ListServiceCIDRs reads every ServiceCIDR and counts the IPAddresses inside each, with one
// list of each kind.
func ListServiceCIDRs(ctx context.Context, c *Client) ([]ServiceCIDR, error) {
	out, caps, err := ListServiceCIDRObjects(ctx, c)
	if err != nil {
		return nil, err
	}
	ips, err := ListIPAddresses(ctx, c, caps)
	if err != nil {
		return nil, err
	}
	for i := range out {
		prefixes := ParsePrefixes(out[i].CIDRs)
		out[i].Allocated = 0
		for _, ip := range ips {
			if InAny(prefixes, ip.IP) {
				out[i].Allocated++
			}
		}
	}
	slices.SortFunc(out, func(a, b ServiceCIDR) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ListServiceCIDRObjects reads every ServiceCIDR, without counting allocations.
func ListServiceCIDRObjects(ctx context.Context, c *Client) ([]ServiceCIDR, Capabilities, error) {
	api, caps, err := ServiceCIDRAPI(c)
	if err != nil {
		return nil, caps, err
	}
	var out []ServiceCIDR
	err = EachItem(ctx, ListPages(api.List), func(u *unstructured.Unstructured) error {
		sc, err := ServiceCIDRFrom(u)
		if err == nil {
			out = append(out, *sc)
		}
		return err
	})
	if err != nil {
		return nil, caps, fmt.Errorf("listing ServiceCIDRs: %w", err)
	}
	return out, caps, nil
}

// parentName is IPAddressRef.Parent of an IPAddress whose parentRef has these fields.
func parentName(resource, namespace, name string) string {
	if resource != "services" {
		return resource + " " + namespace + "/" + name
	}
	return namespace + "/" + name
}

// ReadyHolds reports whether a Ready ServiceCIDR can allocate ip.
func ReadyHolds(ranges []ServiceCIDR, ip netip.Addr) bool {
	for _, r := range ranges {
		if r.Ready && !r.Terminating && InAny(ParsePrefixes(r.CIDRs), ip) {
			return true
		}
	}
	return false
}
