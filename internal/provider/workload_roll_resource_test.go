// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}},
	}
}

func (e *calicoEnv) statefulSet(name string, replicas int32, strategy appsv1.StatefulSetUpdateStrategyType) {
	e.t.Helper()
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: strategy}, PodManagementPolicy: appsv1.ParallelPodManagement},
	}
	if _, err := e.c.Kube.AppsV1().StatefulSets("default").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitPods(name, int(replicas))
}

func (e *calicoEnv) daemonSet(name string) {
	e.t.Helper()
	d := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: podTemplate(name)},
	}
	if _, err := e.c.Kube.AppsV1().DaemonSets("default").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitPods(name, 2)
}

// createDeployment creates a Deployment as given and waits for want pods with addresses.
func (e *calicoEnv) createDeployment(d *appsv1.Deployment, want int) {
	e.t.Helper()
	if _, err := e.c.Kube.AppsV1().Deployments("default").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if want > 0 {
		e.waitPods(d.Name, want)
	}
}

func deploymentOf(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name)},
	}
}

// setPool enables or disables a pool through the cluster, as another stage would.
func (e *calicoEnv) setPool(name string, disabled bool) {
	e.t.Helper()
	p, err := e.api.GetIPPool(context.Background(), name)
	if err != nil || p == nil {
		e.t.Fatalf("pool %s: %v", name, err)
	}
	s := p.Settings
	s.Disabled = disabled
	if _, err := e.api.UpdateIPPool(context.Background(), "test", name, s, []string{"disabled"}); err != nil {
		e.t.Fatal(err)
	}
}

// rollConfig rolls what has a pod in the old pool, web first: dataExtra goes to the data
// source, extra to the resource.
func rollConfig(e *calicoEnv, dataExtra, extra string) string {
	return e.provider() + rollHCL("pods", fmt.Sprintf("  pod_cidrs = [%q]\n%s", oldPoolCIDR, dataExtra),
		"  first = [\"default/deployment/web\"]\n"+extra)
}

const rollAddr = "k8scidr_workload_roll.pods"

// The pool-migration roll: exactly the workloads with a pod in the old pool are restarted (web
// first), their pods land in the new pool, and what cannot be rolled is listed with the reason.
func TestAccWorkloadRoll_poolMigration(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	e.deployment("web", 3)
	e.statefulSet("db", 2, appsv1.RollingUpdateStatefulSetStrategyType)
	e.statefulSet("ondel", 1, appsv1.OnDeleteStatefulSetStrategyType)
	e.daemonSet("agent")
	e.createDeployment(deploymentOf("paused", 1), 1)
	if _, err := e.c.Kube.AppsV1().Deployments("default").Patch(ctx, "paused", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	host := deploymentOf("hostnet", 1)
	host.Spec.Template.Spec.HostNetwork = true
	e.createDeployment(host, 0)
	owner, err := e.c.Kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "operator"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	operated := deploymentOf("operated", 1)
	operated.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "operator", UID: owner.UID, Controller: ptr.To(true)}}
	e.createDeployment(operated, 1)
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: map[string]string{"app": "bare"}}, Spec: podTemplate("bare").Spec}
	if _, err := e.c.Kube.CoreV1().Pods("default").Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPods("bare", 1)

	// The pool stages: a new pool, the old one disabled.
	if err := e.c.CreateCalicoPool(ctx, e.group, "new", map[string]any{"cidr": "10.20.0.0/16", "ipipMode": "Always", "natOutgoing": true}); err != nil {
		t.Fatal(err)
	}
	e.setPool(oldPoolName, true)

	const data = "data.k8scidr_workload_restarts.pods"
	reason := func(s string) knownvalue.Check { return knownvalue.StringRegexp(regexp.MustCompile(s)) }
	moved := func(apps ...string) {
		t.Helper()
		for _, app := range apps {
			n := map[string]int{"web": 3, "db": 2, "agent": 2, "late": 2}[app]
			podsIn(t, e.waitPods(app, n), "10.20.0.0/16")
		}
	}
	w := newCLIWorkspace(t, rollConfig(e, "", ""))
	w.planFile()
	expect(t, "planned workloads", w.planned(rollAddr, "plan.workloads"),
		strListCheck("default/daemonset/agent", "default/deployment/web", "default/statefulset/db"))
	w.applyFile()
	w.converged()
	expect(t, "pods", w.stateValue(data, "pods"), knownvalue.MapExact(map[string]knownvalue.Check{
		"default/deployment/web": knownvalue.Int64Exact(3), "default/statefulset/db": knownvalue.Int64Exact(2),
		"default/daemonset/agent": knownvalue.Int64Exact(2)}))
	expect(t, "unmanaged", w.stateValue(data, "unmanaged"), knownvalue.MapExact(map[string]knownvalue.Check{
		"default/deployment/paused":   reason("^paused Deployment"),
		"default/statefulset/ondel":   reason("updateStrategy OnDelete"),
		"default/deployment/operated": reason("^managed by ConfigMap operator"),
		"default/pod/bare":            reason("^bare pod"),
	}))
	expect(t, "rolled", w.stateValue(rollAddr, "rolled"), knownvalue.MapSizeExact(3))
	expect(t, "completed_at", w.stateValue(rollAddr, "completed_at"), knownvalue.StringRegexp(rfc3339RE))
	moved("web", "db", "agent")

	// Eviction honours PodDisruptionBudgets: with one that allows no disruption, the bare pod
	// stays and the apply says why.
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bare"}}}}
	if _, err := e.c.Kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.write(rollConfig(e, "  evict_bare_pods = true\n", ""))
	w.planFile()
	expect(t, "planned eviction", w.planned(rollAddr, "plan.workloads"), strListCheck("default/pod/bare"))
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Rollout Failed", "default/pod/bare:", "PodDisruptionBudget refuses the eviction").MatchString(out) {
		t.Errorf("eviction under a PodDisruptionBudget: %v\n%s", err, out)
	}

	// Without it, the bare pod is evicted.
	if err := e.c.Kube.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "bare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.planFile()
	w.applyFile()
	if _, err := e.c.WaitPods(ctx, "default", "app=bare", 0, func(corev1.Pod) bool { return true }); err != nil {
		t.Fatal(err)
	}
	w.converged()

	// Pods back in the old pool (it was enabled again) show up as a diff, and the apply moves
	// them once the old pool is disabled again.
	e.setPool(oldPoolName, false)
	e.setPool("new", true)
	podsIn(t, e.deployment("late", 2), oldPoolCIDR)
	e.setPool("new", false)
	e.setPool(oldPoolName, true)
	w.planFile()
	if got := w.plannedActions(rollAddr); !slices.Equal(got, []string{"update"}) {
		t.Errorf("actions %v, want update", got)
	}
	expect(t, "late", w.planned(rollAddr, "plan.workloads"), strListCheck("default/deployment/late"))
	w.applyFile()
	moved("late")
	w.converged()
}

// A rollout that cannot progress fails within the timeout, naming the workload, its status and
// the stuck pods.
func TestAccWorkloadRoll_stuckRollout(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	stuck := deploymentOf("web", 2)
	stuck.Spec.ProgressDeadlineSeconds = ptr.To[int32](3)
	e.createDeployment(stuck, 2)
	e.statefulSet("db", 1, appsv1.RollingUpdateStatefulSetStrategyType)
	// No pool is left enabled: new pods never get an address.
	e.setPool(oldPoolName, true)
	noFirst := e.provider() + rollHCL("pods", fmt.Sprintf("  pod_cidrs = [%q]", oldPoolCIDR), "  timeouts {\n    create = \"20s\"\n  }")
	w := newCLIWorkspace(t, rollConfig(e, "", "  timeouts {\n    create = \"20s\"\n  }\n"))
	// web goes first and fails at its progress deadline: db is not touched.
	w.planFile()
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Rollout Failed", "default/deployment/web:", `deployment "web" exceeded its progress deadline`,
		"Rolled before the failure: none").MatchString(out) {
		t.Errorf("first web: %v\n%s", err, out)
	}
	db, err := e.c.Kube.AppsV1().StatefulSets("default").Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil || db.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != "" {
		t.Errorf("db was restarted after web failed first (%v)", err)
	}
	// Both at once: the StatefulSet has no progress deadline, so the timeout ends its wait, and
	// the error says where it stands.
	w.write(noFirst)
	w.planFile()
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Rollout Failed", "default/deployment/web:", "exceeded its progress deadline",
		"default/statefulset/db:", "no rollout progress before the timeout", "pods not ready: db-0 (Pending").MatchString(out) {
		t.Errorf("both: %v\n%s", err, out)
	}
	// continue_on_error: the failure is a warning, nothing counts as rolled, and the next plan
	// shows web again (its old pods still hold old-pool addresses; db's only pod was replaced by
	// one still waiting for an address, which matches nothing).
	w.write(strings.Replace(noFirst, "timeouts", "continue_on_error = true\n  timeouts", 1))
	w.planFile()
	if out := w.applyFile(); !strings.Contains(out, "Some Rollouts Failed") {
		t.Errorf("continue_on_error:\n%s", out)
	}
	expect(t, "rolled", w.stateValue(rollAddr, "rolled"), knownvalue.MapSizeExact(0))
	w.planFile()
	expect(t, "web again", w.planned(rollAddr, "plan.workloads"), strListCheck("default/deployment/web"))

	// "wait_for_rollout: Wait for each rollout to finish": with false the restart is made and
	// the apply ends, though the rollout cannot progress.
	ctx := context.Background()
	web := func() *appsv1.Deployment {
		t.Helper()
		d, err := e.c.Kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	restartedAt := web().Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]
	w.write(strings.Replace(noFirst, "timeouts", "wait_for_rollout = false\n  timeouts", 1))
	w.planFile()
	w.applyFile()
	after := web()
	if after.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == restartedAt {
		t.Errorf("wait_for_rollout = false: web was not restarted")
	}
	if after.Status.UpdatedReplicas == *after.Spec.Replicas && after.Status.UnavailableReplicas == 0 {
		t.Errorf("web rolled out, so the test cannot tell whether the apply waited: %+v", after.Status)
	}
	// "Destroy forgets": nothing in the cluster changes.
	if out, err := w.run("destroy", "-auto-approve"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	if d := web(); d.Generation != after.Generation || !reflect.DeepEqual(d.Spec.Template.Annotations, after.Spec.Template.Annotations) || d.Spec.Paused {
		t.Errorf("the roll's destroy changed web: generation %d -> %d, annotations %v -> %v, paused %t",
			after.Generation, d.Generation, after.Spec.Template.Annotations, d.Spec.Template.Annotations, d.Spec.Paused)
	}
}

// Plan-time mistakes name the attribute, and need no cluster.
func TestAccWorkloadRoll_invalid(t *testing.T) {
	testAccPreCheck(t)
	data := func(body string) string {
		return testAccProviderConfig() + "data \"k8scidr_workload_restarts\" \"x\" {\n" + body + "}\n"
	}
	res := func(body string) string {
		return testAccProviderConfig() + "resource \"k8scidr_workload_roll\" \"x\" {\n" + body + "}\n"
	}
	var steps []resource.TestStep
	for _, c := range []struct {
		config string
		want   []string
	}{
		{data(""), []string{"No Trigger", "Set pod_cidrs"}},
		{data("  pod_cidrs = [\"10.10.0.1/18\"]\n"), []string{"Invalid CIDR", `"10.10.0.1/18"`}},
		{data("  started_before = \"yesterday\"\n"), []string{"Invalid Time", "RFC 3339"}},
		{data("  pod_cidrs = [\"10.10.0.0/18\"]\n  selector = \"a in (\"\n"), []string{"Invalid Label Selector"}},
		{data("  pod_cidrs = [\"10.10.0.0/18\"]\n  kinds = [\"Job\"]\n"), []string{"value must be one of"}},
		{res(""), []string{"Nothing To Roll", "Set plan"}},
		{res("  plan = { workloads = [\"default/deployment/web\"], pod_cidrs = null, started_before = null, include_host_network = null }\n"), []string{"Triggers Missing", "pod_cidrs"}},
		{res("  include = [\"kube-system/calico-node\"]\n"), []string{"Invalid Workload", "namespace/kind/name"}},
		{res("  include = [\"kube-system/job/x\"]\n"), []string{"Invalid Workload", `kind "job"`}},
		{res("  include = [\"a/deployment/b\"]\n  first = [\"default/deployment/absent\", \"x\"]\n"), []string{"Invalid Workload", "first"}},
		{res("  include = [\"a/deployment/b\"]\n  parallelism = 0\n"), []string{"parallelism", "between 1 and 100"}},
		{res("  plan = { workloads = [\"a/deployment/b\"], pod_cidrs = [\"10.10.0.0/18\"], started_before = \"today\", include_host_network = null }\n"), []string{"Invalid Time"}},
	} {
		steps = append(steps, resource.TestStep{Config: c.config, PlanOnly: true, ExpectError: diagRE(c.want...)})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// started_before from a resource with changes in the same run makes the data source wait for
// the apply: the plan says it cannot show the restarts, and the apply rolls the pods started
// before it (hostNetwork pods only with ClusterFirstWithHostNet). include rolls a workload
// outside the data source's scope regardless of the triggers, and an included workload that
// does not exist is a plan warning and not rolled.
func TestAccWorkloadRoll_startedBefore(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	e.deployment("web", 2)
	for name, policy := range map[string]corev1.DNSPolicy{"hostdns": corev1.DNSClusterFirstWithHostNet, "hostplain": corev1.DNSClusterFirst} {
		d := deploymentOf(name, 1)
		d.Spec.Template.Spec.HostNetwork, d.Spec.Template.Spec.DNSPolicy = true, policy
		e.createDeployment(d, 0)
		if _, err := e.c.WaitPods(ctx, "default", "app="+name, 1, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	idle := deploymentOf("idle", 1)
	if _, err := e.c.Kube.AppsV1().Deployments("other").Create(ctx, idle, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.WaitPodIPs(ctx, "other", "app=idle", 1); err != nil {
		t.Fatal(err)
	}
	// Every pod so far started before movedAt; pods of the rollouts start after it.
	movedAt := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(movedAt) + 100*time.Millisecond)
	config := e.provider() + fmt.Sprintf(`
resource "terraform_data" "dns_moved" {
  input = %q
}
`, movedAt.UTC().Format(time.RFC3339)) + rollHCL("dns", `  namespaces     = ["default"]
  started_before = terraform_data.dns_moved.output`, `  include = ["other/deployment/idle", "other/deployment/absent"]`)
	const addr = "k8scidr_workload_roll.dns"
	w := newCLIWorkspace(t, config)
	out := w.planFile()
	if !diagRE("Workloads To Restart Not Known Until Apply", "restart workloads nobody reviewed").MatchString(out) {
		t.Errorf("the plan does not say the restarts are unknown:\n%s", out)
	}
	if !diagRE("Workload Not Found", "other/deployment/absent does not exist").MatchString(out) {
		t.Errorf("the plan does not warn about the absent included workload:\n%s", out)
	}
	if !w.plannedUnknown(addr, "plan.workloads") {
		t.Error("workloads must be unknown at plan")
	}
	w.applyFile()
	expect(t, "workloads", w.stateValue(addr, "plan.workloads"), strListCheck("default/deployment/hostdns", "default/deployment/web"))
	expect(t, "rolled", w.stateValue(addr, "rolled"), knownvalue.MapExact(map[string]knownvalue.Check{
		"default/deployment/web": knownvalue.NotNull(), "default/deployment/hostdns": knownvalue.NotNull(),
		"other/deployment/idle": knownvalue.NotNull(),
	}))
	expect(t, "not_rolled", w.stateValue(addr, "not_rolled"), knownvalue.MapExact(map[string]knownvalue.Check{
		"other/deployment/absent": knownvalue.StringExact("does not exist")}))
	for ns, apps := range map[string][]string{"default": {"web", "hostdns", "hostplain"}, "other": {"idle"}} {
		for _, app := range apps {
			d, err := e.c.Kube.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if restarted := d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != ""; restarted != (app != "hostplain") {
				t.Errorf("%s/%s restarted = %t", ns, app, restarted)
			}
		}
	}
	// Included once: the next plan does not roll idle again.
	w.converged()
}

// A rollout is complete while the pods it replaced still terminate, and a terminating pod runs
// with the resolv.conf and Service IPs it started with (stage 4's bridge checks count it): the
// roll ends once they are gone. The cluster's deleted pods terminate for 4 s.
func TestAccWorkloadRoll_waitsForReplacedPods(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{PodTermination: 4 * time.Second})
	if _, err := c.Kube.AppsV1().Deployments("default").Create(ctx, deploymentOf("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPods(ctx, "default", "app=web", 2, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
		t.Fatal(err)
	}
	startedBefore := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(startedBefore) + 100*time.Millisecond)
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+rollHCL("dns", fmt.Sprintf("  namespaces     = [\"default\"]\n  started_before = %q",
		startedBefore.UTC().Format(time.RFC3339)), ""))
	w.planFile()
	expect(t, "workloads", w.planned("k8scidr_workload_roll.dns", "plan.workloads"), strListCheck("default/deployment/web"))
	w.applyFile()
	pods, err := c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
			t.Errorf("pod %s is still terminating after the roll (deleted at %s)", p.Name, p.DeletionTimestamp)
		case p.Status.StartTime == nil || p.Status.StartTime.Time.Before(startedBefore):
			t.Errorf("pod %s was not replaced (started %v)", p.Name, p.Status.StartTime)
		default:
			running++
		}
	}
	if running != 2 {
		t.Errorf("%d new web pods after the roll, want 2", running)
	}
}
