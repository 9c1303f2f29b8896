// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A 1.29 whose ValidatingAdmissionPolicy gate is on serves only v1beta1: its policies are read
// there, with the match rules the readers use; a cluster serving neither lists none.
func TestListAdmissionPolicies(t *testing.T) {
	ctx := context.Background()
	rule := admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}}}
	notServed := func(version string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetResource().Version == version || version == "" {
				return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
			}
			return false, nil, nil
		}
	}
	kube := fake.NewClientset()
	kube.PrependReactor("list", "validatingadmissionpolicies", notServed("v1"))
	_, err := kube.AdmissionregistrationV1beta1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1beta1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-old-ips", Labels: map[string]string{"team": "net"}},
		Spec: admissionv1beta1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionv1beta1.MatchResources{
			ResourceRules: []admissionv1beta1.NamedRuleWithOperations{{RuleWithOperations: rule}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ListAdmissionPolicies(ctx, &Client{Kube: kube})
	if err != nil || len(got) != 1 || got[0].Name != "no-old-ips" || got[0].Labels["team"] != "net" ||
		got[0].Spec.MatchConstraints == nil || len(MatchesCreate([]admissionv1.RuleWithOperations{got[0].Spec.MatchConstraints.ResourceRules[0].RuleWithOperations}, "services")) != 1 {
		t.Fatalf("v1beta1 only: got %+v, %v", got, err)
	}

	none := fake.NewClientset()
	none.PrependReactor("list", "validatingadmissionpolicies", notServed(""))
	if got, err := ListAdmissionPolicies(ctx, &Client{Kube: none}); err != nil || len(got) != 0 {
		t.Fatalf("neither served: got %v, %v", got, err)
	}
}
