// ResourceQuotas that leave no room for the Services an apply creates.
package recreation

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
		n := int64(need[q.Namespace])
		if n == 0 {
			return nil
		}
		for _, res := range serviceCounts {
			hard, ok := serviceHard(q, res)
			if !ok {
				continue
			}
			used := q.Status.Used[res]
			s := QuotaShortfall{Namespace: q.Namespace, Quota: q.Name, Resource: string(res), Hard: hard.Value(), Used: used.Value(), Need: n}
			if s.Free() < n {
				out = append(out, s)
			}
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
