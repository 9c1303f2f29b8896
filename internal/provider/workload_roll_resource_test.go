package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
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

func rollConfig(e *calicoEnv, extra string) string {
	return e.provider() + fmt.Sprintf(`
resource "k8scidr_workload_roll" "pods" {
  pod_cidrs = [%q]
  first     = ["default/deployment/web"]
%s}
`, oldPoolCIDR, extra)
}

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

	const addr = "k8scidr_workload_roll.pods"
	pending := func(m map[string]int64) knownvalue.Check {
		checks := map[string]knownvalue.Check{}
		for k, v := range m {
			checks[k] = knownvalue.Int64Exact(v)
		}
		return knownvalue.MapExact(checks)
	}
	reason := func(s string) knownvalue.Check { return knownvalue.StringRegexp(regexp.MustCompile(s)) }
	unmanaged := knownvalue.MapExact(map[string]knownvalue.Check{
		"default/deployment/paused":   reason("^paused Deployment"),
		"default/statefulset/ondel":   reason("updateStrategy OnDelete"),
		"default/deployment/operated": reason("^managed by ConfigMap operator"),
		"default/pod/bare":            reason("^bare pod"),
	})
	moved := func(apps ...string) func(*terraform.State) error {
		return func(*terraform.State) error {
			for _, app := range apps {
				n := map[string]int{"web": 3, "db": 2, "agent": 2, "late": 2}[app]
				podsIn(t, e.waitPods(app, n), "10.20.0.0/16")
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: rollConfig(e, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("pending"), pending(map[string]int64{
						"default/deployment/web": 3, "default/statefulset/db": 2, "default/daemonset/agent": 2})),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("unmanaged"), unmanaged),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("rolled"), knownvalue.MapSizeExact(3)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("completed_at"), knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-`))),
				},
				Check: moved("web", "db", "agent"),
			},
			{
				// Eviction honours PodDisruptionBudgets: with one that allows no disruption, the
				// bare pod stays and the apply says why.
				PreConfig: func() {
					pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: policyv1.PodDisruptionBudgetSpec{
						MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bare"}}}}
					if _, err := e.c.Kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:      rollConfig(e, "  evict_bare_pods = true\n"),
				ExpectError: diagRE("Rollout Failed", "default/pod/bare:", "PodDisruptionBudget refuses the eviction"),
			},
			{
				// Bare pods are evicted only when asked.
				PreConfig: func() {
					if err := e.c.Kube.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "bare", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: rollConfig(e, "  evict_bare_pods = true\n"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("pending"), pending(map[string]int64{"default/pod/bare": 1})),
				}},
				Check: func(*terraform.State) error {
					_, err := e.c.WaitPods(ctx, "default", "app=bare", 0, func(corev1.Pod) bool { return true })
					return err
				},
			},
			{
				// Pods back in the old pool (it was enabled again) show up as a diff, and the
				// apply moves them once the old pool is disabled again.
				PreConfig: func() {
					e.setPool(oldPoolName, false)
					e.setPool("new", true)
					podsIn(t, e.deployment("late", 2), oldPoolCIDR)
					e.setPool("new", false)
					e.setPool(oldPoolName, true)
				},
				Config: rollConfig(e, "  evict_bare_pods = true\n"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("pending"), pending(map[string]int64{"default/deployment/late": 2})),
				}},
				Check: moved("late"),
			},
		},
	})
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
	noFirst := e.provider() + fmt.Sprintf(`
resource "k8scidr_workload_roll" "pods" {
  pod_cidrs = [%q]
  timeouts  = { create = "20s" }
}
`, oldPoolCIDR)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// web goes first and fails at its progress deadline: db is not touched.
				Config: rollConfig(e, "  timeouts = { create = \"20s\" }\n"),
				ExpectError: diagRE("Rollout Failed", "default/deployment/web:", `deployment "web" exceeded its progress deadline`,
					"Rolled before the failure: none"),
			},
			{
				// Both at once: the StatefulSet has no progress deadline, so the timeout ends its
				// wait, and the error says where it stands.
				PreConfig: func() {
					db, err := e.c.Kube.AppsV1().StatefulSets("default").Get(context.Background(), "db", metav1.GetOptions{})
					if err != nil || db.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != "" {
						t.Errorf("db was restarted after web failed first (%v)", err)
					}
				},
				Config: noFirst,
				ExpectError: diagRE("Rollout Failed", "default/deployment/web:", "exceeded its progress deadline",
					"default/statefulset/db:", "no rollout progress before the timeout", "pods not ready: db-0 (Pending"),
			},
			{
				// continue_on_error: the failure is a warning, nothing counts as rolled, and the next
				// plan shows web again (its old pods still hold old-pool addresses; db's only pod was
				// replaced by one still waiting for an address, which matches nothing).
				Config: strings.Replace(noFirst, "timeouts", "continue_on_error = true\n  timeouts", 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("k8scidr_workload_roll.pods", tfjsonpath.New("rolled"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				},
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// Plan-time mistakes name the attribute.
func TestAccWorkloadRoll_invalid(t *testing.T) {
	testAccPreCheck(t)
	res := func(body string) string {
		return testAccProviderConfig() + "resource \"k8scidr_workload_roll\" \"x\" {\n" + body + "}\n"
	}
	var steps []resource.TestStep
	for _, c := range []struct {
		body string
		want []string
	}{
		{"", []string{"No Trigger", "Set pod_cidrs"}},
		{"  pod_cidrs = [\"10.10.0.1/18\"]\n", []string{"Invalid CIDR", `"10.10.0.1/18"`}},
		{"  started_before = \"yesterday\"\n", []string{"Invalid Time", "RFC 3339"}},
		{"  include = [\"kube-system/calico-node\"]\n", []string{"Invalid Workload", "namespace/kind/name"}},
		{"  include = [\"kube-system/job/x\"]\n", []string{"Invalid Workload", `kind "job"`}},
		{"  pod_cidrs = [\"10.10.0.0/18\"]\n  first = [\"default/deployment/absent\", \"x\"]\n", []string{"Invalid Workload", "first"}},
		{"  pod_cidrs = [\"10.10.0.0/18\"]\n  selector = \"a in (\"\n", []string{"Invalid Label Selector"}},
		{"  pod_cidrs = [\"10.10.0.0/18\"]\n  kinds = [\"Job\"]\n", []string{"value must be one of"}},
		{"  pod_cidrs = [\"10.10.0.0/18\"]\n  parallelism = 0\n", []string{"parallelism", "between 1 and 100"}},
		{"  include = [\"default/deployment/absent\"]\n", []string{"Workload Not Found", "default/deployment/absent does not exist"}},
	} {
		steps = append(steps, resource.TestStep{Config: res(c.body), PlanOnly: true, ExpectError: diagRE(c.want...)})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// started_before from a resource of the same run is unknown at plan, so pending is too; at apply
// the pods started before it are rolled: hostNetwork pods only with ClusterFirstWithHostNet.
// include rolls a workload outside the scope regardless of the trigger.
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

resource "k8scidr_workload_roll" "dns" {
  namespaces     = ["default"]
  started_before = terraform_data.dns_moved.output
  include        = ["other/deployment/idle"]
}
`, movedAt.UTC().Format(time.RFC3339))
	const addr = "k8scidr_workload_roll.dns"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue(addr, tfjsonpath.New("pending")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("pending"), knownvalue.MapExact(map[string]knownvalue.Check{
					"default/deployment/web": knownvalue.Int64Exact(2), "default/deployment/hostdns": knownvalue.Int64Exact(1),
					"other/deployment/idle": knownvalue.Int64Exact(1),
				})),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("rolled"), knownvalue.MapPartial(map[string]knownvalue.Check{
					"default/deployment/web": knownvalue.NotNull(), "default/deployment/hostdns": knownvalue.NotNull(),
					"other/deployment/idle": knownvalue.NotNull(),
				})),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("rolled"), knownvalue.MapSizeExact(3)),
			},
			Check: func(*terraform.State) error {
				for ns, apps := range map[string][]string{"default": {"web", "hostdns", "hostplain"}, "other": {"idle"}} {
					for _, app := range apps {
						d, err := e.c.Kube.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
						if err != nil {
							return err
						}
						restarted := d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != ""
						if restarted != (app != "hostplain") {
							return fmt.Errorf("%s/%s restarted = %t", ns, app, restarted)
						}
					}
				}
				return nil
			},
		}},
	})
}
