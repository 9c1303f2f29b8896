// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"net/netip"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

const newPool = "10.20.0.0/16"

// waitPodsMoved waits until app has exactly n pods, each running with an address in newPool.
func (e *calicoEnv) waitPodsMoved(app string, n int) {
	e.t.Helper()
	pfx := netip.MustParsePrefix(newPool)
	_, err := e.c.WaitPods(context.Background(), "default", "app="+app, n, func(p corev1.Pod) bool {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		return err == nil && p.Status.Phase == corev1.PodRunning && pfx.Contains(ip)
	})
	if err != nil {
		e.t.Fatalf("%v (calico-ipam: %v)", err, e.ipam.Errors())
	}
}

// TestAccWorkloadRoll_savedPlanChurn applies a saved roll plan after the cluster changed: a
// planned Deployment is deleted, one is rolled by hand, one scales up, one loses a pod, other
// teams' Services, namespaces and pods come and go, and a new Deployment starts in the old
// pool. The apply succeeds, restarts exactly the planned workloads that still have a pod in
// the old pool, names the others in not_rolled with the reason, and the next plan holds exactly
// the new Deployment; after that apply a refreshing plan is empty.
func TestAccWorkloadRoll_savedPlanChurn(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	for name, n := range map[string]int32{"web": 2, "api": 2, "gone": 1, "byhand": 1} {
		e.deployment(name, n)
	}
	if err := e.c.CreateCalicoPool(ctx, e.group, "new", map[string]any{"cidr": newPool, "ipipMode": "Always", "natOutgoing": true}); err != nil {
		t.Fatal(err)
	}
	e.setPool(oldPoolName, true)
	w := newCLIWorkspace(t, rollConfig(e, "", ""))
	w.planFile()
	expect(t, "planned workloads", w.planned(rollAddr, "plan.workloads"), strListCheck("default/deployment/api",
		"default/deployment/byhand", "default/deployment/gone", "default/deployment/web"))

	churn := newClusterChurn(t, e.c.Kube)
	churn.round("")
	churn.round("")
	deps := e.c.Kube.AppsV1().Deployments("default")
	if err := deps.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.restart("byhand")
	e.waitPodsMoved("byhand", 1) // its own rollout is done: the only pod is in the new pool
	scale, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 4
	if _, err := deps.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := e.waitPods("api", 2)
	if err := e.c.Kube.CoreV1().Pods("default").Delete(ctx, api[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A new Deployment in the old pool (enabled just for it, as a forgotten stage would).
	e.setPool("new", true)
	e.setPool(oldPoolName, false)
	podsIn(t, e.deployment("late", 2), oldPoolCIDR)
	e.setPool(oldPoolName, true)
	e.setPool("new", false)

	out := w.applyFile()
	if !diagRE("Planned Restarts That No Longer Apply Were Not Made", "default/deployment/byhand: no pod matches",
		"default/deployment/gone: does not exist").MatchString(out) {
		t.Errorf("the apply does not name the restarts that no longer apply:\n%s", out)
	}
	expect(t, "rolled", w.stateValue(rollAddr, "rolled"), knownvalue.MapExact(map[string]knownvalue.Check{
		"default/deployment/web": knownvalue.NotNull(), "default/deployment/api": knownvalue.NotNull()}))
	expect(t, "not_rolled", w.stateValue(rollAddr, "not_rolled"), knownvalue.MapExact(map[string]knownvalue.Check{
		"default/deployment/gone":   knownvalue.StringExact("does not exist"),
		"default/deployment/byhand": knownvalue.StringExact("no pod matches the triggers any more (rolled, scaled down or moved since the plan)"),
	}))
	e.waitPodsMoved("web", 4)
	e.waitPodsMoved("api", 2)
	d, err := deps.Get(ctx, "byhand", metav1.GetOptions{})
	if err != nil || d.Generation != 2 {
		t.Errorf("byhand was restarted again by the apply (generation %d, want 2: created, rolled by hand; %v)", d.Generation, err)
	}

	w.planFile()
	expect(t, "the next plan", w.planned(rollAddr, "plan.workloads"), strListCheck("default/deployment/late"))
	w.applyFile()
	e.waitPodsMoved("late", 2)
	w.converged()
}
