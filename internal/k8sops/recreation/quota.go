// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// ResourceQuotas that leave no room for the Services an apply creates.
package recreation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// QuotaShortfall is a ResourceQuota that leaves Free Services in Namespace, fewer than the Need
// an apply creates there.
type QuotaShortfall struct {
	Namespace, Quota, Resource string
	Hard, Used, Need           int64
}

// Free is how many more Services the quota admits.
func (q QuotaShortfall) Free() int64 { return max(q.Hard-q.Used, 0) }

// ServiceQuotaShortfalls finds, with one list of ResourceQuotas, those whose services count
// (services or count/services, as the quota controller last counted it) leaves fewer free than
// need, new Services by namespace. Moves need no room (the delete frees it); bridges do.
func ServiceQuotaShortfalls(ctx context.Context, c *k8sops.Client, need map[string]int) ([]QuotaShortfall, error) {
	if len(need) == 0 {
		return nil, nil
	}
	var out []QuotaShortfall
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().ResourceQuotas("").List), func(q *corev1.ResourceQuota) error {
		if n := int64(need[q.Namespace]); n > 0 {
			out = append(out, shortfalls(q, n)...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceQuotas: %w", err)
	}
	slices.SortFunc(out, func(a, b QuotaShortfall) int {
		return strings.Compare(a.Namespace+"/"+a.Quota+" "+a.Resource, b.Namespace+"/"+b.Quota+" "+b.Resource)
	})
	return out, nil
}

// serviceCounts are the quota resources that count Services of every type.
var serviceCounts = []corev1.ResourceName{corev1.ResourceServices, "count/services"}

// serviceHard is q's limit on res, as the quota controller last took it from the spec.
func serviceHard(q *corev1.ResourceQuota, res corev1.ResourceName) (hard resource.Quantity, ok bool) {
	if hard, ok = q.Status.Hard[res]; !ok {
		hard, ok = q.Spec.Hard[res]
	}
	return hard, ok
}

// serviceQuotaNamespaces are the namespaces with a ResourceQuota that counts Services (one list).
func serviceQuotaNamespaces(ctx context.Context, c *k8sops.Client) (map[string]bool, error) {
	var quotas []*corev1.ResourceQuota
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().ResourceQuotas("").List), func(q *corev1.ResourceQuota) error {
		quotas = append(quotas, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceQuotas: %w", err)
	}
	return quotaNamespaces(quotas), nil
}

// quotaNamespaces are the namespaces of the quotas that count Services.
func quotaNamespaces(quotas []*corev1.ResourceQuota) map[string]bool {
	out := map[string]bool{}
	for _, q := range quotas {
		for _, res := range serviceCounts {
			if _, ok := serviceHard(q, res); ok {
				out[q.Namespace] = true
			}
		}
	}
	return out
}

// quotaRecountEvery is how often a create refused by a stale quota looks for the recount.
var quotaRecountEvery = 2 * time.Second

// awaitQuotaRecount is asked when a ResourceQuota keeps refusing the create of svc (after
// create's retries). A quota's usage is raised by admission and lowered only by
// kube-controller-manager's recount, which a Service delete in the namespace or the full resync
// (--resource-quota-sync-period, 5 minutes by default) brings: a create admitted but never
// stored (its client killed mid-request, as an interrupted apply's in-flight create is, or
// refused as already existing) stays counted until then. Every count svc takes is judged:
// Services, and for a NodePort or LoadBalancer Service its node ports and load balancer
// (services.nodeports, services.loadbalancers), as the quota's own evaluator counts them. When
// the namespace's Services use less than a quota short for svc counts, the usage is stale: it
// waits, until ctx ends, for the recount and reports true, so that the create is tried again. A
// quota the namespace's Services do fill (another client took the room) reports false at once:
// the caller fails, and the journal keeps the Service.
func (x *executor) awaitQuotaRecount(ctx context.Context, svc *corev1.Service, key string) bool {
	ns, need := svc.Namespace, serviceUsage(svc)
	short, err := x.quotasShort(ctx, ns, need)
	if err != nil || len(short) == 0 {
		return false // not a count svc takes that refused: not ours to wait for
	}
	inUse, err := x.servicesUsage(ctx, ns)
	if err != nil {
		return false
	}
	for _, q := range short {
		if inUse[corev1.ResourceName(q.Resource)]+q.Need > q.Hard {
			return false // full for real
		}
	}
	q := short[0]
	x.noteOnce("stale quota "+ns, "ResourceQuota %s/%s counted %d %s (limit %d) while %s's Services used %d, so it refused %s: a create admitted "+
		"but never stored (an interrupted apply's, or another client's) stays counted until kube-controller-manager recounts, after a "+
		"Service delete there or at its full resync (--resource-quota-sync-period, 5m by default). The apply waited for the recount; "+
		"raising the quota's spec.hard makes it recount at once.", ns, q.Quota, q.Used, quotaNoun(q.Resource), q.Hard, ns,
		inUse[corev1.ResourceName(q.Resource)], key)
	x.log("waiting for a stale ResourceQuota to be recounted", map[string]any{"namespace": ns, "quota": q.Quota, "resource": q.Resource,
		"used": q.Used, "hard": q.Hard, "in_use": inUse[corev1.ResourceName(q.Resource)]})
	err = wait.PollUntilContextCancel(ctx, quotaRecountEvery, false, func(ctx context.Context) (bool, error) {
		short, err := x.quotasShort(ctx, ns, need)
		return err == nil && len(short) == 0, nil
	})
	return err == nil
}

// quotaNoun names what a quota resource counts.
func quotaNoun(res string) string {
	switch corev1.ResourceName(res) {
	case corev1.ResourceServicesNodePorts:
		return "node ports"
	case corev1.ResourceServicesLoadBalancers:
		return "load balancers"
	}
	return "Services"
}

// serviceUsage is what svc counts against each quota resource that counts Services, as
// kube-apiserver's quota evaluator for Services counts it: one Service; a NodePort Service
// each of its ports; a LoadBalancer Service one load balancer and each of its ports (only those
// with a nodePort set when allocateLoadBalancerNodePorts is false).
func serviceUsage(svc *corev1.Service) map[corev1.ResourceName]int64 {
	u := map[corev1.ResourceName]int64{corev1.ResourceServices: 1, "count/services": 1}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		u[corev1.ResourceServicesNodePorts] = int64(len(svc.Spec.Ports))
	case corev1.ServiceTypeLoadBalancer:
		u[corev1.ResourceServicesLoadBalancers] = 1
		n := int64(len(svc.Spec.Ports))
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			n = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					n++
				}
			}
		}
		u[corev1.ResourceServicesNodePorts] = n
	}
	return u
}

// quotasShort are ns's ResourceQuotas that leave less room than need, by resource, takes, from
// the run's watch of them when it is up (no request), else listed.
func (x *executor) quotasShort(ctx context.Context, ns string, need map[corev1.ResourceName]int64) ([]QuotaShortfall, error) {
	quotas, err := x.quotasIn(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out []QuotaShortfall
	for _, q := range quotas {
		out = append(out, shortOf(q, need)...)
	}
	return out, nil
}

// quotasIn are ns's ResourceQuotas, from the run's watch of them when it is up (no request),
// else listed.
func (x *executor) quotasIn(ctx context.Context, ns string) ([]*corev1.ResourceQuota, error) {
	var out []*corev1.ResourceQuota
	if w := x.guards.watched(); w.ready() {
		for _, o := range w.quotas.GetStore().List() {
			if q, ok := o.(*corev1.ResourceQuota); ok && q.Namespace == ns {
				out = append(out, q)
			}
		}
		return out, nil
	}
	list, err := x.c.Kube.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceQuotas of %s: %w", ns, err)
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// shortOf are q's resources that leave less room than need takes of them.
func shortOf(q *corev1.ResourceQuota, need map[corev1.ResourceName]int64) []QuotaShortfall {
	var out []QuotaShortfall
	for _, res := range slices.Sorted(maps.Keys(need)) {
		hard, ok := serviceHard(q, res)
		if !ok || need[res] == 0 {
			continue
		}
		used := q.Status.Used[res]
		if s := (QuotaShortfall{Namespace: q.Namespace, Quota: q.Name, Resource: string(res), Hard: hard.Value(), Used: used.Value(), Need: need[res]}); s.Free() < s.Need {
			out = append(out, s)
		}
	}
	return out
}

// shortfalls are q's Services counts that leave fewer than need free.
func shortfalls(q *corev1.ResourceQuota, need int64) []QuotaShortfall {
	return shortOf(q, map[corev1.ResourceName]int64{corev1.ResourceServices: need, "count/services": need})
}

// bridgeRoom is, by namespace, what the ResourceQuotas there leave for the bridges the run
// keeps (old-IP bridges, the DNS bridge): each quota's limit less what the namespace's Services
// count, read once before the first move, and less the room the restores left to after the
// moves hold. Every move that keeps a bridge takes its bridge's counts from it before its entry
// is journaled (reserveBridges): the moves of a chunk run side by side, and each one's dry run
// of its bridge would pass against the same free slot, so that some bridges, and after them
// some copies, would find the quota full after their Service's delete.
type bridgeRoom struct {
	mu   sync.Mutex
	left map[string][]roomLeft // only namespaces with a quota that counts what a bridge counts
}

// roomLeft is what one quota leaves of one resource.
type roomLeft struct {
	quota string
	res   corev1.ResourceName
	hard  int64
	free  int64
}

// servicesUsage is what namespace ns's Services count against its quotas, as kube-apiserver's
// quota evaluator counts them (serviceUsage), listed now.
func (x *executor) servicesUsage(ctx context.Context, ns string) (map[corev1.ResourceName]int64, error) {
	inUse := map[corev1.ResourceName]int64{}
	err := k8sops.EachItem(ctx, k8sops.ListPages(x.c.Kube.CoreV1().Services(ns).List), func(s *corev1.Service) error {
		for res, n := range serviceUsage(s) {
			inUse[res] += n
		}
		return nil
	})
	return inUse, err
}

// measureBridgeRoom reads the room of the namespaces where moves keep a bridge: their quotas
// (from the run's watch when it is up), and their Services where a quota counts them.
func (x *executor) measureBridgeRoom(ctx context.Context, moves []Move) error {
	x.room = &bridgeRoom{left: map[string][]roomLeft{}}
	held := x.heldQuota()
	for _, ns := range x.bridgeNamespaces(moves) {
		quotas, err := x.quotasIn(ctx, ns)
		if err != nil {
			return fmt.Errorf("the room for the bridges kept in %s: %w", ns, err)
		}
		if !quotaNamespaces(quotas)[ns] {
			continue
		}
		inUse, err := x.servicesUsage(ctx, ns)
		if err != nil {
			return fmt.Errorf("listing the Services of %s, for the bridges kept there: %w", ns, err)
		}
		for _, q := range quotas {
			for _, res := range []corev1.ResourceName{corev1.ResourceServices, "count/services", corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers} {
				if hard, ok := serviceHard(q, res); ok {
					free := hard.Value() - inUse[res]
					if res == corev1.ResourceServices || res == "count/services" {
						free -= int64(held[ns])
					}
					x.room.left[ns] = append(x.room.left[ns], roomLeft{quota: q.Name, res: res, hard: hard.Value(), free: free})
				}
			}
		}
	}
	return nil
}

// bridgeNamespaces are the namespaces of moves that keep a bridge, sorted.
func (x *executor) bridgeNamespaces(moves []Move) []string {
	set := map[string]bool{}
	for _, m := range moves {
		for _, b := range x.keptBridges(m.Key) {
			set[b.Namespace] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// keptBridges are the bridges the move of key creates and leaves behind it.
func (x *executor) keptBridges(key string) []*corev1.Service {
	var out []*corev1.Service
	if b := x.oldIPBridges[key]; b != nil {
		out = append(out, b)
	}
	if key == x.dnsKey && x.bridge != nil {
		out = append(out, x.bridge)
	}
	return out
}

// reserveBridges takes from the room what the bridges key's move keeps count, all or nothing.
// It returns why the move cannot be made ("" when it can): nothing is deleted for a move whose
// bridge would not fit.
func (x *executor) reserveBridges(key string) string {
	bridges := x.keptBridges(key)
	if x.room == nil || len(bridges) == 0 {
		return ""
	}
	x.room.mu.Lock()
	defer x.room.mu.Unlock()
	need := map[string]map[corev1.ResourceName]int64{}
	for _, b := range bridges {
		if need[b.Namespace] == nil {
			need[b.Namespace] = map[corev1.ResourceName]int64{}
		}
		for res, n := range serviceUsage(b) {
			need[b.Namespace][res] += n
		}
	}
	for ns, n := range need {
		for _, r := range x.room.left[ns] {
			if n[r.res] > r.free {
				what := "its bridge"
				if len(bridges) > 1 {
					what = "its bridges"
				}
				return fmt.Sprintf("the ResourceQuota %s/%s has no room for %s (%s: hard %d, taken %d by the namespace's Services and "+
					"the bridges this apply made room for before it); nothing was deleted. Raise its %s for the migration, or "+
					"set old_ip_bridges = \"dns\" if nothing uses the old IPs", ns, r.quota, what, r.res, r.hard, r.hard-r.free, r.res)
			}
		}
	}
	for ns, n := range need {
		for i := range x.room.left[ns] {
			x.room.left[ns][i].free -= n[x.room.left[ns][i].res]
		}
	}
	return ""
}
