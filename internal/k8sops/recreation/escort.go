// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The escort: what keeps a move by delete and create served on the wire. Such a move (a
// NodePort or LoadBalancer Service, a selector-less one, one the hand-over cannot take) deletes
// the Service and creates it again; without help its old IPs go unserved from kube-proxy's first
// sync after the delete to the sync after their bridge, its new IPs may be answered by the
// cluster DNS before kube-proxy has programmed them, and its node ports are closed from the sync
// that sees the delete to the one that sees the create. The escort serves the IPs throughout, and
// its last step times the delete so that kube-proxy sees it together with the create:
//
//	escort   E, on a ClusterIP of its own (in the new IPs' range, none the apply plans or gave
//	         another escort), with the old and the new IPs as external IPs and copies of the
//	         Service's endpoints
//	                                                                             -> wait a sync
//	time     E's own ClusterIP becomes one of its external IPs too (nothing else changes: both
//	         lead to E's endpoints): a change kube-proxy syncs at once when idle, after which it
//	         waits its min-sync-period (1 s) before the next              -> wait escortTiming
//	delete   the Service: E serves its old IPs (and then its bridge, when it keeps one)
//	create   the Service on its new IPs, at once: kube-proxy's next sync sees both, and the
//	         node ports pass from the old Service to the new one in one ruleset
//	dismiss  E is deleted a sync after the create; with no bridge kept for the old IPs
//	         (old_ip_bridges = "dns"), once the cluster DNS's cached answers expire (DNSTTL)
//
// It is the carrier of k8scidr_apiserver_service's move, for any Service. What it cannot serve:
// the Service's name between the delete and the create (milliseconds; a resolver asking then
// gets NXDOMAIN), and the node ports when a kube-proxy sync falls between the delete and the
// create (one that other changes of the cluster started). kube-proxy 1.33 and older may sync
// twice at once (a burst of 2; 1.37's runner has none), so the timing holds there only when it
// was busy. It is labelled as
// a hand-over's carrier of the journal group, so a run cut off while it exists leaves it to the
// next run's sweep (sweepHandOvers).
package recreation

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// escortName names a move's escort, after its old IPs (as its bridge is named).
func escortName(namespace, name string, ips []string) string {
	return name[:min(len(name), bridgeNamePrefixMax)] + "-esc-" + shortHash(namespace+"/"+name+" "+strings.Join(ips, ","))
}

// escortOf is the escort of the move e of svc, or nil when it goes without one: the hand-over is
// off (hand_over = false: a proxy that may not program external IPs), or the Service has
// external IPs of its own (the escort would serve them twice, and a policy that allowed them
// there may not allow them on another Service).
func (x *executor) escortOf(svc *corev1.Service, e JournalEntry) *corev1.Service {
	if x.o.HandOver.Off || svc == nil || len(svc.Spec.ExternalIPs) > 0 || len(e.OldIPs) == 0 {
		return nil
	}
	ips := slices.Clone(e.OldIPs)
	var own []string // its ClusterIPs: beside each new IP, an address no move of the apply takes
	for _, ip := range e.Service.Spec.ClusterIPs {
		if !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
		if addr, err := netip.ParseAddr(ip); err == nil {
			if free, ok := x.nextFree(addr); ok {
				own = append(own, free.String())
			}
		}
	}
	var esc *corev1.Service
	if len(own) > 0 && len(own) == len(e.Service.Spec.ClusterIPs) {
		esc = bridgeFor(&e.Service, escortName(e.Service.Namespace, e.Service.Name, e.OldIPs), own)
	} else { // no planned new IPs (or none with a free neighbour): the allocator's choice
		esc = bridgeFor(&e.Service, escortName(e.Service.Namespace, e.Service.Name, e.OldIPs), e.OldIPs)
		esc.Spec.ClusterIP, esc.Spec.ClusterIPs, esc.Spec.IPFamilies, esc.Spec.IPFamilyPolicy = "", nil, nil, nil
	}
	esc.Spec.ExternalIPs = ips
	esc.Labels[HandOverLabel] = "carrier"
	esc.Labels[JournalGroupLabel] = x.o.Journal.group()
	esc.Annotations["k8scidr.io/description"] = "Serves " + e.Key + "'s old and new IPs while it is deleted and created again; removed by the move."
	return esc
}

// escort creates the escort planned for the move e (none: nil), gives it copies of the
// Service's EndpointSlices, and waits until kube-proxy has programmed it. Refused (a quota
// filled since it was planned, a policy), the move goes without it, and the apply says so.
func (x *executor) escort(ctx context.Context, e JournalEntry) *escorted {
	x.mu.Lock()
	esc := x.escorts[e.Key]
	x.mu.Unlock()
	if esc == nil {
		return nil
	}
	created, err := x.createEscort(ctx, esc.DeepCopy())
	if err != nil {
		x.note("%s: its escort %s was refused (%v): it moved without one, its old IPs unserved for about a kube-proxy sync.", e.Key, esc.Name, err)
		return nil
	}
	out := &escorted{svc: created}
	if out.copies, err = x.copySlices(ctx, familiesOf(x.currentSlices(e.Key), created), created); err != nil {
		x.note("%s: copying its endpoints to its escort %s failed (%v): the escort answers once kube-controller-manager writes its EndpointSlice.", e.Key, created.Name, err)
	}
	x.proxySync(ctx)
	if timed, err := x.setExternalIPs(ctx, created, append(slices.Clone(created.Spec.ExternalIPs), created.Spec.ClusterIPs...), nil); err != nil {
		x.log("the escort could not time the delete", map[string]any{"service": e.Key, "error": err.Error()})
	} else {
		out.svc = timed
		_ = x.sleepUntil(ctx, time.Now().Add(escortTiming))
	}
	return out
}

// escorted is an escort made, with the names of its EndpointSlice copies.
type escorted struct {
	svc    *corev1.Service
	copies []string
}

// escortTiming is how long after the escort's last change the delete comes: long enough for
// kube-proxy to have seen that change and begun the sync it starts at once (its informer's
// latency, milliseconds), short enough that the delete and the create come well within the
// min-sync-period that follows.
const escortTiming = 150 * time.Millisecond

// createEscort creates esc; an address of its own that another Service holds (another escort
// of the apply took the same neighbour) is replaced by the next one no move takes.
func (x *executor) createEscort(ctx context.Context, esc *corev1.Service) (*corev1.Service, error) {
	api := x.c.Kube.CoreV1().Services(esc.Namespace)
	for attempt := 0; ; attempt++ {
		created, err := api.Create(ctx, esc, metav1.CreateOptions{FieldManager: x.c.FieldManager})
		taken := takenIP(err, esc.Spec.ClusterIPs)
		if taken < 0 || attempt >= 16 {
			return created, err
		}
		ip, _ := netip.ParseAddr(esc.Spec.ClusterIPs[taken])
		next, ok := x.nextFree(ip)
		if !ok {
			return nil, err
		}
		esc.Spec.ClusterIPs[taken] = next.String()
		esc.Spec.ClusterIP = esc.Spec.ClusterIPs[0]
	}
}

// dismiss deletes the escort once kube-proxy has had a sync since the Service was created
// (created; zero: it was not, and the escort goes at once), and its EndpointSlice copies with it
// rather than after the garbage collector. A move that keeps no bridge for its old IPs leaves it
// serving them until the cluster DNS's cached answers naming them expire, and the run removes
// it then with the hand-overs' bridges that are not kept (retireTransients). A run cut off
// before leaves it to the next run's sweep, and says so.
func (x *executor) dismiss(ctx context.Context, key string, es *escorted, created time.Time) {
	if es == nil {
		return
	}
	if !created.IsZero() && len(x.keptBridges(key)) == 0 {
		x.retireAfter(es.svc, created.Add(x.o.HandOver.DNSTTL))
		return
	}
	if !created.IsZero() && x.sleepUntil(ctx, created.Add(x.o.HandOver.ProxySync)) != nil {
		x.note("%s: the apply ended before its escort %s could go (with its EndpointSlice copies %s): the next apply removes them.",
			key, k8sops.SvcKey(es.svc), strings.Join(qualified(es.svc.Namespace, es.copies), ", "))
		return
	}
	if err := x.deleteHelper(ctx, es.svc); err != nil {
		x.note("Deleting the escort %s failed (%v): the next apply removes it and its EndpointSlice copies %s.",
			k8sops.SvcKey(es.svc), err, strings.Join(qualified(es.svc.Namespace, es.copies), ", "))
		return
	}
	x.deleteSlices(ctx, es.svc.Namespace, es.copies)
}

// qualified are names in namespace ns as "ns/name".
func qualified(ns string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = ns + "/" + n
	}
	return out
}
