// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Reading the cluster once for a Service recreation plan: one paginated list per kind, side by side.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// ErrNoServiceCIDRAPI means the cluster cannot hold a second Service range.
var ErrNoServiceCIDRAPI = errors.New("the cluster serves no ServiceCIDR API, so Services cannot move to another range: " +
	k8sops.ServiceCIDRVersions)

// endpointsGetMax is how many selector-less Services' Endpoints readEndpoints reads one by one;
// past it one paged list of all Endpoints is cheaper.
const endpointsGetMax = 20

// TakeSnapshot reads what PlanRecreation needs. Services are kept without managedFields, or for
// an apply (forApply) with only what their owners keep after a move (formerOwners). The
// EndpointSlices ExecuteRecreation journals and paces by come from its own watch, not from here.
// The reads are independent and run side by side: at 10,000 Services each list is tens of
// pages, and in series they were most of the time before an apply's first move.
func TakeSnapshot(ctx context.Context, c *k8sops.Client, journal Journal, forApply bool) (Snapshot, error) {
	var snap Snapshot
	if caps, err := c.Capabilities(); err != nil {
		return snap, err
	} else if caps.ServiceCIDRVersion == "" {
		return snap, ErrNoServiceCIDRAPI
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		ranges, caps, err := k8sops.ListServiceCIDRObjects(gctx, c)
		if err != nil {
			return err
		}
		snap.Ranges = ranges
		ips, err := k8sops.ListIPAddresses(gctx, c, caps)
		if err != nil {
			return err
		}
		for _, ip := range ips {
			snap.Held = append(snap.Held, ip.IP)
		}
		return nil
	})
	g.Go(func() error {
		err := k8sops.EachItem(gctx, k8sops.ListPages(c.Kube.CoreV1().Services("").List), func(svc *corev1.Service) error {
			if forApply {
				svc.ManagedFields = formerOwners(svc.ManagedFields)
			} else {
				if pinners := k8sops.ClusterIPPinners(svc, c.FieldManager); len(pinners) > 0 {
					if snap.Pinners == nil {
						snap.Pinners = map[string][]string{}
					}
					snap.Pinners[k8sops.SvcKey(svc)] = pinners
				}
				svc.ManagedFields = nil // what the plan needs of them is in Pinners
			}
			snap.Services = append(snap.Services, *svc)
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing Services: %w", err)
		}
		return nil
	})
	// Every Endpoints, beside the Services: which are hand-made is known only once the Services
	// are, and a list after them was a second wait as long as theirs.
	var endpoints corev1.EndpointsList
	g.Go(func() error {
		api := c.Kube.CoreV1().Endpoints("")
		err := k8sops.EachItem(gctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := api.List(ctx, o)
			if err == nil {
				endpoints.ResourceVersion = l.ResourceVersion // every page's: the list's
			}
			return l, err
		}, func(ep *corev1.Endpoints) error {
			endpoints.Items = append(endpoints.Items, *ep)
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing Endpoints: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) {
		snap.Journal, err = ReadJournal(gctx, c, journal)
		return err
	})
	g.Go(func() error {
		snap.Namespaces = map[string]corev1.NamespacePhase{}
		err := k8sops.EachItem(gctx, k8sops.ListPages(c.Kube.CoreV1().Namespaces().List), func(ns *corev1.Namespace) error {
			snap.Namespaces[ns.Name] = ns.Status.Phase
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing namespaces: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) {
		_, err = c.Kube.AppsV1().DaemonSets("kube-system").Get(gctx, "node-local-dns", metav1.GetOptions{})
		snap.NodeLocalDNS = err == nil
		snap.KubeletClusterDNS, snap.KubeletConfigUnread, err = ReadKubeletClusterDNS(gctx, c)
		return err
	})
	if err := g.Wait(); err != nil {
		return snap, err
	}
	snap.keepEndpoints(&endpoints, forApply)
	return snap, nil
}

// keepEndpoints keeps of a list of every Endpoints the hand-made ones, those of Services without
// a selector (Endpoints); for an apply, also the list for the run's Endpoints watch to start from
// (endpointsSeed), with the endpoints controller's own kept as their name alone, as that watch
// keeps them.
func (s *Snapshot) keepEndpoints(list *corev1.EndpointsList, forApply bool) {
	selector := map[string]bool{}
	s.Endpoints = map[string]corev1.Endpoints{}
	for i := range s.Services {
		svc := &s.Services[i]
		switch key := k8sops.SvcKey(svc); {
		case len(svc.Spec.Selector) > 0:
			selector[key] = true
		case svc.Spec.Type != corev1.ServiceTypeExternalName:
			s.Endpoints[key] = corev1.Endpoints{} // marked; kept below if it exists
		}
	}
	for i := range list.Items {
		ep := &list.Items[i]
		key := ep.Namespace + "/" + ep.Name
		if _, ok := s.Endpoints[key]; ok {
			s.Endpoints[key] = *ep
		}
		if selector[key] {
			list.Items[i] = strippedEndpoints(ep)
		}
	}
	maps.DeleteFunc(s.Endpoints, func(_ string, ep corev1.Endpoints) bool { return ep.Name == "" })
	if forApply {
		s.endpointsSeed = list
	}
}

// TakeBridgeSnapshot reads what RecreationPreflight checks, and no more: the ServiceCIDRs, the
// DNS Service (when it exists) and the DNS bridges; journal is the journal as the caller read
// it (ReadJournal).
func TakeBridgeSnapshot(ctx context.Context, c *k8sops.Client, dnsService, bridgeName string, journal []JournalEntry) (Snapshot, error) {
	snap := Snapshot{Journal: journal}
	ranges, _, err := k8sops.ListServiceCIDRObjects(ctx, c)
	if err != nil {
		return snap, err
	}
	snap.Ranges = ranges
	if snap.Services, err = getServices(ctx, c, dnsService, "kube-system/"+bridgeName); err != nil {
		return snap, err
	}
	// Every migration's bridge, and a Service squatting on the bridge name (got above).
	return snap, addDNSBridges(ctx, c, &snap)
}

// addDNSBridges adds the DNS bridges to the snapshot's Services, those it lacks.
func addDNSBridges(ctx context.Context, c *k8sops.Client, snap *Snapshot) error {
	bridges, err := c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{LabelSelector: k8sops.DNSBridgeLabel + "=true"})
	if err != nil {
		return fmt.Errorf("listing DNS bridges: %w", err)
	}
	for _, b := range bridges.Items {
		if snap.service(k8sops.SvcKey(&b)) == nil {
			snap.Services = append(snap.Services, b)
		}
	}
	return nil
}

// getServices reads the Services of keys (namespace/name) one by one, leaving out those that
// do not exist and keys without a namespace.
func getServices(ctx context.Context, c *k8sops.Client, keys ...string) ([]corev1.Service, error) {
	var out []corev1.Service
	for _, key := range keys {
		ns, name, ok := strings.Cut(key, "/")
		if !ok {
			continue
		}
		svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return out, fmt.Errorf("reading Service %s: %w", key, err)
		default:
			out = append(out, *svc)
		}
	}
	return out, nil
}

// readEndpoints reads the hand-made Endpoints, which exist only for selector-less Services:
// just those, one by one when they are few, else in one paged list.
func readEndpoints(ctx context.Context, c *k8sops.Client, snap *Snapshot) error {
	snap.Endpoints = map[string]corev1.Endpoints{}
	want := map[string]bool{}
	for i := range snap.Services {
		svc := &snap.Services[i]
		if len(svc.Spec.Selector) == 0 && svc.Spec.Type != corev1.ServiceTypeExternalName {
			want[k8sops.SvcKey(svc)] = true
		}
	}
	if len(want) > endpointsGetMax {
		err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Endpoints("").List), func(ep *corev1.Endpoints) error {
			if want[ep.Namespace+"/"+ep.Name] {
				snap.Endpoints[ep.Namespace+"/"+ep.Name] = *ep
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing Endpoints: %w", err)
		}
		return nil
	}
	for key := range want {
		ns, name, _ := strings.Cut(key, "/")
		ep, err := c.Kube.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading Endpoints %s: %w", key, err)
		}
		snap.Endpoints[key] = *ep
	}
	return nil
}
