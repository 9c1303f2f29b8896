// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// TestAdmissionGuards: the dry run before a delete is asked only where something can refuse the
// copy: a policy or webhook matching Service creates, a ResourceQuota counting Services (for a
// Service more: a bridge), externalIPs (the built-in DenyServiceExternalIPs), or a listing that
// failed. The same from listings and from watches.
func TestAdmissionGuards(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(map[bool]string{false: "listed", true: "watched"}[watched], func(t *testing.T) { testAdmissionGuards(t, watched) })
	}
}

func testAdmissionGuards(t *testing.T, watched bool) {
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
	current := func(c *k8sops.Client) func(*corev1.Service, bool) bool {
		g = admissionGuards{}
		if watched {
			t.Cleanup(g.watch(ctx, c, testLog(t)))
			if g.w == nil {
				t.Fatal("the watches did not start")
			}
		}
		return g.current(ctx, c)
	}
	may := current(&k8sops.Client{Kube: fake.NewClientset(quota, cpuQuota)})
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

	if may := current(&k8sops.Client{Kube: fake.NewClientset(policy)}); !may(svc("app"), false) {
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
	if may := current(&k8sops.Client{Kube: onlyBeta}); !may(svc("app"), false) {
		t.Error("a v1beta1 ValidatingAdmissionPolicy (Kubernetes 1.29) matching Service creates: the dry run is not asked")
	}

	failing := fake.NewClientset()
	failing.PrependReactor("list", "resourcequotas", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "", errors.New("no"))
	})
	if watched {
		return // a failed listing: the watches do not sync (TestAdmissionGuardsWatchFails)
	}
	if may := current(&k8sops.Client{Kube: failing}); !may(svc("app"), false) {
		t.Error("a failed listing: the dry run is not asked")
	}
}

// TestAdmissionGuardsWatched: a webhook configuration created during the run is known at the
// next delete, without waiting for a relisting, and its removal as well; a watch that fails
// hands over to relisting.
func TestAdmissionGuardsWatched(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	c := &k8sops.Client{Kube: kube}
	var g admissionGuards
	t.Cleanup(g.watch(ctx, c, testLog(t)))
	if g.w == nil {
		t.Fatal("the watches did not start")
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "s"}}
	if g.current(ctx, c)(svc, false) {
		t.Fatal("nothing can refuse, yet the dry run is asked")
	}
	lists := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "list" {
				n++
			}
		}
		return n
	}
	listed := lists()
	webhook := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "opa"},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "opa.example.com", Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.OperationAll},
			Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}}}}
	webhooks := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := webhooks.Create(ctx, webhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until := func(want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return g.current(ctx, c)(svc, false) == want, nil
		})
		if err != nil {
			t.Fatalf("the dry run is still asked = %t after the webhook configuration changed", !want)
		}
	}
	until(true)
	if err := webhooks.Delete(ctx, "opa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(false)
	if n := lists(); n != listed {
		t.Errorf("%d lists while watched; want none", n-listed)
	}

	// The watch fails (a role without the watch verb): relisting takes over.
	failing := fake.NewClientset(webhook)
	failing.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "validatingwebhookconfigurations"}, "", errors.New("no watch"))
	})
	c = &k8sops.Client{Kube: failing}
	g = admissionGuards{}
	t.Cleanup(g.watch(ctx, c, testLog(t)))
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !g.w.ready(), nil
	}); err != nil {
		t.Error("watches that cannot watch are used")
	}
	if !g.current(ctx, c)(svc, false) {
		t.Error("a failed watch: the webhook configuration is not found by relisting")
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

func testLog(t *testing.T) func(string, map[string]any) {
	return func(msg string, f map[string]any) { t.Logf("%s %v", msg, f) }
}

// TestPlanAdmissionCopy: the plan asks admission about the copy the apply creates (with the
// previous IPs annotated), at the planned address where a Ready ServiceCIDR holds it, else at
// one the allocator picks: a dry run at an address no range serves yet fails in the allocation,
// before admission, however often it is asked.
func TestPlanAdmissionCopy(t *testing.T) {
	ranges := []k8sops.ServiceCIDR{{Name: "kubernetes", CIDRs: []string{"100.64.0.0/13", "fd00:10::/108"}, Ready: true},
		{Name: "new", CIDRs: []string{"172.24.0.0/15"}, Ready: true}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "kube-system", UID: "u"},
		Spec: corev1.ServiceSpec{ClusterIP: "100.64.0.10", ClusterIPs: []string{"100.64.0.10", "fd00:10::a"}}}
	got := planAdmissionCopy(ranges, svc, []string{"172.24.0.10", "fd00:10::a"})
	if got.Spec.ClusterIP != "172.24.0.10" || got.Annotations[k8sops.PreviousClusterIPsAnnotation] != "100.64.0.10,fd00:10::a" || got.UID != "" {
		t.Errorf("served range: %v %v uid %q", got.Spec.ClusterIPs, got.Annotations, got.UID)
	}
	got = planAdmissionCopy(ranges[:1], svc, []string{"172.24.0.10", "fd00:10::a"})
	if got.Spec.ClusterIP != "" || got.Spec.ClusterIPs != nil || got.Annotations[k8sops.PreviousClusterIPsAnnotation] == "" {
		t.Errorf("range not served yet: %v %v", got.Spec.ClusterIPs, got.Annotations)
	}
	terminating := []k8sops.ServiceCIDR{ranges[0], {Name: "new", CIDRs: []string{"172.24.0.0/15"}, Ready: true, Terminating: true}}
	if got = planAdmissionCopy(terminating, svc, []string{"172.24.0.10"}); got.Spec.ClusterIP != "" {
		t.Errorf("terminating range: %v", got.Spec.ClusterIPs)
	}
}

// TestDryRunUnsupported: a webhook whose sideEffects are Unknown or Some makes the apiserver
// refuse every dry run it would be called on. That is said as what it is, with the way out,
// never passed off as the webhook's refusal of the copy.
func TestDryRunUnsupported(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest(`admission webhook "legacy.example.org" does not support dry run`)
	})
	svc := rsvc("app/web", "ClusterIP", "172.24.1.5")
	got, err := AdmissionRefusal(context.Background(), &k8sops.Client{Kube: kube}, &svc, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"legacy.example.org" does not support dry run`, "sideEffects Unknown or Some", "cannot be asked", "None or NoneOnDryRun"} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal %q does not say %q", got, want)
		}
	}
	if reason := admissionReason("its recreation", got, false); !strings.HasPrefix(reason, "whether admission admits its recreation cannot be asked") {
		t.Errorf("reason %q", reason)
	}
}
