// Admission rules as every stage reads them: whether a webhook or policy rule matches a create.
package k8sops

import (
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// MatchesCreate reports whether admission rules match creating one of the resources (core group).
func MatchesCreate(rules []admissionv1.RuleWithOperations, resources ...string) []string {
	var out []string
	for _, rule := range rules {
		if !slices.ContainsFunc(rule.Operations, func(o admissionv1.OperationType) bool {
			return o == admissionv1.Create || o == admissionv1.OperationAll
		}) || !slices.ContainsFunc(rule.APIGroups, func(g string) bool { return g == "" || g == "*" }) {
			continue
		}
		for _, res := range resources {
			if slices.ContainsFunc(rule.Resources, func(x string) bool { return x == res || x == "*" || x == "*/*" }) {
				out = append(out, res)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
