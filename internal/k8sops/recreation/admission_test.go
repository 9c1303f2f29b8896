package recreation

import (
	"context"
	"errors"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// TestAdmissionGuards: the dry run before a delete is asked only where something can refuse the
// copy: a policy or webhook matching Service creates, a ResourceQuota counting Services (for a
// Service more: a bridge), externalIPs (the built-in DenyServiceExternalIPs), or a listing that
// failed.
func TestAdmissionGuards(t *testing.T) {
	svc := func(ns string, externalIPs ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, Spec: corev1.ServiceSpec{ExternalIPs: externalIPs}}
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "limited", Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/services": resource.MustParse("5")}}}
	cpuQuota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "cpu", Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-label"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}}}}}}}}
	ctx := context.Background()

	var g admissionGuards
	may := g.current(ctx, &k8sops.Client{Kube: fake.NewClientset(quota, cpuQuota)})
	for _, c := range []struct {
		svc   *corev1.Service
		isNew bool
		want  bool
	}{
		{svc("app"), false, false},
		{svc("app"), true, false},
		{svc("limited"), false, false}, // a move's delete frees the room its copy takes
		{svc("limited"), true, true},
		{svc("cpu"), true, false},
		{svc("app", "192.0.2.7"), false, true},
	} {
		if got := may(c.svc, c.isNew); got != c.want {
			t.Errorf("no policy: may refuse %s/%s (externalIPs %v, new %t) = %t, want %t", c.svc.Namespace, c.svc.Name, c.svc.Spec.ExternalIPs, c.isNew, got, c.want)
		}
	}

	g = admissionGuards{}
	if may := g.current(ctx, &k8sops.Client{Kube: fake.NewClientset(policy)}); !may(svc("app"), false) {
		t.Error("a ValidatingAdmissionPolicy matching Service creates: the dry run is not asked")
	}

	// Kubernetes 1.29 serves VAPs as v1beta1 only (with its feature gate on).
	betaPolicy := &admissionv1beta1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-label-beta"},
		Spec: admissionv1beta1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionv1beta1.MatchResources{ResourceRules: []admissionv1beta1.NamedRuleWithOperations{{
			RuleWithOperations: policy.Spec.MatchConstraints.ResourceRules[0].RuleWithOperations}}}}}
	onlyBeta := fake.NewClientset(betaPolicy)
	onlyBeta.PrependReactor("list", "validatingadmissionpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Version == "v1" {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}, "")
		}
		return false, nil, nil
	})
	g = admissionGuards{}
	if may := g.current(ctx, &k8sops.Client{Kube: onlyBeta}); !may(svc("app"), false) {
		t.Error("a v1beta1 ValidatingAdmissionPolicy (Kubernetes 1.29) matching Service creates: the dry run is not asked")
	}

	failing := fake.NewClientset()
	failing.PrependReactor("list", "resourcequotas", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "", errors.New("no"))
	})
	g = admissionGuards{}
	if may := g.current(ctx, &k8sops.Client{Kube: failing}); !may(svc("app"), false) {
		t.Error("a failed listing: the dry run is not asked")
	}
}

// TestDryRunMiss: the dry run's own allocation failures are asked again; admission's answers,
// a taken address and transient failures are not misses.
func TestDryRunMiss(t *testing.T) {
	invalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "s", field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), []string{"172.24.1.2"}, msg)})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{invalid("failed to allocate IP 172.24.1.2: allocator not ready"), true},
		{invalid("failed to allocate IP 172.24.1.2: the provided IP (172.24.1.2) is not in the valid range. The range of valid IPs is 100.64.0.0/13"), true},
		{apierrors.NewInternalError(errors.New(`failed to allocate a serviceIP for Service "s": range is full`)), true},
		{invalid("failed to allocate IP 172.24.1.2: provided IP is already allocated"), false},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "s", errors.New("denied request: Services need a team label")), false},
		{apierrors.NewInternalError(errors.New("etcdserver: request timed out")), false},
	} {
		if got := dryRunMiss(c.err); got != c.want {
			t.Errorf("dryRunMiss(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}
