// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// ResourceQuotas that leave no room for the Services an apply creates.
package recreation

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// awaitQuotaRecount is asked when a ResourceQuota keeps refusing a Service create in ns (after
// create's retries). A quota's usage is raised by admission and lowered only by
// kube-controller-manager's recount, which a Service delete in the namespace or the full resync
// (--resource-quota-sync-period, 5 minutes by default) brings: a create admitted but never
// stored (its client killed mid-request, as an interrupted apply's in-flight create is, or
// refused as already existing) stays counted until then. When the namespace holds fewer Services
// than a quota at its limit counts, the usage is stale: it waits, until ctx ends, for the recount
// and reports true, so that the create is tried again. A quota the namespace's Services do fill
// (another client took the room) reports false at once: the caller fails, and the journal keeps
// the Service.
func (x *executor) awaitQuotaRecount(ctx context.Context, ns, key string) bool {
	full, err := x.quotasAtLimit(ctx, ns)
	if err != nil || len(full) == 0 {
		return false // not a Services count that refused (services.loadbalancers, say): not ours to wait for
	}
	var n int64
	err = k8sops.EachItem(ctx, k8sops.ListPages(x.c.Kube.CoreV1().Services(ns).List), func(*corev1.Service) error { n++; return nil })
	if err != nil {
		return false
	}
	for _, q := range full {
		if n >= q.Hard {
			return false // full for real
		}
	}
	q := full[0]
	x.noteOnce("stale quota "+ns, "ResourceQuota %s/%s counted %d Services (limit %d) while %s held %d, so it refused %s: a create admitted "+
		"but never stored (an interrupted apply's, or another client's) stays counted until kube-controller-manager recounts, after a "+
		"Service delete there or at its full resync (--resource-quota-sync-period, 5m by default). The apply waited for the recount; "+
		"raising the quota's spec.hard makes it recount at once.", ns, q.Quota, q.Used, q.Hard, ns, n, key)
	x.log("waiting for a stale ResourceQuota to be recounted", map[string]any{"namespace": ns, "quota": q.Quota, "used": q.Used, "hard": q.Hard, "services": n})
	err = wait.PollUntilContextCancel(ctx, quotaRecountEvery, false, func(ctx context.Context) (bool, error) {
		full, err := x.quotasAtLimit(ctx, ns)
		return err == nil && len(full) == 0, nil
	})
	return err == nil
}

// quotasAtLimit are ns's ResourceQuotas whose Services count is at or over its limit, from the
// run's watch of them when it is up (no request), else listed.
func (x *executor) quotasAtLimit(ctx context.Context, ns string) ([]QuotaShortfall, error) {
	var out []QuotaShortfall
	if w := x.guards.watched(); w.ready() {
		for _, o := range w.quotas.GetStore().List() {
			if q, ok := o.(*corev1.ResourceQuota); ok && q.Namespace == ns {
				out = append(out, shortfalls(q, 1)...)
			}
		}
		return out, nil
	}
	list, err := x.c.Kube.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceQuotas of %s: %w", ns, err)
	}
	for i := range list.Items {
		out = append(out, shortfalls(&list.Items[i], 1)...)
	}
	return out, nil
}

// shortfalls are q's Services counts that leave fewer than need free.
func shortfalls(q *corev1.ResourceQuota, need int64) []QuotaShortfall {
	var out []QuotaShortfall
	for _, res := range serviceCounts {
		hard, ok := serviceHard(q, res)
		if !ok {
			continue
		}
		used := q.Status.Used[res]
		if s := (QuotaShortfall{Namespace: q.Namespace, Quota: q.Name, Resource: string(res), Hard: hard.Value(), Used: used.Value(), Need: need}); s.Free() < need {
			out = append(out, s)
		}
	}
	return out
}
