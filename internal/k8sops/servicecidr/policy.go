// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The ValidatingAdmissionPolicy of write-up 002 that governs ServiceCIDRs: which ranges may be
// added, or none at all, with the default range left to kube-apiserver alone.
package servicecidr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Validation actions of a policy binding.
const (
	ActionDeny  = string(admissionv1.Deny)
	ActionWarn  = string(admissionv1.Warn)
	ActionAudit = string(admissionv1.Audit)
)

// ValidationActions lists the actions a binding accepts.
var ValidationActions = []string{ActionDeny, ActionWarn, ActionAudit}

// APIServerUser is the identity kube-apiserver uses for its own requests, among them creating
// and updating the default ServiceCIDR from --service-cluster-ip-range.
const APIServerUser = "system:apiserver"

// Annotations on the policy that record what it was rendered from, so Read and import can
// recover the resource's arguments.
const (
	policyAllowedAnnotation = "k8scidr.io/allowed-cidrs"
	policyDenyNewAnnotation = "k8scidr.io/deny-new"
)

// CIDRLibraryMinor is the first Kubernetes minor whose admission CEL has the cidr() library
// (k8s.io/apiserver/pkg/cel/environment: IntroducedVersion 1.30) that allowed_cidrs needs.
const CIDRLibraryMinor = 30

// ErrNoAdmissionPolicyAPI means the server cannot enforce a ServiceCIDR policy.
var ErrNoAdmissionPolicyAPI = errors.New("the cluster serves no ValidatingAdmissionPolicy API, which k8scidr_service_cidr_policy " +
	"needs: admissionregistration.k8s.io/v1 is GA and on by default from Kubernetes 1.30; on 1.28 and 1.29 v1beta1 is served with " +
	"kube-apiserver's --feature-gates=ValidatingAdmissionPolicy=true and --runtime-config=admissionregistration.k8s.io/v1beta1=true")

// ServiceCIDRPolicy is a ValidatingAdmissionPolicy and its binding (both named Name) that
// decide who may create ServiceCIDRs and change their ranges:
//   - kube-apiserver's own identity (APIServerUser) is never restricted: it creates and updates
//     the default "kubernetes" range;
//   - everyone else may not create or change a range named "kubernetes" — a name alone would let
//     anyone add a "kubernetes" range with any CIDR;
//   - with AllowedCIDRs, a range is admitted only when each of its CIDRs lies inside one of them;
//     with DenyNew, no range may be created at all;
//   - updates that keep spec.cidrs (finalizer removal by kube-controller-manager, labels) are
//     never restricted, so ranges outside the policy can still be retired.
type ServiceCIDRPolicy struct {
	Name         string
	AllowedCIDRs []netip.Prefix
	DenyNew      bool
	Actions      []string // default Deny
	// InSync (read back only) is whether the live policy and binding are what the fields above
	// render; false after a hand edit, which the next apply overwrites.
	InSync bool
}

// policyPollInterval paces the wait for the apiserver's type check of a written policy.
const policyPollInterval = 200 * time.Millisecond

// objects renders the policy and its binding.
func (p ServiceCIDRPolicy) objects() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	fail := admissionv1.Fail
	forbidden := metav1.StatusReasonForbidden
	allowed := make([]string, len(p.AllowedCIDRs))
	quoted := make([]string, len(p.AllowedCIDRs))
	for i, c := range p.AllowedCIDRs {
		allowed[i] = c.String()
		quoted[i] = strconv.Quote(c.String())
	}
	spec := admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: &fail,
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{APIGroups: []string{"networking.k8s.io"}, APIVersions: []string{"*"},
					Resources: []string{"servicecidrs"}},
			},
		}}},
		MatchConditions: []admissionv1.MatchCondition{
			{Name: "not-kube-apiserver", Expression: fmt.Sprintf("request.userInfo.username != %q", APIServerUser)},
			{Name: "ranges-set-or-changed", Expression: "request.operation == 'CREATE' || object.spec.cidrs != oldObject.spec.cidrs"},
		},
		Validations: []admissionv1.Validation{{
			Expression: fmt.Sprintf("object.metadata.name != %q", k8sops.DefaultServiceCIDRName),
			Message: fmt.Sprintf("only kube-apiserver (%s) may create the default ServiceCIDR %q or change its ranges (policy %s)",
				APIServerUser, k8sops.DefaultServiceCIDRName, p.Name),
			Reason: &forbidden,
		}},
	}
	if p.DenyNew {
		spec.Validations = append(spec.Validations, admissionv1.Validation{
			Expression: "request.operation != 'CREATE'",
			Message:    fmt.Sprintf("no new ServiceCIDR may be created: only kube-apiserver's default range (policy %s, deny_new)", p.Name),
			Reason:     &forbidden,
		})
	} else {
		spec.Variables = []admissionv1.Variable{{Name: "allowed", Expression: "[" + strings.Join(quoted, ", ") + "]"}}
		outside := fmt.Sprintf("is not inside the allowed ranges %s (policy %s)", strings.Join(allowed, ", "), p.Name)
		spec.Validations = append(spec.Validations, admissionv1.Validation{
			Expression:        "object.spec.cidrs.all(c, variables.allowed.exists(a, cidr(a).containsCIDR(c)))",
			Message:           "a range of the ServiceCIDR " + outside,
			MessageExpression: fmt.Sprintf("'ServiceCIDR ' + object.metadata.name + ' (' + object.spec.cidrs.join(', ') + ') ' + %q", outside),
			Reason:            &forbidden,
		})
	}
	meta := metav1.ObjectMeta{Name: p.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "k8scidr"},
		Annotations: map[string]string{policyAllowedAnnotation: strings.Join(allowed, ","), policyDenyNewAnnotation: strconv.FormatBool(p.DenyNew)}}
	actions := p.Actions
	if len(actions) == 0 {
		actions = []string{ActionDeny}
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: p.Name}}
	for _, a := range actions {
		binding.Spec.ValidationActions = append(binding.Spec.ValidationActions, admissionv1.ValidationAction(a))
	}
	return &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: *meta.DeepCopy(), Spec: spec}, binding
}

// ApplyServiceCIDRPolicy creates the policy and its binding, or brings existing ones to p
// (read-modify-write with conflict retry; labels and annotations of others are kept), then
// waits until the apiserver has compiled the policy: an expression it rejects is an error here,
// not a policy that silently fails every request.
func ApplyServiceCIDRPolicy(ctx context.Context, c *k8sops.Client, p ServiceCIDRPolicy) error {
	vaps, bindings, err := policyAPIs(c)
	if err != nil {
		return err
	}
	prev, err := ReadServiceCIDRPolicy(ctx, c, p.Name)
	switch {
	case apierrors.IsNotFound(err):
		prev = nil
	case err != nil:
		return err
	case len(prev.Actions) == 0 || !prev.InSync:
		// No binding: nothing was enforced. Edited by hand: what it enforces is unknown, so
		// wait as if nothing were, until next's refusals are seen.
		prev = nil
	}
	policy, binding := p.objects()
	created, updated := metav1.CreateOptions{FieldManager: c.FieldManager}, metav1.UpdateOptions{FieldManager: c.FieldManager}
	getPolicy := func() (*admissionv1.ValidatingAdmissionPolicy, error) {
		return vaps.Get(ctx, p.Name, metav1.GetOptions{})
	}
	err = createOrUpdate(getPolicy, func() error { _, err := vaps.Create(ctx, policy, created); return err },
		func(cur *admissionv1.ValidatingAdmissionPolicy) error {
			cur.Spec = policy.Spec
			mergeMeta(&cur.ObjectMeta, &policy.ObjectMeta)
			_, err := vaps.Update(ctx, cur, updated)
			return err
		})
	if err != nil {
		return fmt.Errorf("writing ValidatingAdmissionPolicy %s: %w", p.Name, err)
	}
	if err := waitPolicyChecked(ctx, c, p.Name); err != nil {
		return err
	}
	getBinding := func() (*admissionv1.ValidatingAdmissionPolicyBinding, error) {
		return bindings.Get(ctx, p.Name, metav1.GetOptions{})
	}
	err = createOrUpdate(getBinding, func() error { _, err := bindings.Create(ctx, binding, created); return err },
		func(cur *admissionv1.ValidatingAdmissionPolicyBinding) error {
			cur.Spec = binding.Spec
			mergeMeta(&cur.ObjectMeta, &binding.ObjectMeta)
			_, err := bindings.Update(ctx, cur, updated)
			return err
		})
	if err != nil {
		return fmt.Errorf("writing ValidatingAdmissionPolicyBinding %s: %w", p.Name, err)
	}
	return waitPolicyEnforced(ctx, c, p.Name, prev, &p)
}

// probeCIDRs are documentation ranges (RFC 5737, RFC 3849), tried before the policies' own
// ranges as dry-run ServiceCIDRs that show which version of a policy the apiserver enforces.
var probeCIDRs = []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8:ffff::/112"}

// verdict is what the apiserver answers a ServiceCIDR create under a policy.
type verdict int

const (
	admitted verdict = iota
	denied
	warned
)

// verdictOn is p's answer to a new ServiceCIDR of cidr; a nil p admits everything.
func (p *ServiceCIDRPolicy) verdictOn(cidr netip.Prefix) verdict {
	if p == nil || !p.DenyNew && slices.ContainsFunc(p.AllowedCIDRs, func(a netip.Prefix) bool { return k8sops.Within(a, cidr) }) {
		return admitted
	}
	actions := p.Actions
	switch {
	case len(actions) == 0 || slices.Contains(actions, ActionDeny):
		return denied
	case slices.Contains(actions, ActionWarn):
		return warned
	}
	return admitted // Audit only
}

// waitPolicyEnforced waits until the apiserver enforces next (nil: no policy) instead of prev
// (nil: none before). It learns of policy changes by watch, a moment after they are written, so
// without this wait the next resource of the same apply could meet the old policy. It probes
// with a dry-run ServiceCIDR on which prev and next disagree; with none (e.g. only Audit
// changed) there is nothing to wait for. A client that may not create ServiceCIDRs cannot
// probe, and does not wait.
func waitPolicyEnforced(ctx context.Context, c *k8sops.Client, name string, prev, next *ServiceCIDRPolicy) error {
	candidates := slices.Clone(probeCIDRs)
	for _, p := range []*ServiceCIDRPolicy{prev, next} {
		if p != nil {
			for _, a := range p.AllowedCIDRs {
				candidates = append(candidates, a.String())
			}
		}
	}
	var probe netip.Prefix
	for _, s := range candidates {
		if cidr := netip.MustParsePrefix(s); prev.verdictOn(cidr) != next.verdictOn(cidr) {
			probe = cidr
			break
		}
	}
	if !probe.IsValid() {
		return nil
	}
	api, caps, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return err
	}
	mark := "(policy " + name
	obj := serviceCIDRObject(caps, "k8scidr-policy-probe", []string{probe.String()})
	want := next.verdictOn(probe)
	var last error
	err = wait.PollUntilContextCancel(ctx, policyPollInterval, true, func(ctx context.Context) (bool, error) {
		probeCtx, warnings := k8sops.CollectWarnings(ctx)
		_, last = api.Create(probeCtx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		got, known := answer(last, warnings.List(), mark)
		return !known || got == want, nil // unknown: RBAC, or a probe refused before admission
	})
	if err != nil {
		return fmt.Errorf("the apiserver did not start enforcing the change to ValidatingAdmissionPolicy %s "+
			"(a dry-run ServiceCIDR %s was last answered: %v): %w", name, probe, last, err)
	}
	return nil
}

// answer is the verdict a create got from the policy whose messages carry mark; known is false
// when something else refused it.
func answer(err error, warnings []string, mark string) (v verdict, known bool) {
	switch {
	case err == nil && slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, mark) }):
		return warned, true
	case err == nil:
		return admitted, true
	case strings.Contains(err.Error(), mark):
		return denied, true
	}
	return admitted, false
}

// waitPolicyChecked waits until the apiserver has type-checked the policy's current generation
// and fails when the check found a problem.
func waitPolicyChecked(ctx context.Context, c *k8sops.Client, name string) error {
	vaps, _, err := policyAPIs(c)
	if err != nil {
		return err
	}
	var warnings []string
	err = wait.PollUntilContextCancel(ctx, policyPollInterval, true, func(ctx context.Context) (bool, error) {
		cur, err := vaps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cur.Status.ObservedGeneration < cur.Generation || cur.Status.TypeChecking == nil {
			return false, nil
		}
		warnings = nil
		for _, w := range cur.Status.TypeChecking.ExpressionWarnings {
			warnings = append(warnings, w.FieldRef+": "+w.Warning)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the apiserver to check ValidatingAdmissionPolicy %s (kube-controller-manager's "+
			"ValidatingAdmissionPolicy status controller writes status.typeChecking; on 1.28 and 1.29 it runs only with "+
			"--feature-gates=ValidatingAdmissionPolicy=true on kube-controller-manager too): %w", name, err)
	}
	if len(warnings) > 0 {
		return fmt.Errorf("the apiserver found problems in ValidatingAdmissionPolicy %s: %s", name, strings.Join(warnings, "; "))
	}
	return nil
}

// mergeMeta sets want's labels and annotations on cur, keeping the others.
func mergeMeta(cur, want *metav1.ObjectMeta) {
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	for k, v := range want.Labels {
		cur.Labels[k] = v
	}
	for k, v := range want.Annotations {
		cur.Annotations[k] = v
	}
}

// ReadServiceCIDRPolicy reads the policy and binding named name back into a ServiceCIDRPolicy.
// A NotFound error means the policy is gone (the binding alone does not enforce anything). A
// policy this provider did not write (no k8scidr.io annotations) is an error naming the problem.
func ReadServiceCIDRPolicy(ctx context.Context, c *k8sops.Client, name string) (*ServiceCIDRPolicy, error) {
	vaps, bindings, err := policyAPIs(c)
	if err != nil {
		return nil, err
	}
	policy, err := vaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	allowedText, ok := policy.Annotations[policyAllowedAnnotation]
	if !ok {
		return nil, fmt.Errorf("ValidatingAdmissionPolicy %s was not written by k8scidr (no %s annotation): "+
			"delete it, or give the resource another name", name, policyAllowedAnnotation)
	}
	p := &ServiceCIDRPolicy{Name: name, DenyNew: policy.Annotations[policyDenyNewAnnotation] == "true"}
	for _, s := range strings.Split(allowedText, ",") {
		if s == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("ValidatingAdmissionPolicy %s: annotation %s: %w", name, policyAllowedAnnotation, err)
		}
		p.AllowedCIDRs = append(p.AllowedCIDRs, prefix)
	}
	binding, err := bindings.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return p, nil // Actions stay empty: the next apply recreates the binding
	}
	if err != nil {
		return nil, err
	}
	for _, a := range binding.Spec.ValidationActions {
		p.Actions = append(p.Actions, string(a))
	}
	want, wantBinding := p.objects()
	p.InSync = policySpecEqual(&policy.Spec, &want.Spec) && binding.Spec.PolicyName == name &&
		slices.Equal(binding.Spec.ValidationActions, wantBinding.Spec.ValidationActions)
	return p, nil
}

// policySpecEqual compares the parts of a policy spec this provider sets (the apiserver
// defaults the rest).
func policySpecEqual(a, b *admissionv1.ValidatingAdmissionPolicySpec) bool {
	if (a.FailurePolicy == nil) != (b.FailurePolicy == nil) || a.FailurePolicy != nil && *a.FailurePolicy != *b.FailurePolicy {
		return false
	}
	if a.MatchConstraints == nil || b.MatchConstraints == nil || len(a.MatchConstraints.ResourceRules) != len(b.MatchConstraints.ResourceRules) {
		return false
	}
	for i, r := range a.MatchConstraints.ResourceRules {
		o := b.MatchConstraints.ResourceRules[i]
		if !slices.Equal(r.Operations, o.Operations) || !slices.Equal(r.APIGroups, o.APIGroups) ||
			!slices.Equal(r.APIVersions, o.APIVersions) || !slices.Equal(r.Resources, o.Resources) {
			return false
		}
	}
	return slices.Equal(a.MatchConditions, b.MatchConditions) && slices.Equal(a.Variables, b.Variables) &&
		slices.EqualFunc(a.Validations, b.Validations, func(x, y admissionv1.Validation) bool {
			return x.Expression == y.Expression && x.Message == y.Message && x.MessageExpression == y.MessageExpression
		})
}

// DeleteServiceCIDRPolicy deletes the binding, then the policy (NotFound is fine), and waits
// until the apiserver no longer enforces it.
func DeleteServiceCIDRPolicy(ctx context.Context, c *k8sops.Client, name string) error {
	vaps, bindings, err := policyAPIs(c)
	if err != nil {
		return err
	}
	prev, err := ReadServiceCIDRPolicy(ctx, c, name)
	if err != nil || len(prev.Actions) == 0 {
		prev = nil // gone, without a binding, or not ours: nothing to wait for
	}
	err = bindings.Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ValidatingAdmissionPolicyBinding %s: %w", name, err)
	}
	err = vaps.Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ValidatingAdmissionPolicy %s: %w", name, err)
	}
	return waitPolicyEnforced(ctx, c, name, prev, nil)
}

// ValidateValidationActions checks a binding's actions as the apiserver will: known, no
// repeats, and not Deny together with Warn.
func ValidateValidationActions(actions []string) error {
	for i, a := range actions {
		if !slices.Contains(ValidationActions, a) {
			return fmt.Errorf("%q is not one of %s", a, strings.Join(ValidationActions, ", "))
		}
		if slices.Contains(actions[:i], a) {
			return fmt.Errorf("%q is given twice", a)
		}
	}
	if slices.Contains(actions, ActionDeny) && slices.Contains(actions, ActionWarn) {
		return errors.New("the actions Deny and Warn cannot be combined (the apiserver refuses it): a denied request gets its message anyway; use Deny with Audit, or Warn with Audit")
	}
	return nil
}

// createOrUpdate creates an object that get does not find, or updates the one it finds,
// reading it again after a Conflict.
func createOrUpdate[T any](get func() (T, error), create func() error, update func(cur T) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := get()
		switch {
		case apierrors.IsNotFound(err):
			return create()
		case err != nil:
			return err
		}
		return update(cur)
	})
}
