// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Admission rules as every stage reads them: whether a webhook or policy rule matches a create.
package k8sops

import (
	"context"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// ListAdmissionPolicies lists the cluster's ValidatingAdmissionPolicies as
// admissionregistration.k8s.io/v1 objects: v1 from 1.30; on a 1.29 whose feature gate serves
// only v1beta1, those, with the parts every reader uses (metadata and match rules) carried
// over. Neither served lists none.
func ListAdmissionPolicies(ctx context.Context, c *Client) ([]admissionv1.ValidatingAdmissionPolicy, error) {
	var out []admissionv1.ValidatingAdmissionPolicy
	err := EachItem(ctx, ListPages(c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List), func(p *admissionv1.ValidatingAdmissionPolicy) error {
		out = append(out, *p)
		return nil
	})
	if err == nil || !apierrors.IsNotFound(err) {
		return out, err
	}
	err = EachItem(ctx, ListPages(c.Kube.AdmissionregistrationV1beta1().ValidatingAdmissionPolicies().List), func(p *admissionv1beta1.ValidatingAdmissionPolicy) error {
		out = append(out, AdmissionPolicyV1(p))
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return out, err
}

// AdmissionPolicyV1 carries a v1beta1 ValidatingAdmissionPolicy over to v1: the parts every
// reader uses (metadata and match rules).
func AdmissionPolicyV1(p *admissionv1beta1.ValidatingAdmissionPolicy) admissionv1.ValidatingAdmissionPolicy {
	v1 := admissionv1.ValidatingAdmissionPolicy{ObjectMeta: p.ObjectMeta}
	if m := p.Spec.MatchConstraints; m != nil {
		v1.Spec.MatchConstraints = &admissionv1.MatchResources{NamespaceSelector: m.NamespaceSelector, ObjectSelector: m.ObjectSelector}
		for _, r := range m.ResourceRules {
			v1.Spec.MatchConstraints.ResourceRules = append(v1.Spec.MatchConstraints.ResourceRules,
				admissionv1.NamedRuleWithOperations{ResourceNames: r.ResourceNames, RuleWithOperations: r.RuleWithOperations})
		}
	}
	return v1
}
