// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package workloadroll

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func rollPod(ns, name, ownerKind, owner, ip string, started time.Time) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: started}},
	}
	if ip != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	if ownerKind != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: ownerKind, Name: owner, Controller: ptr.To(true)}}
	}
	return p
}

func rollSnapshot() *RollSnapshot {
	old, young := t0.Add(-time.Hour), t0.Add(time.Hour)
	host := rollPod("kube-system", "node-exporter-1", "DaemonSet", "node-exporter", "192.168.0.1", old)
	host.Spec.HostNetwork = true
	hostDNS := rollPod("kube-system", "calico-node-1", "DaemonSet", "calico-node", "192.168.0.1", old)
	hostDNS.Spec.HostNetwork, hostDNS.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
	ondelete := appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "legacy"}}
	ondelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	return &RollSnapshot{
		Pods: []corev1.Pod{
			rollPod("app", "web-1", "ReplicaSet", "web-abc", "10.10.0.5", old),
			rollPod("app", "web-2", "ReplicaSet", "web-abc", "10.20.0.5", young),
			rollPod("app", "orphan-rs-1", "ReplicaSet", "orphan-rs", "10.10.0.6", old),
			rollPod("app", "bare", "", "", "10.10.0.7", old),
			rollPod("app", "job-1", "Job", "backup", "10.10.0.8", old),
			rollPod("db", "legacy-0", "StatefulSet", "legacy", "10.10.0.9", old),
			rollPod("db", "pg-0", "StatefulSet", "pg", "10.20.0.9", old),
			rollPod("kube-system", "coredns-1", "ReplicaSet", "coredns-x", "10.10.0.10", old),
			host, hostDNS,
		},
		Deployments: []appsv1.Deployment{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Labels: map[string]string{"tier": "web"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}},
		},
		StatefulSets: []appsv1.StatefulSet{ondelete, {ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg"}}},
		DaemonSets: []appsv1.DaemonSet{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-exporter"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "calico-node"}},
		},
		ReplicaSets: []appsv1.ReplicaSet{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-abc", OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-x", OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "coredns", Controller: ptr.To(true)}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "orphan-rs"}},
		},
	}
}

func TestPlanRoll_podCIDRs(t *testing.T) {
	oldPool := Triggers{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.0.0/18")}}
	p := PlanRoll(rollSnapshot(), RollOptions{Triggers: oldPool})
	want := map[string]int{"app/deployment/web": 1, "kube-system/deployment/coredns": 1}
	if !maps.Equal(p.Pending, want) {
		t.Errorf("pending %v, want %v", p.Pending, want)
	}
	if !slices.Equal(p.Order, []string{"app/deployment/web", "kube-system/deployment/coredns"}) {
		t.Errorf("order %v, want sorted", p.Order)
	}
	for key, reason := range map[string]string{
		"app/pod/orphan-rs-1":   "no Deployment owns",
		"app/pod/bare":          "bare pod",
		"app/pod/job-1":         "Job backup",
		"db/statefulset/legacy": "OnDelete",
	} {
		if !strings.Contains(p.Unmanaged[key], reason) {
			t.Errorf("unmanaged[%s] = %q, want it to say %q", key, p.Unmanaged[key], reason)
		}
	}
	if len(p.Unmanaged) != 4 {
		t.Errorf("unmanaged %v", p.Unmanaged)
	}
	// With evict_bare_pods the bare pod is work: evicted, as app/pod/bare.
	p = PlanRoll(rollSnapshot(), RollOptions{Triggers: oldPool, EvictBarePods: true})
	if p.Pending["app/pod/bare"] != 1 || len(p.Unmanaged) != 3 || !slices.Contains(p.Order, "app/pod/bare") {
		t.Errorf("evict_bare_pods: pending %v unmanaged %v", p.Pending, p.Unmanaged)
	}
}

func TestPlanRoll_startedBeforeAndScope(t *testing.T) {
	s := rollSnapshot()
	p := PlanRoll(s, RollOptions{Triggers: Triggers{StartedBefore: &t0}, Kinds: []string{KindDeployment, KindDaemonSet}, ExcludeNamespaces: []string{"app"}})
	// hostNetwork pods match only with ClusterFirstWithHostNet; StatefulSets are out of kinds.
	want := map[string]int{"kube-system/deployment/coredns": 1, "kube-system/daemonset/calico-node": 1}
	if !maps.Equal(p.Pending, want) {
		t.Errorf("pending %v, want %v", p.Pending, want)
	}
	if !strings.Contains(p.Unmanaged["db/statefulset/pg"], "not in kinds") {
		t.Errorf("unmanaged %v: pg is a StatefulSet outside kinds", p.Unmanaged)
	}
	// For the apiserver's move every hostNetwork pod counts: it got the old KUBERNETES_SERVICE_HOST.
	p = PlanRoll(s, RollOptions{Triggers: Triggers{StartedBefore: &t0, HostNetwork: true}, Kinds: []string{KindDeployment, KindDaemonSet}, ExcludeNamespaces: []string{"app"}})
	want["kube-system/daemonset/node-exporter"] = 1
	if !maps.Equal(p.Pending, want) {
		t.Errorf("include_host_network: pending %v, want %v", p.Pending, want)
	}
	sel, _ := labels.Parse("tier=web")
	p = PlanRoll(s, RollOptions{Triggers: Triggers{StartedBefore: &t0}, Selector: sel})
	if !maps.Equal(p.Pending, map[string]int{"app/deployment/web": 1}) {
		t.Errorf("with selector tier=web: pending %v", p.Pending)
	}
}

// PrepareRoll re-checks the planned list at apply: what no longer matches, is gone or can no
// longer be rolled is reported, never restarted; included workloads roll whatever their pods.
func TestPrepareRoll(t *testing.T) {
	oldPool := Triggers{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.0.0/18")}}
	s := rollSnapshot()
	plan := PlanRoll(s, RollOptions{Triggers: oldPool, EvictBarePods: true})
	steps := PrepareRoll(s, PlannedRoll{Workloads: plan.Order, First: []string{"kube-system/Deployment/coredns"}, Triggers: oldPool})
	if want := []string{"kube-system/deployment/coredns", "app/deployment/web", "app/pod/bare"}; !slices.Equal(steps.Order, want) ||
		!slices.Equal(steps.First, want[:1]) || len(steps.NotRolled) != 0 {
		t.Fatalf("unchanged cluster: order %v first %v not rolled %v", steps.Order, steps.First, steps.NotRolled)
	}
	// Churn between plan and apply: web rolled by someone else (its pod now in the new pool),
	// coredns paused, the bare pod gone; an included DaemonSet rolls, an absent one is reported.
	s.Pods = slices.DeleteFunc(s.Pods, func(p corev1.Pod) bool { return p.Name == "bare" || p.Name == "web-1" })
	s.Deployments[1].Spec.Paused = true
	steps = PrepareRoll(s, PlannedRoll{Workloads: plan.Order, Include: []string{"kube-system/daemonset/node-exporter", "x/deployment/absent"},
		First: []string{"kube-system/deployment/coredns"}, Triggers: oldPool})
	if !slices.Equal(steps.Order, []string{"kube-system/daemonset/node-exporter"}) {
		t.Errorf("churned: order %v", steps.Order)
	}
	for key, reason := range map[string]string{
		"app/deployment/web":             "no pod matches the triggers any more",
		"kube-system/deployment/coredns": "paused Deployment",
		"app/pod/bare":                   "no longer a running bare pod",
		"x/deployment/absent":            "does not exist",
	} {
		if !strings.Contains(steps.NotRolled[key], reason) {
			t.Errorf("not rolled %s = %q, want %q", key, steps.NotRolled[key], reason)
		}
	}
}

// Pods of a revision their workload is already rolling away from are not pending: the rollout
// replaces them, and a plan counting them would not hold once it ends.
func TestPlanRoll_rolloutInProgress(t *testing.T) {
	old := t0.Add(-time.Hour)
	rev := func(r string) map[string]string { return map[string]string{revisionAnnotation: r} }
	owned := func(name, owner string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "app", Name: name, Annotations: rev(map[string]string{"web-1": "1", "web-2": "2"}[name]),
			OwnerReferences: []metav1.OwnerReference{{Kind: KindDeployment, Name: owner, Controller: ptr.To(true)}}}
	}
	stsOld, stsNew := rollPod("app", "db-0", "StatefulSet", "db", "", old), rollPod("app", "db-1", "StatefulSet", "db", "", old)
	stsOld.Labels[appsv1.ControllerRevisionHashLabelKey] = "db-aaa"
	stsNew.Labels[appsv1.ControllerRevisionHashLabelKey] = "db-bbb"
	s := &RollSnapshot{
		Pods: []corev1.Pod{
			rollPod("app", "a", "ReplicaSet", "web-1", "", old), // the old revision: being replaced
			rollPod("app", "b", "ReplicaSet", "web-2", "", old), // the current one: pending
			stsOld, stsNew,
		},
		Deployments:  []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Annotations: rev("2")}}},
		ReplicaSets:  []appsv1.ReplicaSet{{ObjectMeta: owned("web-1", "web")}, {ObjectMeta: owned("web-2", "web")}},
		StatefulSets: []appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}, Status: appsv1.StatefulSetStatus{CurrentRevision: "db-aaa", UpdateRevision: "db-bbb"}}},
	}
	p := PlanRoll(s, RollOptions{Triggers: Triggers{StartedBefore: &t0}})
	want := map[string]int{"app/deployment/web": 1, "app/statefulset/db": 1}
	if !maps.Equal(p.Pending, want) {
		t.Errorf("pending %v, want %v", p.Pending, want)
	}
	// A rollout stalled at its progress deadline replaces nothing more: its old pods count.
	s.Deployments[0].Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing,
		Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	if p := PlanRoll(s, RollOptions{Triggers: Triggers{StartedBefore: &t0}}); p.Pending["app/deployment/web"] != 2 {
		t.Errorf("stalled: pending %v, want web's 2 pods", p.Pending)
	}
}

func TestNewlyIncluded(t *testing.T) {
	for _, c := range []struct {
		before, now, want []string
	}{
		{nil, []string{"kube-system/DaemonSet/calico-node", "app/pod/p"}, []string{"kube-system/daemonset/calico-node", "app/pod/p"}},
		{[]string{"kube-system/daemonset/calico-node"}, []string{"kube-system/DaemonSet/calico-node"}, nil},
		{[]string{"a/deployment/x"}, []string{"a/deployment/x", "a/Deployment/y", "a/deployment/y"}, []string{"a/deployment/y"}},
		{[]string{"a/deployment/x"}, nil, nil},
	} {
		if got := NewlyIncluded(c.before, c.now); !slices.Equal(got, c.want) {
			t.Errorf("NewlyIncluded(%q, %q) = %q, want %q", c.before, c.now, got, c.want)
		}
	}
}

// TestPodForPlan_fromPlanPods: the plan's shared pod list (k8sops.PlanPod) keeps all that
// podForPlan keeps, so the data sources that read it plan as from a list of their own.
func TestPodForPlan_fromPlanPods(t *testing.T) {
	now := metav1.NewTime(t0)
	p := rollPod("app", "web-1", "ReplicaSet", "web-5d8", "100.96.0.7", t0)
	p.CreationTimestamp, p.DeletionTimestamp = now, &now
	p.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3"}
	p.Spec = corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet, NodeName: "n1",
		Containers: []corev1.Container{{Name: "web", Image: "web"}}}
	p.Status.PodIP = "100.96.0.7"
	want := podForPlan(&p)
	if want.Spec.HostNetwork != true || want.Status.StartTime == nil || want.DeletionTimestamp == nil {
		t.Fatalf("fixture: podForPlan kept %+v, want the triggers it reads", want)
	}
	listed := k8sops.PlanPod(&p)
	if got := podForPlan(&listed); !reflect.DeepEqual(got, want) {
		t.Fatalf("podForPlan of the plan's list:\n %+v\nwant\n %+v", got, want)
	}
}
