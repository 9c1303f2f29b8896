// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Admission before the delete: a Service is deleted only once the apiserver has said, without
// writing anything, that it would admit its recreation (and its bridges).
package recreation

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// AdmissionRefusal asks the apiserver whether admission (mutating and validating webhooks,
// ValidatingAdmissionPolicies, the built-in plugins) would let svc be created, by a server-side
// dry-run create; it returns admission's message when it would not, "" when it would. held are
// IPs another Service holds until the delete (the IPs the move keeps): they, and node ports,
// are left to the dry run's allocator, since the apiserver allocates before it validates and an
// address or port still held would be refused for that alone. The planned IPs are kept: a policy
// on the address (a range it must lie in) sees the address the create will send, and a dry run
// that fails in the allocation for a reason of its own (dryRunMiss) is asked again. An object of the same name that
// exists answers AlreadyExists, which the apiserver checks after admission: admitted. A quota
// that is full is no refusal of a move (its delete frees the room); the caller says whether it
// is for a new object. A transient failure is an error: nothing is known, nothing is deleted.
func AdmissionRefusal(ctx context.Context, c *k8sops.Client, svc *corev1.Service, held []string, quotaRefuses bool) (string, error) {
	try := svc.DeepCopy()
	try.ResourceVersion, try.UID = "", ""
	if kept := slices.DeleteFunc(slices.Clone(try.Spec.ClusterIPs), func(ip string) bool { return slices.Contains(held, ip) }); len(kept) != len(try.Spec.ClusterIPs) {
		try.Spec.ClusterIPs, try.Spec.ClusterIP, try.Spec.IPFamilies = kept, "", nil
		if len(kept) > 0 {
			try.Spec.ClusterIP = kept[0]
		}
	}
	for i := range try.Spec.Ports {
		try.Spec.Ports[i].NodePort = 0
	}
	try.Spec.HealthCheckNodePort = 0
	api := c.Kube.CoreV1().Services(try.Namespace)
	for range dryRunTries {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			_, err := api.Create(ctx, try, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: c.FieldManager})
			return err
		}, rangeNotLoaded, quotaConflict)
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return "", nil
		case quotaExceeded(err):
			if quotaRefuses {
				return err.Error(), nil
			}
			return "", nil
		case dryRunMiss(err):
			continue // asked again, the apiserver picks a range anew
		case takenIP(err, try.Spec.ClusterIPs) >= 0:
			// Another client took the planned IP: the create probes further, so does this.
			i := takenIP(err, try.Spec.ClusterIPs)
			try.Spec.ClusterIPs, try.Spec.IPFamilies = slices.Delete(try.Spec.ClusterIPs, i, i+1), nil
			try.Spec.ClusterIP = ""
			if len(try.Spec.ClusterIPs) > 0 {
				try.Spec.ClusterIP = try.Spec.ClusterIPs[0]
			}
			continue
		case ctx.Err() != nil || k8sops.Transient(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err):
			return "", fmt.Errorf("asking admission whether %s/%s can be created (a dry run): %w", try.Namespace, try.Name, err)
		case dryRunUnsupported(err):
			return fmt.Sprintf("%s: the webhook declares sideEffects Unknown or Some (set through the v1beta1 API before "+
				"Kubernetes 1.22), so the apiserver refuses every dry run it is called on, and whether it admits the copy "+
				"cannot be asked before the delete; set its sideEffects to None or NoneOnDryRun if that is true of it", err), nil
		default:
			return err.Error(), nil
		}
	}
	return "", fmt.Errorf("asking admission whether %s/%s can be created: %d dry runs failed in the apiserver's IP "+
		"allocation, before admission (its IPs taken by other clients, or no Ready ServiceCIDR with room picked); nothing was deleted",
		try.Namespace, try.Name, dryRunTries)
}

// dryRunTries bounds the dry runs of one AdmissionRefusal. The pick of a range (dryRunMiss) is
// not uniform: the first entry of a small Go map comes first 7 times in 8, so the range holding
// the address may be picked only 1 time in 8 (measured: 63 of 80 first dry runs missed with the
// old default range Terminating); 128 tries all miss with odds of (7/8)^128, about 4e-8.
const dryRunTries = 128

// dryRunMiss: the dry run failed in the apiserver's IP allocation, which comes before admission,
// for a reason of the dry run's own. MetaAllocator.DryRun (kubernetes
// pkg/registry/core/service/ipallocator/cidrallocator.go, 1.29 to 1.37) answers with the
// allocator of one ServiceCIDR taken in a map's random order, Terminating ranges included, not
// the one holding the address: one that does not hold it ("is not in the valid range"), a
// Terminating one ("allocator not ready": the state of an old range retired before the move,
// where 63 of 80 moves were refused before this was asked again) or, where the address is left
// to it (one still held: a bridge's), a full one ("range is full": a keep-range) fails it. A real create allocates from the right
// range.
func dryRunMiss(err error) bool {
	msg := err.Error()
	if apierrors.IsInvalid(err) {
		return strings.Contains(msg, "is not in the valid range") || strings.Contains(msg, "allocator not ready")
	}
	return apierrors.IsInternalError(err) && strings.Contains(msg, "range is full")
}

// admitted checks, right before the delete, that admission would create the Service's copy and
// the bridges its move creates. It returns the reason the move is not made, "" when it is.
func (x *executor) admitted(ctx context.Context, old *corev1.Service, e JournalEntry) (string, error) {
	mayRefuse := x.guards.current(ctx, x.c)
	held := ipStrings(k8sops.ClusterIPs(old))
	if mayRefuse(&e.Service, false) {
		refusal, err := AdmissionRefusal(ctx, x.c, &e.Service, held, false)
		if err != nil || refusal != "" {
			return admissionReason("its recreation", refusal, true), err
		}
	}
	bridges := []*corev1.Service{e.Bridge}
	if e.Key == x.dnsKey {
		bridges = append(bridges, x.bridge)
	}
	for _, b := range bridges {
		if b == nil || !mayRefuse(b, true) {
			continue
		}
		// The bridge takes the old IPs once they are free: the dry run lets them be allocated.
		// It is a Service more: a full quota refuses it, and an old IP left unbridged would cut
		// off the clients still using it, so the move waits until the quota has room.
		refusal, err := AdmissionRefusal(ctx, x.c, b, slices.Concat(held, b.Spec.ClusterIPs), true)
		if err != nil || refusal != "" {
			return admissionReason("its bridge "+b.Namespace+"/"+b.Name, refusal, true), err
		}
	}
	return "", nil
}

// admissionReason says what admission refused, and how to move on: atApply, nothing was deleted.
func admissionReason(what, refusal string, atApply bool) string {
	if refusal == "" {
		return ""
	}
	if strings.Contains(refusal, "does not support dry run") {
		return fmt.Sprintf("whether admission admits %s cannot be asked (%s); it is not moved: a refusal after the delete "+
			"would keep the Service deleted until the webhook allows it", what, refusal)
	}
	if atApply {
		return fmt.Sprintf("admission would refuse %s (a dry-run create, before the delete, answered: %s); nothing was deleted. "+
			"Allow it in the policy or webhook, or leave the Service out of the move", what, refusal)
	}
	return fmt.Sprintf("admission would refuse %s (a dry-run create at plan answered: %s). Allow it in the policy or "+
		"webhook and plan again, or leave the Service out of the move", what, refusal)
}

// dryRunUnsupported is the apiserver's refusal of a dry run that would call a webhook whose
// sideEffects are Unknown or Some: not the webhook's answer, which nobody asked.
func dryRunUnsupported(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "does not support dry run")
}

// admissionConfigs lists what may refuse a Service create beyond the built-in plugins:
// ValidatingAdmissionPolicies and webhooks whose rules match it (the provider's own policies
// left out; k8sops.ListAdmissionPolicies says which API versions).
func admissionConfigs(ctx context.Context, c *k8sops.Client) ([]string, error) {
	k := c.Kube.AdmissionregistrationV1()
	vwc, err := k.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	mwc, err := k.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	policies, err := k8sops.ListAdmissionPolicies(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("listing ValidatingAdmissionPolicies: %w", err)
	}
	return matchingConfigs(vwc.Items, mwc.Items, policies), nil
}

// matchingConfigs names the webhook configurations and ValidatingAdmissionPolicies with a rule
// that matches Service creates (the provider's own policies left out).
func matchingConfigs(vwc []admissionv1.ValidatingWebhookConfiguration, mwc []admissionv1.MutatingWebhookConfiguration,
	policies []admissionv1.ValidatingAdmissionPolicy) []string {
	var found []string
	for _, cfg := range vwc {
		for _, w := range cfg.Webhooks {
			if len(k8sops.MatchesCreate(w.Rules, "services")) > 0 {
				found = append(found, "ValidatingWebhookConfiguration "+cfg.Name)
			}
		}
	}
	for _, cfg := range mwc {
		for _, w := range cfg.Webhooks {
			if len(k8sops.MatchesCreate(w.Rules, "services")) > 0 {
				found = append(found, "MutatingWebhookConfiguration "+cfg.Name)
			}
		}
	}
	for _, p := range policies {
		if p.Labels["app.kubernetes.io/managed-by"] == "k8scidr" || p.Spec.MatchConstraints == nil {
			continue
		}
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			if len(k8sops.MatchesCreate([]admissionv1.RuleWithOperations{r.RuleWithOperations}, "services")) > 0 {
				found = append(found, "ValidatingAdmissionPolicy "+p.Name)
				break
			}
		}
	}
	return slices.Compact(found)
}

// planAdmissionCopy is the copy of svc that PlanAdmission asks admission about: the one the apply
// creates (movedCopy). Where a planned IP lies in no Ready ServiceCIDR (the new range, which the
// same apply makes with k8scidr_service_cidr) the apiserver cannot allocate it yet: a dry run at
// that address fails in the allocation, before admission, however often it is asked (128 dry runs
// per Service: half an hour of plan for 600 Services). The copy then leaves the address to the
// allocator; the apply asks again at the planned address before each delete.
func planAdmissionCopy(ranges []k8sops.ServiceCIDR, svc *corev1.Service, ips []string) *corev1.Service {
	out := movedCopy(svc, ips)
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err != nil || !k8sops.ReadyHolds(ranges, a) {
			out.Spec.ClusterIP, out.Spec.ClusterIPs = "", nil
			break
		}
	}
	return out
}

// PlanAdmission asks admission, at plan, about each move of p: where a ValidatingAdmissionPolicy
// or webhook matches Service creates, it dry-runs each copy (as the apply does before each
// delete) and turns the moves admission refuses into skips, so that the reviewed plan shows
// them. Without such a policy it asks nothing. An identity that may not create Services (a
// read-only plan role) cannot ask: the note says so, and the apply asks. A refused move of a
// Service in First is an error finding.
func PlanAdmission(ctx context.Context, c *k8sops.Client, snap Snapshot, p *RecreationPlan, parallelism int) (note string, err error) {
	if len(p.Moves) == 0 {
		return "", nil
	}
	configs, err := admissionConfigs(ctx, c)
	if err != nil || len(configs) == 0 {
		return "", err
	}
	byKey := map[string]*corev1.Service{}
	for i := range snap.Services {
		byKey[k8sops.SvcKey(&snap.Services[i])] = &snap.Services[i]
	}
	refused := make([]string, len(p.Moves))
	sem := make(chan struct{}, max(parallelism, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, m := range p.Moves {
		svc := byKey[m.Key]
		if svc == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := AdmissionRefusal(ctx, c, planAdmissionCopy(snap.Ranges, svc, m.NewIPs), ipStrings(k8sops.ClusterIPs(svc)), false)
			mu.Lock()
			defer mu.Unlock()
			refused[i] = r
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	var kept []Move
	for i, m := range p.Moves {
		switch r := refused[i]; {
		case r == "":
			kept = append(kept, m)
		case strings.Contains(r, `cannot create resource "services"`):
			return fmt.Sprintf("%s admit Service creates by rules only the apiserver evaluates, and this identity may "+
				"not create Services, so it could not ask (a dry run) which moves they refuse. The apply asks before each "+
				"delete and lists the refused ones in not_moved.", strings.Join(configs, ", ")), nil
		case slices.Contains(p.First, m.Key):
			p.Errors = append(p.Errors, k8sops.Finding{Path: k8sops.At("first"), Summary: "Admission Refuses a First Move",
				Detail: fmt.Sprintf("%s is moved first, and %s.", m.Key, admissionReason("its recreation", r, false))})
			kept = append(kept, m)
		default:
			p.Skipped[m.Key] = admissionReason("its recreation", r, false)
			if p.Refused == nil {
				p.Refused = map[string]string{}
			}
			p.Refused[m.Key] = r
		}
	}
	p.Moves = kept
	return "", nil
}
