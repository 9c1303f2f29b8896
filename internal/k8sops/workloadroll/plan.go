// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Workload roll planning: which Deployments, StatefulSets and DaemonSets have a pod that must
// move (an address in the old pool, or a DNS server from before the kube-dns move), and what
// cannot be rolled and why. Pure over a snapshot, so plan and apply agree.
package workloadroll

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// RollSnapshot is what planning a roll reads: one paginated list per kind.
type RollSnapshot struct {
	Pods         []corev1.Pod
	Deployments  []appsv1.Deployment
	StatefulSets []appsv1.StatefulSet
	DaemonSets   []appsv1.DaemonSet
	ReplicaSets  []appsv1.ReplicaSet
}

// TakeRollSnapshot lists pods and workloads cluster-wide, side by side, keeping of each item
// only what planning reads (see podForPlan and metaForPlan): a plan over 20,000 pods then holds
// a few MB of them instead of every pod's full spec, status and managedFields. It reads live,
// for an apply; PlanRollSnapshot is the plan's.
func TakeRollSnapshot(ctx context.Context, c *k8sops.Client) (*RollSnapshot, error) {
	return takeRollSnapshot(ctx, c, func(ctx context.Context) ([]corev1.Pod, error) {
		var pods []corev1.Pod
		return pods, k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error { pods = append(pods, podForPlan(p)); return nil })
	})
}

// PlanRollSnapshot is TakeRollSnapshot for a plan: its pods are the plan's one pod list
// (Client.PlanPods), which the preflight of the plan reads again without listing.
func PlanRollSnapshot(ctx context.Context, c *k8sops.Client) (*RollSnapshot, error) {
	return takeRollSnapshot(ctx, c, func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := c.PlanPods(ctx)
		out := make([]corev1.Pod, 0, len(pods))
		for i := range pods {
			out = append(out, podForPlan(&pods[i]))
		}
		return out, err
	})
}

func takeRollSnapshot(ctx context.Context, c *k8sops.Client, listPods func(context.Context) ([]corev1.Pod, error)) (*RollSnapshot, error) {
	s := &RollSnapshot{}
	apps := c.Kube.AppsV1()
	g, ctx := errgroup.WithContext(ctx)
	read := func(what string, run func() error) {
		g.Go(func() error {
			if err := run(); err != nil {
				return fmt.Errorf("listing %s: %w", what, err)
			}
			return nil
		})
	}
	read("pods", func() (err error) { s.Pods, err = listPods(ctx); return err })
	read("Deployments", func() error {
		return k8sops.EachItem(ctx, k8sops.ListPages(apps.Deployments("").List), func(d *appsv1.Deployment) error {
			s.Deployments = append(s.Deployments, appsv1.Deployment{ObjectMeta: withRevision(metaForPlan(&d.ObjectMeta), d.Annotations),
				Spec: appsv1.DeploymentSpec{Paused: d.Spec.Paused}, Status: appsv1.DeploymentStatus{Conditions: progressing(d.Status.Conditions)}})
			return nil
		})
	})
	read("StatefulSets", func() error {
		return k8sops.EachItem(ctx, k8sops.ListPages(apps.StatefulSets("").List), func(d *appsv1.StatefulSet) error {
			s.StatefulSets = append(s.StatefulSets, appsv1.StatefulSet{ObjectMeta: metaForPlan(&d.ObjectMeta),
				Spec:   appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: d.Spec.UpdateStrategy.Type}},
				Status: appsv1.StatefulSetStatus{CurrentRevision: d.Status.CurrentRevision, UpdateRevision: d.Status.UpdateRevision}})
			return nil
		})
	})
	read("DaemonSets", func() error {
		return k8sops.EachItem(ctx, k8sops.ListPages(apps.DaemonSets("").List), func(d *appsv1.DaemonSet) error {
			s.DaemonSets = append(s.DaemonSets, appsv1.DaemonSet{ObjectMeta: metaForPlan(&d.ObjectMeta),
				Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: d.Spec.UpdateStrategy.Type}}})
			return nil
		})
	})
	read("ReplicaSets", func() error {
		return k8sops.EachItem(ctx, k8sops.ListPages(apps.ReplicaSets("").List), func(d *appsv1.ReplicaSet) error {
			s.ReplicaSets = append(s.ReplicaSets, appsv1.ReplicaSet{ObjectMeta: withRevision(metaForPlan(&d.ObjectMeta), d.Annotations)})
			return nil
		})
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return s, nil
}

// metaForPlan is the part of an object's metadata that roll planning and pod allocations read.
func metaForPlan(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: m.Labels, OwnerReferences: m.OwnerReferences,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// revisionAnnotation is the Deployment revision the Deployment controller writes on a
// Deployment and on each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// progressing keeps the Progressing condition, which says whether a rollout has stalled.
func progressing(cs []appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	for _, c := range cs {
		if c.Type == appsv1.DeploymentProgressing {
			return []appsv1.DeploymentCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return nil
}

// withRevision keeps the Deployment revision of an object's annotations.
func withRevision(m metav1.ObjectMeta, annotations map[string]string) metav1.ObjectMeta {
	if r, ok := annotations[revisionAnnotation]; ok {
		m.Annotations = map[string]string{revisionAnnotation: r}
	}
	return m
}

// podForPlan is the part of a pod that roll planning and pod allocations read: owner, triggers
// (addresses, start time, host networking and DNS policy) and phase.
func podForPlan(p *corev1.Pod) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metaForPlan(&p.ObjectMeta),
		Spec:       corev1.PodSpec{HostNetwork: p.Spec.HostNetwork, DNSPolicy: p.Spec.DNSPolicy},
		Status:     corev1.PodStatus{Phase: p.Status.Phase, PodIPs: p.Status.PodIPs, StartTime: p.Status.StartTime},
	}
}

// RollOptions are the roll's scope and triggers.
type RollOptions struct {
	Namespaces        []string // empty: all
	ExcludeNamespaces []string
	Selector          labels.Selector // on the workload's labels (the pod's for bare pods); nil: everything
	Kinds             []string        // default DefaultRollKinds
	Triggers
	// EvictBarePods puts the bare pods that match (as "namespace/pod/name") among the work,
	// to be evicted, instead of among the unmanaged.
	EvictBarePods bool
}

// Triggers say which pods must move: any pod matching one of them.
type Triggers struct {
	PodCIDRs      []netip.Prefix // a pod address inside
	StartedBefore *time.Time     // a pod started before
	// HostNetwork makes StartedBefore match hostNetwork pods whatever their dnsPolicy: they
	// resolve through the node, but got the apiserver's old address in KUBERNETES_SERVICE_HOST.
	HostNetwork bool
}

// RollPlan is what a roll restarts and what it cannot.
type RollPlan struct {
	// Pending maps workload keys (bare pods to evict as "namespace/pod/name") to the number of
	// their pods that match a trigger; Order lists its keys, sorted.
	Pending map[string]int
	Order   []string
	// Unmanaged maps what matches but cannot be rolled ("namespace/kind/name", pods as
	// "namespace/pod/name") to the reason.
	Unmanaged map[string]string
}

type workloadInfo struct {
	kind, namespace, name string
	labels                map[string]string
	unmanaged             string // why it cannot be rolled, or ""
}

// rollIndex is a RollSnapshot's workloads, who owns each pod, and which pods are on their way out.
type rollIndex struct {
	workloads map[string]workloadInfo
	rsOwner   map[string]string
	outgoing  func(*corev1.Pod) bool
}

func indexRoll(s *RollSnapshot) rollIndex {
	workloads := map[string]workloadInfo{}
	for _, d := range s.Deployments {
		w := workloadInfo{KindDeployment, d.Namespace, d.Name, d.Labels, foreignController(d.OwnerReferences)}
		if d.Spec.Paused && w.unmanaged == "" {
			w.unmanaged = "paused Deployment: kubectl rollout resume it first, or roll it yourself"
		}
		workloads[WorkloadKey(d.Namespace, KindDeployment, d.Name)] = w
	}
	for _, d := range s.StatefulSets {
		w := workloadInfo{KindStatefulSet, d.Namespace, d.Name, d.Labels, foreignController(d.OwnerReferences)}
		if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType && w.unmanaged == "" {
			w.unmanaged = "StatefulSet with updateStrategy OnDelete: a restart annotation does not replace its pods; delete them yourself"
		}
		workloads[WorkloadKey(d.Namespace, KindStatefulSet, d.Name)] = w
	}
	for _, d := range s.DaemonSets {
		w := workloadInfo{KindDaemonSet, d.Namespace, d.Name, d.Labels, foreignController(d.OwnerReferences)}
		if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType && w.unmanaged == "" {
			w.unmanaged = "DaemonSet with updateStrategy OnDelete: a restart annotation does not replace its pods; delete them yourself"
		}
		workloads[WorkloadKey(d.Namespace, KindDaemonSet, d.Name)] = w
	}
	return rollIndex{workloads: workloads, rsOwner: replicaSetOwners(s.ReplicaSets), outgoing: outgoingPods(s)}
}

// matchingPods calls fn for every live pod that matches a trigger and is not already being
// replaced by a rollout, with its workload's key ("" and the reason when no restart reaches it).
func (x rollIndex) matchingPods(s *RollSnapshot, t Triggers, fn func(pod *corev1.Pod, key, reason string)) {
	for i := range s.Pods {
		pod := &s.Pods[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		key, reason := podWorkload(pod, x.rsOwner)
		if _, known := x.workloads[key]; key != "" && !known {
			continue // its workload vanished meanwhile
		}
		if matchesTrigger(pod, t) && !x.outgoing(pod) {
			fn(pod, key, reason)
		}
	}
}

// PlanRoll decides what to restart.
func PlanRoll(s *RollSnapshot, o RollOptions) RollPlan {
	p := RollPlan{Pending: map[string]int{}, Unmanaged: map[string]string{}}
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = DefaultRollKinds
	}
	x := indexRoll(s)
	inScope := func(ns string, lbls map[string]string) bool {
		if len(o.Namespaces) > 0 && !slices.Contains(o.Namespaces, ns) {
			return false
		}
		if slices.Contains(o.ExcludeNamespaces, ns) {
			return false
		}
		return o.Selector == nil || o.Selector.Matches(labels.Set(lbls))
	}
	x.matchingPods(s, o.Triggers, func(pod *corev1.Pod, key, reason string) {
		w, known := x.workloads[key]
		lbls := pod.Labels
		if known {
			lbls = w.labels
		}
		switch {
		case !inScope(pod.Namespace, lbls):
		case key == "" && reason == reasonBarePod && o.EvictBarePods:
			p.Pending[PodKey(pod.Namespace, pod.Name)] = 1
		case key == "":
			p.Unmanaged[PodKey(pod.Namespace, pod.Name)] = reason
		case w.unmanaged != "":
			p.Unmanaged[key] = w.unmanaged
		case !slices.ContainsFunc(kinds, func(k string) bool { return strings.EqualFold(k, w.kind) }):
			p.Unmanaged[key] = fmt.Sprintf("kind %s is not in kinds", w.kind)
		default:
			p.Pending[key]++
		}
	})
	p.Order = slices.Sorted(maps.Keys(p.Pending))
	return p
}

// PlannedRoll is what k8scidr_workload_roll holds: the workloads a reviewed plan showed (bare
// pods to evict as PodKeys), the included workloads to roll whatever their pods, the order,
// and the triggers the list was made with.
type PlannedRoll struct {
	Workloads []string
	Include   []string
	First     []string
	Triggers
}

// RollSteps is a planned roll checked against the cluster: the keys to restart (pods to
// evict), first ones first, and what no longer needs it, with the reason.
type RollSteps struct {
	Order     []string
	First     []string
	NotRolled map[string]string
}

// PrepareRoll checks each planned workload against s, read at the start of the apply: one that
// is gone, can no longer be rolled, or has no pod that matches the triggers any more (rolled,
// scaled down or moved since the plan) is not restarted but reported. Included workloads roll
// whenever they exist and can be.
func PrepareRoll(s *RollSnapshot, p PlannedRoll) RollSteps {
	steps := RollSteps{NotRolled: map[string]string{}}
	x := indexRoll(s)
	matched := map[string]int{}
	x.matchingPods(s, p.Triggers, func(pod *corev1.Pod, key, reason string) {
		if key == "" && reason == reasonBarePod {
			key = PodKey(pod.Namespace, pod.Name)
		}
		matched[key]++
	})
	noTrigger := len(p.PodCIDRs) == 0 && p.StartedBefore == nil
	roll := map[string]bool{}
	check := func(raw string, included bool) {
		if ns, name, ok := parsePodKey(raw); ok {
			if matched[PodKey(ns, name)] == 0 && !noTrigger {
				steps.NotRolled[raw] = "no longer a running bare pod that matches the triggers"
				return
			}
			roll[raw] = true
			return
		}
		ns, kind, name, err := ParseWorkloadKey(raw)
		if err != nil {
			steps.NotRolled[raw] = err.Error()
			return
		}
		key := WorkloadKey(ns, kind, name)
		w, ok := x.workloads[key]
		switch {
		case !ok:
			steps.NotRolled[key] = "does not exist"
		case w.unmanaged != "":
			steps.NotRolled[key] = w.unmanaged
		case !included && !noTrigger && matched[key] == 0:
			steps.NotRolled[key] = "no pod matches the triggers any more (rolled, scaled down or moved since the plan)"
		default:
			roll[key] = true
			delete(steps.NotRolled, key)
		}
	}
	for _, key := range p.Workloads {
		check(key, false)
	}
	for _, key := range p.Include {
		check(key, true)
	}
	for _, raw := range p.First {
		if ns, kind, name, err := ParseWorkloadKey(raw); err == nil && roll[WorkloadKey(ns, kind, name)] &&
			!slices.Contains(steps.First, WorkloadKey(ns, kind, name)) {
			steps.First = append(steps.First, WorkloadKey(ns, kind, name))
		}
	}
	rest := slices.DeleteFunc(slices.Sorted(maps.Keys(roll)), func(k string) bool { return slices.Contains(steps.First, k) })
	steps.Order = append(slices.Clone(steps.First), rest...)
	return steps
}

// outgoingPods reports whether a pod belongs to a revision its workload is already rolling
// away from (an older ReplicaSet of a Deployment whose rollout has not stalled at its
// progress deadline, a StatefulSet pod of the current revision while an update rolls out): it
// is being replaced without another restart. Such pods are not counted, so that a plan made
// while a rollout runs (the one an interrupted apply started, say) still holds when that
// rollout ends before the apply. A stalled Deployment's old pods stay: restarting it again
// shows the operator the stall.
func outgoingPods(s *RollSnapshot) func(*corev1.Pod) bool {
	deployRev := map[string]string{}
	for _, d := range s.Deployments {
		stalled := slices.ContainsFunc(d.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
			return c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded"
		})
		if !stalled {
			deployRev[WorkloadKey(d.Namespace, KindDeployment, d.Name)] = d.Annotations[revisionAnnotation]
		}
	}
	oldRS := map[string]bool{} // namespace/replicaset of a Deployment's older revision
	for _, rs := range s.ReplicaSets {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == KindDeployment {
			want := deployRev[WorkloadKey(rs.Namespace, KindDeployment, ref.Name)]
			oldRS[rs.Namespace+"/"+rs.Name] = want != "" && rs.Annotations[revisionAnnotation] != want
		}
	}
	stsUpdate := map[string]string{} // StatefulSets rolling out → the revision they roll to
	for _, st := range s.StatefulSets {
		if st.Status.UpdateRevision != "" && st.Status.UpdateRevision != st.Status.CurrentRevision {
			stsUpdate[WorkloadKey(st.Namespace, KindStatefulSet, st.Name)] = st.Status.UpdateRevision
		}
	}
	return func(pod *corev1.Pod) bool {
		ref := metav1.GetControllerOf(pod)
		switch {
		case ref == nil:
			return false
		case ref.Kind == "ReplicaSet":
			return oldRS[pod.Namespace+"/"+ref.Name]
		case ref.Kind == KindStatefulSet:
			to, rolling := stsUpdate[WorkloadKey(pod.Namespace, KindStatefulSet, ref.Name)]
			return rolling && pod.Labels[appsv1.ControllerRevisionHashLabelKey] != to
		}
		return false
	}
}

const reasonBarePod = "bare pod (no controller): evict it with evict_bare_pods = true, or delete and recreate it yourself"

// replicaSetOwners maps "namespace/replicaset" to the key of the Deployment that controls it
// ("" when none does).
func replicaSetOwners(rss []appsv1.ReplicaSet) map[string]string {
	out := make(map[string]string, len(rss))
	for _, rs := range rss {
		owner := ""
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == KindDeployment {
			owner = WorkloadKey(rs.Namespace, KindDeployment, ref.Name)
		}
		out[rs.Namespace+"/"+rs.Name] = owner
	}
	return out
}

// podWorkload is the key of the workload a restart annotation reaches for this pod, or "" and
// the reason none does.
func podWorkload(pod *corev1.Pod, rsOwner map[string]string) (string, string) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "", reasonBarePod
	}
	switch ref.Kind {
	case "ReplicaSet":
		owner, ok := rsOwner[pod.Namespace+"/"+ref.Name]
		if ok && owner != "" {
			return owner, ""
		}
		return "", "pod of ReplicaSet " + ref.Name + ", which no Deployment owns: scale it down and up yourself"
	case KindStatefulSet, KindDaemonSet:
		return WorkloadKey(pod.Namespace, ref.Kind, ref.Name), ""
	case "Job":
		return "", "pod of Job " + ref.Name + ": it moves when the Job's next pod starts"
	}
	return "", fmt.Sprintf("pod owned by %s %s, which a restart annotation does not reach", ref.Kind, ref.Name)
}

// foreignController says why a workload another controller owns cannot be rolled, or "".
func foreignController(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return fmt.Sprintf("managed by %s %s, which would revert a restart annotation: restart it through that controller", r.Kind, r.Name)
		}
	}
	return ""
}

// matchesTrigger reports whether the pod matches pod_cidrs or started_before.
func matchesTrigger(pod *corev1.Pod, o Triggers) bool {
	if len(o.PodCIDRs) > 0 && !pod.Spec.HostNetwork {
		for _, s := range pod.Status.PodIPs {
			if ip, err := netip.ParseAddr(s.IP); err == nil && slices.ContainsFunc(o.PodCIDRs, func(p netip.Prefix) bool { return p.Contains(ip) }) {
				return true
			}
		}
	}
	if o.StartedBefore != nil && (!pod.Spec.HostNetwork || o.HostNetwork || pod.Spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet) {
		started := pod.CreationTimestamp.Time
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		if started.Before(*o.StartedBefore) {
			return true
		}
	}
	return false
}
