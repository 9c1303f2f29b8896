// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// k8scidr_preflight: the hazards outside the Services and pools themselves that break a
// migration (a tool pinning the old ClusterIP, DNS bound to the old IP, pods pinned to the old
// pool, policies naming the old ranges, fail-closed admission), found before anything moves.
// Reading is here; the checks are pure over a PreflightSnapshot (checks.go).
package preflight

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// Severities of a preflight finding.
const (
	// SeverityBlocker: starting the migration with it breaks something (a stalled roll, a
	// Service put back at its old IP); fix it first.
	SeverityBlocker = "blocker"
	// SeverityWarning: the migration works, but something outside it needs a step of its own.
	SeverityWarning = "warning"
	// SeverityInfo: worth knowing, nothing to do.
	SeverityInfo = "info"
)

// Preflight check ids: stable, documented on the data source's page.
const (
	CheckClusterIPPinned     = "cluster_ip_pinned"
	CheckDNSPinned           = "dns_pinned"
	CheckPodsPinnedToOldPool = "pods_pinned_to_old_pool"
	CheckPoolPlacement       = "pool_placement"
	CheckKubeProxyCIDR       = "kube_proxy_cluster_cidr"
	CheckPolicyOldRange      = "policy_names_old_range"
	CheckAdmissionPolicy     = "admission_policy"
	CheckWebhookFailClosed   = "webhook_fail_closed"
	CheckDisruptionBudget    = "disruption_budget"
	CheckRolloutStuck        = "rollout_stuck"
	CheckRangeOverlap        = "range_overlap"
	CheckCNIIPAM             = "cni_ipam"
	CheckServiceCIDRGate     = "service_cidr_gate"
	CheckKubeadmConfig       = "kubeadm_config"
	CheckRollAvailability    = "roll_availability"
	CheckServiceCIDRLeftover = "service_cidr_leftover"
	CheckUnread              = "check_unread"
)

// ObjectRef names the object a finding is about; Namespace is "" for cluster-scoped ones.
type ObjectRef struct {
	Kind, Namespace, Name string
}

// PreflightFinding is one hazard: how bad, which check, which object, what will happen, what to do.
type PreflightFinding struct {
	Severity, Check string
	Object          ObjectRef
	Detail, Fix     string
}

// String names the object: Kind namespace/name, or Kind name when cluster-scoped.
func (o ObjectRef) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Summary is the finding in a line: its check and its object.
func (f PreflightFinding) Summary() string { return f.Check + " on " + f.Object.String() }

// PreflightRanges are the migration's ranges.
type PreflightRanges struct {
	OldService, NewService, OldPod, NewPod []netip.Prefix
	Reserved                               []NamedRange
	// OldService split for lookups (indexed): a recreation's old range is one host prefix per
	// moved Service, and every Service in the cluster is looked up in it.
	oldServiceHosts map[netip.Addr]bool
	oldServiceNets  []netip.Prefix
}

// indexed is r with OldService indexed for inOldService.
func (r PreflightRanges) indexed() PreflightRanges {
	r.oldServiceHosts, r.oldServiceNets = map[netip.Addr]bool{}, nil
	for _, p := range r.OldService {
		if p.IsSingleIP() {
			r.oldServiceHosts[p.Addr()] = true
		} else {
			r.oldServiceNets = append(r.oldServiceNets, p)
		}
	}
	return r
}

// inOldService reports whether ip lies in the old Service range.
func (r PreflightRanges) inOldService(ip netip.Addr) bool {
	if r.oldServiceHosts == nil {
		return containsAddr(r.OldService, ip)
	}
	return r.oldServiceHosts[ip] || containsAddr(r.oldServiceNets, ip)
}

// PreflightSnapshot is what the checks read. Items a read could not get are nil, with the
// reason among Unread.
type PreflightSnapshot struct {
	FieldManager         string // the provider's own: its writes pin nothing
	Services             []corev1.Service
	Pods                 []corev1.Pod
	Namespaces           []corev1.Namespace
	Nodes                []corev1.Node
	Deployments          []appsv1.Deployment
	StatefulSets         []appsv1.StatefulSet
	DaemonSets           []appsv1.DaemonSet
	ConfigMaps           map[string]*corev1.ConfigMap // kube-system, by name, those that exist
	NetworkPolicies      []networkingv1.NetworkPolicy
	CalicoPolicies       []unstructured.Unstructured // NetworkPolicy and GlobalNetworkPolicy
	BGPConfigurations    []unstructured.Unstructured
	Pools                []calico.IPPool
	ValidatingWebhooks   []admissionv1.ValidatingWebhookConfiguration
	MutatingWebhooks     []admissionv1.MutatingWebhookConfiguration
	AdmissionPolicies    []admissionv1.ValidatingAdmissionPolicy
	PodDisruptionBudgets []policyv1.PodDisruptionBudget
	ServiceCIDRs         []k8sops.ServiceCIDR
	Installations        []unstructured.Unstructured // the Tigera operator's, where it runs
	CalicoServed         bool                        // the cluster serves a Calico IPPool API
	KubeadmConfig        *corev1.ConfigMap           // kube-system/kubeadm-config, where it exists
	ServerMinor          int
	Unread               []PreflightFinding
}

// installationsGVR is the Tigera operator's Installation: its spec.cni says which CNI and IPAM run.
var installationsGVR = schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "installations"}

// preflightConfigMaps are the kube-system ConfigMaps the checks read where they exist.
var preflightConfigMaps = []string{recreation.KubeletConfigMap, "kube-proxy", "node-local-dns", "calico-config", CoreDNSConfigMap}

// Preflight reads the cluster and runs the given checks (nil: every check), for the data
// source and for the resources, which show their stage's checks as plan warnings.
func Preflight(ctx context.Context, c *k8sops.Client, r PreflightRanges, checks []string) ([]PreflightFinding, error) {
	snap, err := ReadPreflight(ctx, c, checks)
	if err != nil {
		return nil, err
	}
	found := CheckPreflight(snap, r)
	if checks != nil {
		found = slices.DeleteFunc(found, func(f PreflightFinding) bool { return f.Check != CheckUnread && !slices.Contains(checks, f.Check) })
	}
	return found, nil
}

// preflightReads is how many kinds ReadPreflight lists at once.
const preflightReads = 6

// ReadPreflight reads what the checks need (nil: every check): one paginated list per kind. A kind the
// credentials may not list, or the cluster does not serve, is left out with an Unread finding
// (not served: nothing to check); any other error fails the read.
func ReadPreflight(ctx context.Context, c *k8sops.Client, checks []string) (PreflightSnapshot, error) {
	s := PreflightSnapshot{FieldManager: c.FieldManager, ConfigMaps: map[string]*corev1.ConfigMap{}}
	if caps, err := c.Capabilities(); err == nil {
		s.ServerMinor = caps.ServerMinor
	}
	k := c.Kube
	reads := []struct {
		what   string
		checks []string
		read   func() error
	}{
		{"services", []string{CheckClusterIPPinned, CheckDNSPinned, CheckWebhookFailClosed, CheckRollAvailability, CheckServiceCIDRLeftover}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.CoreV1().Services("").List), collect(&s.Services))
		}},
		{"pods", []string{CheckPodsPinnedToOldPool, CheckPoolPlacement, CheckKubeProxyCIDR, CheckDisruptionBudget, CheckServiceCIDRGate}, func() error {
			pods, err := c.PlanPods(ctx) // the list the plan's data sources read moments ago, if any
			s.Pods = make([]corev1.Pod, 0, len(pods))
			for i := range pods {
				s.Pods = append(s.Pods, podForPreflight(&pods[i]))
			}
			return err
		}},
		{"namespaces", []string{CheckPodsPinnedToOldPool}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.CoreV1().Namespaces().List), collect(&s.Namespaces))
		}},
		{"nodes", []string{CheckPoolPlacement, CheckRangeOverlap}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.CoreV1().Nodes().List), collect(&s.Nodes))
		}},
		{"deployments.apps", []string{CheckPodsPinnedToOldPool, CheckRolloutStuck, CheckRollAvailability}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.AppsV1().Deployments("").List), collect(&s.Deployments))
		}},
		{"statefulsets.apps", []string{CheckPodsPinnedToOldPool}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.AppsV1().StatefulSets("").List), collect(&s.StatefulSets))
		}},
		{"daemonsets.apps", []string{CheckPodsPinnedToOldPool, CheckDNSPinned, CheckCNIIPAM}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.AppsV1().DaemonSets("").List), collect(&s.DaemonSets))
		}},
		{"networkpolicies.networking.k8s.io", []string{CheckPolicyOldRange}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.NetworkingV1().NetworkPolicies("").List), collect(&s.NetworkPolicies))
		}},
		{"validatingwebhookconfigurations.admissionregistration.k8s.io", []string{CheckWebhookFailClosed, CheckRollAvailability}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.AdmissionregistrationV1().ValidatingWebhookConfigurations().List), collect(&s.ValidatingWebhooks))
		}},
		{"mutatingwebhookconfigurations.admissionregistration.k8s.io", []string{CheckWebhookFailClosed, CheckRollAvailability}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.AdmissionregistrationV1().MutatingWebhookConfigurations().List), collect(&s.MutatingWebhooks))
		}},
		{"validatingadmissionpolicies.admissionregistration.k8s.io", []string{CheckAdmissionPolicy}, func() error {
			var err error
			s.AdmissionPolicies, err = k8sops.ListAdmissionPolicies(ctx, c)
			return err
		}},
		{"poddisruptionbudgets.policy", []string{CheckDisruptionBudget, CheckRollAvailability}, func() error {
			return k8sops.EachItem(ctx, k8sops.ListPages(k.PolicyV1().PodDisruptionBudgets("").List), collect(&s.PodDisruptionBudgets))
		}},
		{"configmaps (kube-system: " + fmt.Sprint(preflightConfigMaps) + ")", []string{CheckDNSPinned, CheckKubeProxyCIDR, CheckPodsPinnedToOldPool, CheckCNIIPAM}, func() error {
			for _, name := range preflightConfigMaps {
				cm, err := k.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					return err
				default:
					s.ConfigMaps[name] = cm
				}
			}
			return nil
		}},
		{"servicecidrs.networking.k8s.io", []string{CheckRangeOverlap, CheckServiceCIDRLeftover}, func() (err error) {
			s.ServiceCIDRs, err = servedServiceCIDRs(ctx, c)
			return err
		}},
		{"configmap kube-system/" + KubeadmConfigMap, []string{CheckKubeadmConfig}, func() error {
			cm, err := k.CoreV1().ConfigMaps("kube-system").Get(ctx, KubeadmConfigMap, metav1.GetOptions{})
			if err == nil {
				s.KubeadmConfig = cm
			}
			return err
		}},
		{"installations.operator.tigera.io", []string{CheckCNIIPAM}, func() error {
			list, err := c.Dynamic.Resource(installationsGVR).List(ctx, metav1.ListOptions{})
			if err == nil {
				s.Installations = list.Items
			}
			return err
		}},
	}
	// Side by side: each read fills its own field, and a refused one is told in reads' order.
	errs := make([]error, len(reads))
	var g errgroup.Group
	g.SetLimit(preflightReads)
	for i, rd := range reads {
		if needed(checks, rd.checks...) {
			g.Go(func() error { errs[i] = rd.read(); return nil })
		}
	}
	_ = g.Wait()
	for i, rd := range reads {
		if err := s.tolerate(rd.what, rd.checks, errs[i]); err != nil {
			return s, err
		}
	}
	if !needed(checks, CheckPodsPinnedToOldPool, CheckPoolPlacement, CheckPolicyOldRange, CheckRangeOverlap, CheckCNIIPAM) {
		return s, nil
	}
	return s, s.readCalico(ctx, c, checks)
}

// needed reports whether any of these checks is among those to run (nil: all).
func needed(run []string, these ...string) bool {
	return run == nil || slices.ContainsFunc(these, func(c string) bool { return slices.Contains(run, c) })
}

// readCalico reads pools and, when the policy check runs, policies and BGP configuration from
// the group serving the pools.
func (s *PreflightSnapshot) readCalico(ctx context.Context, c *k8sops.Client, checks []string) error {
	api, err := calico.Calico(ctx, c)
	switch {
	case errors.Is(err, calico.ErrNoCalico):
		return nil
	case err != nil:
		return s.tolerate("Calico API", []string{CheckPodsPinnedToOldPool, CheckPoolPlacement, CheckRangeOverlap}, err)
	}
	s.CalicoServed = true
	if err := s.tolerate("ippools", []string{CheckPodsPinnedToOldPool, CheckPoolPlacement, CheckRangeOverlap}, func() (err error) {
		s.Pools, err = api.ListIPPools(ctx)
		return err
	}()); err != nil {
		return err
	}
	if !needed(checks, CheckPolicyOldRange) {
		return nil
	}
	gv := k8sops.MustGV(api.Group)
	for _, res := range []string{"networkpolicies", "globalnetworkpolicies", "bgpconfigurations"} {
		dst := &s.CalicoPolicies
		if res == "bgpconfigurations" {
			dst = &s.BGPConfigurations
		}
		err := k8sops.EachItem(ctx, k8sops.ListPages(c.Dynamic.Resource(gv.WithResource(res)).List), func(u *unstructured.Unstructured) error {
			*dst = append(*dst, *u)
			return nil
		})
		if err := s.tolerate(res+"."+gv.Group, []string{CheckPolicyOldRange}, err); err != nil {
			return err
		}
	}
	return nil
}

// tolerate turns a refused or unserved read into an Unread finding and passes other errors on.
func (s *PreflightSnapshot) tolerate(what string, checks []string, err error) error {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		s.Unread = append(s.Unread, PreflightFinding{Severity: SeverityWarning, Check: CheckUnread, Object: ObjectRef{Kind: what},
			Detail: fmt.Sprintf("Could not read %s (%v), so %s did not run fully.", what, err, strings.Join(checks, ", ")),
			Fix:    "Grant the read on " + what + " (get/list, as in examples/rbac/k8scidr-plan.yaml) to the plan's credentials."})
		return nil
	default:
		return fmt.Errorf("reading %s: %w", what, err)
	}
}

// collect appends each listed item to dst.
func collect[T any](dst *[]T) func(*T) error {
	return func(v *T) error {
		*dst = append(*dst, *v)
		return nil
	}
}

// SortFindings orders findings by severity (blockers first), check, then object.
func SortFindings(f []PreflightFinding) {
	rank := map[string]int{SeverityBlocker: 0, SeverityWarning: 1, SeverityInfo: 2}
	slices.SortStableFunc(f, func(a, b PreflightFinding) int {
		return cmp.Or(cmp.Compare(rank[a.Severity], rank[b.Severity]), cmp.Compare(a.Check, b.Check),
			cmp.Compare(a.Object.Kind, b.Object.Kind), cmp.Compare(a.Object.Namespace, b.Object.Namespace),
			cmp.Compare(a.Object.Name, b.Object.Name), cmp.Compare(a.Detail, b.Detail))
	})
}

// CountSeverity counts the findings of one severity.
func CountSeverity(f []PreflightFinding, severity string) int {
	n := 0
	for _, x := range f {
		if x.Severity == severity {
			n++
		}
	}
	return n
}

// Validate finds the static mistakes in the ranges, before the cluster is read: a new range
// that overlaps a range being left, the other kind's ranges, or a reserved range.
func (r PreflightRanges) Validate() []k8sops.Finding {
	type set struct {
		attr   string
		what   string
		ranges []netip.Prefix
	}
	sets := []set{{"old_service_cidrs", "old Service range", r.OldService}, {"new_service_cidrs", "new Service range", r.NewService},
		{"old_pod_cidrs", "old pod range", r.OldPod}, {"new_pod_cidrs", "new pod range", r.NewPod}}
	var out []k8sops.Finding
	for _, n := range []set{sets[1], sets[3]} {
		for i, p := range n.ranges {
			var clash []string
			for _, o := range sets {
				for _, q := range o.ranges {
					if o.attr != n.attr && q.Overlaps(p) {
						clash = append(clash, fmt.Sprintf("the %s %s", o.what, q))
					}
				}
			}
			for _, q := range r.Reserved {
				if q.CIDR.Overlaps(p) {
					clash = append(clash, fmt.Sprintf("the reserved range %s (%s)", q.Name, q.CIDR))
				}
			}
			if len(clash) > 0 {
				out = append(out, k8sops.Finding{Path: k8sops.At(n.attr).Index(i), Summary: "New Range Overlaps",
					Detail: fmt.Sprintf("%s overlaps %s: a new range must be apart from the ranges being left, from the other kind's "+
						"ranges and from reserved ranges. Choose another range.", p, strings.Join(clash, ", "))})
			}
		}
	}
	return out
}

// podForPreflight is the part of a pod the checks read, so that 20,000 pods cost a few MB, not
// their whole specs and managedFields: names, labels, owners, Calico's pinning annotations and
// the pod IP; the spec (container flags) only of kube-system's pods, where controlPlanePods looks.
func podForPreflight(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, OwnerReferences: p.OwnerReferences},
		Status:     corev1.PodStatus{PodIP: p.Status.PodIP},
	}
	for _, key := range []string{annIPv4Pools, annIPv6Pools, annIPAddrs} {
		if v, ok := p.Annotations[key]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
	if p.Namespace == "kube-system" {
		out.Spec = p.Spec
	}
	return out
}
