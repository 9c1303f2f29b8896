// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The preflight checks of what can refuse or misroute the migration's traffic and writes:
// policies naming the old ranges, fail-closed admission, disruption budgets over bare pods,
// stuck rollouts, and ranges that collide.
package preflight

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// oldOnly returns the CIDRs among cidrs that overlap the old ranges, unless one of cidrs
// already names a new range (then the policy was extended for the move).
func oldOnly(cidrs []string, r PreflightRanges) []string {
	var old []string
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		switch {
		case err != nil:
		case overlapsAny(p.Masked(), slices.Concat(r.NewPod, r.NewService)):
			return nil
		case overlapsAny(p.Masked(), slices.Concat(r.OldPod, r.OldService)):
			old = append(old, c)
		}
	}
	return old
}

// checkPolicies: NetworkPolicy ipBlocks, Calico policy nets and BGP Service advertisements
// that name the old ranges.
func checkPolicies(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	var out []PreflightFinding
	add := func(ref ObjectRef, found []string, what, fix string) {
		if len(found) == 0 {
			return
		}
		slices.Sort(found)
		out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckPolicyOldRange, Object: ref,
			Detail: fmt.Sprintf("It names %s, inside the old ranges and outside the new ones: %s", strings.Join(slices.Compact(found), ", "), what),
			Fix:    fix})
	}
	const policyFix = "Add the new range beside the old one before the move; drop the old one once nothing is left in it."
	for _, np := range s.NetworkPolicies {
		var found []string
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				found = append(found, ipBlockCIDRs(peer.IPBlock)...)
			}
		}
		for _, rule := range np.Spec.Egress {
			for _, peer := range rule.To {
				found = append(found, ipBlockCIDRs(peer.IPBlock)...)
			}
		}
		add(ObjectRef{"NetworkPolicy", np.Namespace, np.Name}, oldOnly(found, r),
			"traffic it allows or denies by address changes for pods and Services once they move.", policyFix)
	}
	for _, u := range s.CalicoPolicies {
		var found []string
		for _, dir := range []string{"ingress", "egress"} {
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", dir)
			for _, rule := range rules {
				m, _ := rule.(map[string]any)
				for _, side := range []string{"source", "destination"} {
					for _, field := range []string{"nets", "notNets"} {
						nets, _, _ := unstructured.NestedStringSlice(m, side, field)
						found = append(found, nets...)
					}
				}
			}
		}
		add(ObjectRef{u.GetKind(), u.GetNamespace(), u.GetName()}, oldOnly(found, r),
			"traffic it allows or denies by address changes for pods and Services once they move.", policyFix)
	}
	for _, u := range s.BGPConfigurations {
		var found []string
		for _, field := range []string{"serviceClusterIPs", "serviceExternalIPs"} {
			items, _, _ := unstructured.NestedSlice(u.Object, "spec", field)
			for _, it := range items {
				m, _ := it.(map[string]any)
				if c, _ := m["cidr"].(string); c != "" {
					found = append(found, c)
				}
			}
		}
		add(ObjectRef{u.GetKind(), "", u.GetName()}, oldOnly(found, r),
			"Calico advertises these over BGP, so moved Services are no longer reachable from outside the cluster by their new IPs.",
			"Add the new Service range to serviceClusterIPs before the move.")
	}
	return out
}

// ipBlockCIDRs are the CIDRs an ipBlock names.
func ipBlockCIDRs(b *networkingv1.IPBlock) []string {
	if b == nil {
		return nil
	}
	return append([]string{b.CIDR}, b.Except...)
}

// webhook is the part of a validating or mutating webhook the check reads.
type webhook struct {
	config, kind, name string
	rules              []admissionv1.RuleWithOperations
	failure            *admissionv1.FailurePolicyType
	client             admissionv1.WebhookClientConfig
}

// checkAdmission: fail-closed webhooks on Service or Pod create, and admission policies on
// Services or ServiceCIDRs (warned: what CEL admits cannot be decided from its text).
func checkAdmission(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	var hooks []webhook
	for _, c := range s.ValidatingWebhooks {
		for _, w := range c.Webhooks {
			hooks = append(hooks, webhook{c.Name, "ValidatingWebhookConfiguration", w.Name, w.Rules, w.FailurePolicy, w.ClientConfig})
		}
	}
	for _, c := range s.MutatingWebhooks {
		for _, w := range c.Webhooks {
			hooks = append(hooks, webhook{c.Name, "MutatingWebhookConfiguration", w.Name, w.Rules, w.FailurePolicy, w.ClientConfig})
		}
	}
	var out []PreflightFinding
	for _, h := range hooks {
		matched := k8sops.MatchesCreate(h.rules, "services", "pods")
		if len(matched) == 0 || (h.failure != nil && *h.failure == admissionv1.Ignore) {
			continue
		}
		f := PreflightFinding{Severity: SeverityWarning, Check: CheckWebhookFailClosed, Object: ObjectRef{h.kind, "", h.config},
			Detail: fmt.Sprintf("Webhook %s is called on every %s create with failurePolicy Fail: while its backend does not "+
				"answer, those creates are refused, so a Service deleted for its move cannot be created again (the journal "+
				"restores it on a later apply) and rolled pods cannot start.", h.name, strings.Join(matched, " and ")),
			Fix: "Make sure its backend stays up through the migration (move its Service last, keep its pods out of the " +
				"first roll batches), or set failurePolicy: Ignore for the migration."}
		if svc := h.client.Service; svc != nil && slices.Contains(matched, "services") {
			i := slices.IndexFunc(s.Services, func(x corev1.Service) bool { return x.Namespace == svc.Namespace && x.Name == svc.Name })
			if i >= 0 && len(oldIPs(&s.Services[i], r)) > 0 {
				f.Severity = SeverityBlocker
				f.Detail += fmt.Sprintf(" Its backend, Service %s/%s, is itself among the Services to move: once deleted, "+
					"nothing answers the webhook, so its own create is refused.", svc.Namespace, svc.Name)
				f.Fix = "Set failurePolicy: Ignore (or a namespaceSelector leaving out " + svc.Namespace + ") for the migration, " +
					"or leave " + svc.Namespace + "/" + svc.Name + " out of the recreation's selector."
			}
		}
		out = append(out, f)
	}
	for _, p := range s.AdmissionPolicies {
		if p.Labels["app.kubernetes.io/managed-by"] == "k8scidr" || p.Spec.MatchConstraints == nil {
			continue // k8scidr_service_cidr_policy's own
		}
		var matched []string
		for _, rule := range p.Spec.MatchConstraints.ResourceRules {
			matched = append(matched, k8sops.MatchesCreate([]admissionv1.RuleWithOperations{rule.RuleWithOperations}, "services")...)
			if slices.ContainsFunc(rule.APIGroups, func(g string) bool { return g == "networking.k8s.io" || g == "*" }) &&
				slices.ContainsFunc(rule.Resources, func(x string) bool { return x == "servicecidrs" || x == "*" }) {
				matched = append(matched, "servicecidrs")
			}
		}
		if len(matched) > 0 {
			slices.Sort(matched)
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckAdmissionPolicy, Object: ObjectRef{"ValidatingAdmissionPolicy", "", p.Name},
				Detail: fmt.Sprintf("It admits %s writes by rules this check cannot evaluate; if they name the old ranges or "+
					"ClusterIPs, the new ServiceCIDR or the moved Services are refused.", strings.Join(slices.Compact(matched), " and ")),
				Fix: "Read its validations; allow the new ranges before the migration."})
		}
	}
	return out
}

// checkDisruption: budgets that refuse every eviction over bare pods in the old pod range (the
// roll evicts those with evict_bare_pods), and Deployments a roll cannot move.
func checkDisruption(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	var out []PreflightFinding
	for _, pdb := range s.PodDisruptionBudgets {
		if len(r.OldPod) == 0 || pdb.Status.DisruptionsAllowed > 0 || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		var bare []string
		for _, p := range s.Pods {
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if p.Namespace != pdb.Namespace || metav1.GetControllerOf(&p) != nil || err != nil || !containsAddr(r.OldPod, ip) ||
				!sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			bare = append(bare, p.Name)
		}
		if len(bare) > 0 {
			slices.Sort(bare)
			out = append(out, PreflightFinding{Severity: SeverityBlocker, Check: CheckDisruptionBudget,
				Object: ObjectRef{"PodDisruptionBudget", pdb.Namespace, pdb.Name},
				Detail: fmt.Sprintf("It allows no disruption now and covers bare pods in the old pod range (%s): the roll's "+
					"evict_bare_pods goes through the Eviction API, which refuses them, so they stay in the old pool and it "+
					"cannot drain.", k8sops.FirstOf(bare)),
				Fix: "Raise the budget (or maxUnavailable) for the migration, or replace those pods by hand."})
		}
	}
	for _, d := range s.Deployments {
		if reason := stuck(&d); reason != "" {
			out = append(out, PreflightFinding{Severity: SeverityWarning, Check: CheckRolloutStuck, Object: ObjectRef{"Deployment", d.Namespace, d.Name},
				Detail: reason, Fix: "Resume it or finish its rollout before the roll, or leave it out of the roll and restart it by hand."})
		}
	}
	return out
}

// stuck says why a Deployment's rollout would not move its pods: paused, or past its deadline.
func stuck(d *appsv1.Deployment) string {
	if d.Spec.Paused {
		return "It is paused: a restart stamped on its template makes no new pods until it is resumed, so its pods stay where they are."
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return "Its current rollout is past its progress deadline (" + c.Message + "): a restart on top of it waits on the same failing pods."
		}
	}
	return ""
}

// Names of the new ranges among the gathered ones.
const (
	newServiceRangeName = "new Service range"
	newPodRangeName     = "new pod range"
)

// checkRangeOverlap folds k8scidr_network_overlaps in: a new range that collides with anything
// is a blocker; a collision the migration moves off (an old range) is info; others are warnings.
func checkRangeOverlap(s PreflightSnapshot, r PreflightRanges) []PreflightFinding {
	ranges := RangesOf(s.Nodes, s.ServiceCIDRs, s.Pools)
	for i, p := range r.NewService {
		ranges = append(ranges, NamedRange{RangeExtra, fmt.Sprintf("%s %d", newServiceRangeName, i), p})
	}
	for i, p := range r.NewPod {
		ranges = append(ranges, NamedRange{RangeExtra, fmt.Sprintf("%s %d", newPodRangeName, i), p})
	}
	ranges = append(ranges, r.Reserved...)
	old := slices.Concat(r.OldService, r.OldPod)
	var out []PreflightFinding
	for _, c := range FindConflicts(ranges) {
		a, b := c.A, c.B
		if b.Kind == RangeExtra { // the new range second, the cluster's first
			a, b = b, a
		}
		if a.Kind == RangeExtra && alreadyMade(a, b, old) {
			continue
		}
		obj := b
		if b.Kind == RangeReserved && a.Kind != RangeExtra {
			obj = a
		}
		f := PreflightFinding{Check: CheckRangeOverlap, Object: rangeObject(obj)}
		switch {
		case a.Kind == RangeExtra:
			f.Severity = SeverityBlocker
			f.Detail = fmt.Sprintf("The %s %s overlaps %s %s %s (shared: %s).", a.Name, a.CIDR, b.Kind, b.Name, b.CIDR, c.Overlap)
			f.Fix = "Choose a new range that overlaps nothing in the cluster or reserved."
		case overlapsAny(a.CIDR, old) || overlapsAny(b.CIDR, old):
			f.Severity = SeverityInfo
			f.Detail = fmt.Sprintf("%s %s %s overlaps %s %s %s: the migration moves off it.", a.Kind, a.Name, a.CIDR, b.Kind, b.Name, b.CIDR)
			f.Fix = "Nothing before the migration."
		default:
			f.Severity = SeverityWarning
			f.Detail = fmt.Sprintf("%s %s %s overlaps %s %s %s, and the migration does not move it.", a.Kind, a.Name, a.CIDR, b.Kind, b.Name, b.CIDR)
			f.Fix = "Add the range to the migration, or make sure the overlap is intended."
		}
		out = append(out, f)
	}
	return out
}

// alreadyMade: a pool or node podCIDR inside the new pod range, or a ServiceCIDR inside the new
// Service range, apart from the old ranges, is the new range in place (preflight runs again
// between stages), not a collision.
func alreadyMade(newRange, b NamedRange, old []netip.Prefix) bool {
	kinds := []string{RangeServiceCIDR}
	if strings.HasPrefix(newRange.Name, newPodRangeName) {
		kinds = []string{RangeCalicoPool, RangeNodePodCIDR}
	}
	return slices.Contains(kinds, b.Kind) && k8sops.Within(newRange.CIDR, b.CIDR) && !overlapsAny(b.CIDR, old)
}

// rangeObject names the object a gathered range comes from.
func rangeObject(n NamedRange) ObjectRef {
	switch n.Kind {
	case RangeNodeAddress, RangeNodePodCIDR:
		return ObjectRef{"Node", "", strings.Fields(n.Name)[0]}
	case RangeServiceCIDR:
		return ObjectRef{"ServiceCIDR", "", n.Name}
	case RangeCalicoPool:
		return ObjectRef{"IPPool", "", n.Name}
	}
	return ObjectRef{"Range", "", n.Name}
}
