// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// killTrials is K8SCIDR_KILL_TRIALS (make test-faults: 20; make test: 1), or 2.
func killTrials(t *testing.T) int {
	t.Helper()
	n := 2
	if s := os.Getenv("K8SCIDR_KILL_TRIALS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("K8SCIDR_KILL_TRIALS=%q: want a positive count", s)
		}
	}
	return n
}

// interruptWhen runs terraform with args (and the built provider) and calls act the first time
// ready says so, unless terraform ends before. It returns whether act ran, terraform's output
// and its exit error.
func interruptWhen(t *testing.T, w *cliWorkspace, env []string, ready func() bool, act func(*exec.Cmd), args ...string) (acted bool, out string, err error) {
	t.Helper()
	cmd := w.command(env, append(args, "-no-color")...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return acted, buf.String(), err
		case <-tick.C:
			if !acted && ready() {
				act(cmd)
				acted = true
			}
		}
	}
}

// sigkill kills terraform and the provider it started (their process group).
func sigkill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// movedCount counts the Services of ns inside target, and those missing from the n created (a
// Service mid-hand-over, ExternalName for a while, is neither).
func movedCount(t *testing.T, kube kubernetes.Interface, ns string, target netip.Prefix, n int) (moved, missing int) {
	now := servicesIn(t, kube, ns)
	for _, s := range now {
		if clusterIPIn(target, &s) {
			moved++
		}
	}
	return moved, n - len(now)
}

// pingPong are the ranges the kill and restart suites move Services between, turn by turn.
var pingPong = []netip.Prefix{faultTarget, netip.MustParsePrefix("100.64.0.0/13")}

// movingCluster is a cluster of the test's own with faultTarget served and n Services in
// namespace ns to move (movingServices), and a recreation configuration for a target.
func movingCluster(t *testing.T, ns string, n int) (*testcluster.Cluster, map[string]corev1.Service, func(netip.Prefix) string) {
	t.Helper()
	c := targetCluster(t)
	before := movingServices(t, c.Kube, ns, n)
	return c, before, func(target netip.Prefix) string {
		return providerBlock(c.Kubeconfig) + recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", target), "")
	}
}

// targetCluster is a cluster of the test's own with faultTarget served by a Ready ServiceCIDR.
func targetCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	c := startCluster(t, testcluster.Options{})
	if _, err := servicecidr.CreateServiceCIDR(context.Background(), clientFor(c), "new", []string{faultTarget.String()}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAccKill_recreation SIGKILLs terraform and the provider at a random point of a recreation of
// 500 Services, trial after trial, each trial moving them all to the other range (172.24.0.0/15,
// then back to 100.64.0.0/13). After every kill a plain terraform apply must converge: the same
// Services, equal but for their IPs (nodePorts and hand-made Endpoints included), no journal
// left, and an empty plan after it. Each trial's seed is logged for replay.
func TestAccKill_recreation(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n = 500
	c, before, config := movingCluster(t, "kill", n)
	w := newCLIWorkspace(t, config(pingPong[0]))
	base := uint64(time.Now().UnixNano())
	if s := os.Getenv("K8SCIDR_FAULT_SEED"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
	}
	trials := killTrials(t)
	for trial := range trials {
		seed := base + uint64(trial)
		rng := rand.New(rand.NewPCG(seed, seed))
		target := pingPong[trial%2]
		w.write(config(target))
		// Kill once a random number of Services has moved, at least one and at most three
		// quarters (the apply must still be running when the poll sees it); every other trial
		// holds each move 100 ms between delete and create, so that many are in flight at the kill.
		killAt := 1 + rng.IntN(n*3/4)
		var env []string
		if rng.IntN(2) == 0 {
			env = append(env, "K8SCIDR_FAULT_DELAY_AFTER_DELETE=100ms")
		}
		killed, out, _ := interruptWhen(t, w, env, func() bool {
			moved, _ := movedCount(t, c.Kube, "kill", target, n)
			return moved >= killAt
		}, sigkill, "apply", "-auto-approve")
		_, missingAtKill := movedCount(t, c.Kube, "kill", target, n)
		t.Logf("trial %d, seed %d (K8SCIDR_FAULT_SEED=%d replays from here): target %s, kill after %d moved %v: killed %t, %d Services deleted and not recreated when killed",
			trial, seed, seed, target, killAt, env, killed, missingAtKill)
		if !killed {
			t.Fatalf("trial %d (seed %d): the apply finished before the kill, so the trial tested nothing:\n%s", trial, seed, out)
		}
		recovered, err := w.run("apply", "-auto-approve")
		if err != nil {
			t.Fatalf("trial %d (seed %d): the apply after the kill failed: %v\n%s", trial, seed, err, recovered)
		}
		if err := checkNothingLostIn(c.Kube, "kill", before, target); err != nil {
			// The finding last: CI shows a failure's last lines.
			t.Fatalf("the killed apply:\n%s\nthe apply after the kill:\n%s\ntrial %d (seed %d): %v", lastLines(out, 40), recovered, trial, seed, err)
		}
		if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
			t.Fatalf("trial %d (seed %d): the plan after recovery is not empty: %v\n%s", trial, seed, err, out)
		}
	}
}

// TestAccKill_underQuota is a kill trial in a namespace at its services quota: 200 Services,
// a ResourceQuota of 200. Each move's create comes right after its delete, while the quota
// may still count the deleted Service (the quota controller recalculates usage after the
// delete, not with it): the create waits for the room, and the restore after the kill finds it.
// The kill leaves the quota's usage stale as well: a create admitted but never stored (the
// killed apply's in-flight one; here, as CI once found by chance, made certain by creates of
// a name that exists, which admission charges before the store refuses them, whenever a Service
// is missing after the kill) stays counted until kube-controller-manager recounts. The apply after the kill converges with nothing lost and the
// quota still full.
func TestAccKill_underQuota(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n, ns = 200, "quota"
	c, before, config := movingCluster(t, ns, n)
	fullQuota(t, c.Kube, ns, n)
	w := newCLIWorkspace(t, config(faultTarget))
	seed := faultSeed(t)
	killAt := 1 + rand.New(rand.NewPCG(seed, seed)).IntN(n/2)
	// Every move held 100 ms between delete and create; the kill comes while one is there.
	killed, out, _ := interruptWhen(t, w, []string{"K8SCIDR_FAULT_DELAY_AFTER_DELETE=100ms"}, func() bool {
		moved, missing := movedCount(t, c.Kube, ns, faultTarget, n)
		return moved >= killAt && missing > 0
	}, sigkill, "apply", "-auto-approve")
	_, missing := movedCount(t, c.Kube, ns, faultTarget, n)
	t.Logf("killed %t after %d moved: %d Services deleted and not recreated when killed", killed, killAt, missing)
	if !killed {
		t.Fatalf("the apply finished before the kill, so the trial tested nothing:\n%s", out)
	}
	if missing > 0 {
		staleQuota(t, c.Kube, ns, n)
	} else {
		// The create in flight at the kill was stored after all (found by CI): with every
		// Service there, a create of an existing name is refused by the full quota, uncharged.
		t.Log("no Service was missing after the kill: the quota cannot be made stale, so this trial checks convergence only " +
			"(TestAccKill_staleQuotaResync, in make test-faults, always has one missing)")
	}
	start := time.Now()
	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
	t.Logf("the apply after the kill took %s", time.Since(start).Round(time.Millisecond))
	if err := checkNothingLostIn(c.Kube, ns, before, faultTarget); err != nil {
		t.Fatalf("%v; the apply's warnings: %q; its output:\n%s", err, cliWarnings(out), out)
	}
	if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
		t.Fatalf("the plan after recovery is not empty: %v\n%s", err, out)
	}
}

// TestAccKill_roll SIGKILLs terraform and the provider in the middle of a roll of 24
// Deployments; the next apply finishes it, and no Deployment is left paused, unrestarted or
// half rolled out.
func TestAccKill_roll(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	const n = 24
	startedBefore := rollingDeployments(t, c, "rollkill", n)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed))
	killAt := 1 + rng.IntN(n-2)
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+rollHCL("this", fmt.Sprintf("  namespaces     = [\"rollkill\"]\n  started_before = %q",
		startedBefore.UTC().Format(time.RFC3339)), ""))
	ctx := context.Background()
	killed, out, _ := interruptWhen(t, w, nil, func() bool {
		list, err := c.Kube.AppsV1().Deployments("rollkill").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		restarted := 0
		for _, d := range list.Items {
			if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != "" {
				restarted++
			}
		}
		return restarted >= killAt
	}, sigkill, "apply", "-auto-approve")
	t.Logf("seed %d: killed %t after %d of %d Deployments were restarted", seed, killed, killAt, n)
	if !killed {
		t.Fatalf("the roll finished before the kill:\n%s", out)
	}
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
	// The apply waits for each rollout, but kwok's pods of the killed run's rollouts may
	// still be finishing.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return checkRolled(c.Kube, "rollkill") == nil, nil
	})
	if err != nil {
		t.Fatal(checkRolled(c.Kube, "rollkill"))
	}
	if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
		t.Fatalf("the plan after recovery is not empty: %v\n%s", err, out)
	}
}

// TestAccRestart_midApply restarts kube-apiserver, then etcd, each in the middle of an apply
// that moves 300 Services (to 172.24.0.0/15, then back). The apply either finishes or fails
// with a diagnostic; the next apply converges, and nothing is lost.
func TestAccRestart_midApply(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n = 300
	c, before, config := movingCluster(t, "restart", n)
	ctx := context.Background()
	w := newCLIWorkspace(t, config(pingPong[0]))
	for i, component := range []string{"kube-apiserver", "etcd"} {
		target := pingPong[i%2]
		w.write(config(target))
		var restartErr error
		acted, out, err := interruptWhen(t, w, []string{"K8SCIDR_FAULT_DELAY_AFTER_DELETE=50ms"}, func() bool {
			moved, _ := movedCount(t, c.Kube, "restart", target, n)
			return moved >= n/4
		}, func(*exec.Cmd) {
			restartErr = c.Restart(ctx, component, 3*time.Second)
		}, "apply", "-auto-approve")
		if restartErr != nil || !acted {
			t.Fatalf("restarting %s (acted %t): %v\n%s", component, acted, restartErr, out)
		}
		if err != nil {
			// Failing is allowed; failing without a diagnostic, or with a crash, is not.
			if !strings.Contains(out, "Error: ") || strings.Contains(out, "panic") || strings.Contains(out, "plugin crashed") {
				t.Fatalf("%s restart: the apply failed without a clear diagnostic: %v\n%s", component, err, out)
			}
			t.Logf("%s restart: the apply failed with:\n%s", component, out[strings.Index(out, "Error: "):])
			if out, err := w.run("apply", "-auto-approve"); err != nil {
				t.Fatalf("%s restart: the next apply failed: %v\n%s", component, err, out)
			}
		} else {
			t.Logf("%s restart: the apply finished through it", component)
		}
		if err := checkNothingLostIn(c.Kube, "restart", before, target); err != nil {
			t.Fatalf("%s restart: %v", component, err)
		}
		if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
			t.Fatalf("%s restart: the plan after it is not empty: %v\n%s", component, err, out)
		}
	}
}

// staleQuota raises the usage of ns's quota "services" to its hard limit n without a Service
// more: each create of a name that exists is charged by admission and then refused by the store,
// and only kube-controller-manager's recount (a Service delete in ns, or its 5-minute resync)
// takes the charge back. It fails unless the quota then counts n while ns holds fewer.
func staleQuota(t *testing.T, kube kubernetes.Interface, ns string, n int64) {
	t.Helper()
	staleQuotaOf(t, kube, ns, corev1.ResourceServices, n)
}

// staleQuotaOf is staleQuota for the quota's count res, which every Service of ns takes one of
// (services; services.loadbalancers where they are all LoadBalancer Services).
func staleQuotaOf(t *testing.T, kube kubernetes.Interface, ns string, res corev1.ResourceName, n int64) {
	t.Helper()
	ctx := context.Background()
	api := kube.CoreV1().Services(ns)
	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("listing the Services of %s: %v (%d)", ns, err, len(list.Items))
	}
	dup := list.Items[0].DeepCopy()
	dup.ObjectMeta = metav1.ObjectMeta{Name: dup.Name, Namespace: ns}
	dup.Spec.ClusterIP, dup.Spec.ClusterIPs = "", nil
	for i := range dup.Spec.Ports {
		dup.Spec.Ports[i].NodePort = 0
	}
	// First the recount the killed apply's deletes brought, so that it cannot undo the charges
	// below; a charge the kill left already may keep the usage above the count for good.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "services", metav1.GetOptions{})
		used := q.Status.Used[res]
		return err == nil && used.Value() == int64(len(list.Items)), nil
	})
	for range n {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "services", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if used := q.Status.Used[res]; used.Value() >= n {
			break
		}
		if _, err := api.Create(ctx, dup, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
			t.Fatalf("creating %s/%s again: %v; want it refused as existing", ns, dup.Name, err)
		}
	}
	q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "services", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := q.Status.Used[res]
	t.Logf("quota %s/services counts %d %s, %s holds %d Services", ns, used.Value(), res, ns, len(now.Items))
	if used.Value() != n || int64(len(now.Items)) >= n {
		t.Fatalf("the quota is not stale: it counts %d (limit %d) for %d Services", used.Value(), n, len(now.Items))
	}
}

// TestAccKill_staleQuotaResync is TestAccKill_underQuota where nothing else moves in the
// namespace after the kill (it is excluded from the next apply's moves): no delete brings the
// quota controller's recount, so the restore waits for its full resync and says why, instead of
// leaving the Services deleted until another apply. The resync runs when kube-controller-manager
// starts and then every period (2 minutes here, 5 by default): the stale usage comes about
// 30 s after the start, and create's own retries end about 45 s later, so the wait is certain.
// Once with a services quota, once with LoadBalancer Services under a services.loadbalancers
// quota (before, only a count of Services was waited for: the restore failed after create's
// retries, and the Services stayed deleted until another apply). In make test-faults (about
// two and a half minutes each).
func TestAccKill_staleQuotaResync(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	for _, tc := range []struct {
		res  corev1.ResourceName
		noun string
	}{{corev1.ResourceServices, "Services"}, {corev1.ResourceServicesLoadBalancers, "load balancers"}} {
		t.Run(string(tc.res), func(t *testing.T) { testStaleQuotaResync(t, tc.res, tc.noun) })
	}
}

func testStaleQuotaResync(t *testing.T, res corev1.ResourceName, noun string) {
	const n, ns = 4, "stale"
	c := startCluster(t, testcluster.Options{ControllerManagerFlags: []string{"--resource-quota-sync-period=2m"}})
	if _, err := servicecidr.CreateServiceCIDR(context.Background(), clientFor(c), "new", []string{faultTarget.String()}); err != nil {
		t.Fatal(err)
	}
	var before map[string]corev1.Service
	if res == corev1.ResourceServices {
		before = movingServices(t, c.Kube, ns, n)
	} else {
		f := fixture{t, c.Kube}
		f.namespace(ns)
		for i := range n {
			f.service(ns, ipService(fmt.Sprintf("lb%d", i), "LoadBalancer", fmt.Sprintf("100.64.1.%d", 2+i)))
		}
		before = servicesIn(t, c.Kube, ns)
	}
	fullQuotaOf(t, c.Kube, ns, res, n)
	config := func(extra string) string {
		return providerBlock(c.Kubeconfig) + recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]\n  include_load_balancers = true\n%s", faultTarget, extra), "")
	}
	w := newCLIWorkspace(t, config(""))
	gate, _ := faultGate(t, "AFTER_DELETE") // never opened: the kill comes while a move is held there
	killed, out, _ := interruptWhen(t, w, []string{gate}, func() bool {
		_, missing := movedCount(t, c.Kube, ns, faultTarget, n)
		return missing > 0
	}, sigkill, "apply", "-auto-approve")
	if !killed {
		t.Fatalf("the apply finished before the kill:\n%s", out)
	}
	staleQuotaOf(t, c.Kube, ns, res, n)
	w.write(config(fmt.Sprintf("  exclude_namespaces = [%q]", ns)))
	start := time.Now()
	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("the restoring apply failed: %v\n%s", err, out)
	}
	t.Logf("the restoring apply took %s", time.Since(start).Round(time.Millisecond))
	if got := len(servicesIn(t, c.Kube, ns)); got != n {
		t.Fatalf("%d Services after the restoring apply, want %d; its warnings: %q", got, n, cliWarnings(out))
	}
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, fmt.Sprintf("ResourceQuota %s/services counted %d %s (limit %d)", ns, n, noun, n)) {
		t.Errorf("the apply does not say it waited for the quota's recount:\n%s", out)
	}
	w.write(config(""))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the apply moving the rest failed: %v\n%s", err, out)
	}
	if err := checkNothingLostIn(c.Kube, ns, before, faultTarget); err != nil {
		t.Fatal(err)
	}
}

// clusterIPIn reports whether svc's ClusterIP lies in p: false for a Service without one (a
// Service mid-hand-over is ExternalName for a while).
func clusterIPIn(p netip.Prefix, svc *corev1.Service) bool {
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	return err == nil && p.Contains(ip)
}

// TestAccKill_handOverWait SIGKILLs terraform and the provider once every Service it moves has
// taken its new IPs, while the apply waits for cached DNS answers naming the old ones to expire
// before it removes the hand-overs' bridges: the last moment of a run, which a random kill point
// seldom hits (TestAccKill_recreation once left a bridge there). The apply is the one a converged
// configuration makes when Services appear in the old range, the target unchanged: the next plan
// must still show work, and its apply remove every bridge, with nothing lost.
func TestAccKill_handOverWait(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n, ns = 10, "wait"
	c, before, config := movingCluster(t, ns, n)
	target := pingPong[0]
	w := newCLIWorkspace(t, config(target))
	w.planFile()
	w.applyFile()
	w.converged()
	// Services made in the old range since: the next apply moves them, the target unchanged.
	f := fixture{t, c.Kube}
	for i := range n {
		svc := clusterIPService(fmt.Sprintf("late-%d", i), "")
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		f.service(ns, svc)
	}
	after := servicesIn(t, c.Kube, ns)
	bridges := func() int {
		list, err := c.Kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{LabelSelector: recreation.HandOverLabel + "=bridge"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	killed, out, _ := interruptWhen(t, w, nil, func() bool {
		moved, _ := movedCount(t, c.Kube, ns, target, 2*n)
		return moved == 2*n && bridges() > 0
	}, sigkill, "apply", "-auto-approve")
	if !killed {
		t.Fatalf("the apply finished before every Service moved with its bridge still up, so the test tested nothing:\n%s", out)
	}
	left := bridges()
	t.Logf("killed with every Service moved and %d hand-over bridges up", left)
	if out, err := w.run("plan", "-detailed-exitcode"); err == nil {
		t.Errorf("the plan after the kill shows nothing to do, and would leave %d bridges:\n%s", left, out)
	}
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the apply after the kill: %v\n%s", err, out)
	}
	if got := bridges(); got > 0 {
		t.Errorf("after the apply, %d hand-over bridges are left", got)
	}
	if err := checkNothingLostIn(c.Kube, ns, after, target); err != nil {
		t.Error(err)
	}
	if len(before) != n {
		t.Errorf("%d Services made, want %d", len(before), n)
	}
	w.converged()
}

// TestAccKill_nodePortTaken SIGKILLs an apply once it has deleted a NodePort Service (the
// journal keeps it), and meanwhile another Service takes its nodePort, as anything may in the
// hours before the next apply. The next apply brings it back with a new node port and says which
// (before, its create was refused at every apply, and the Service stayed deleted). The other
// Service keeps the port it took.
func TestAccKill_nodePortTaken(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const ns = "np"
	c := targetCluster(t)
	f := fixture{t, c.Kube}
	f.namespace(ns)
	web := ipService("web", "NodePort", "100.64.1.2")
	web.Spec.Ports[0].NodePort = 30080
	f.service(ns, web)
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", faultTarget), ""))
	gate, _ := faultGate(t, "AFTER_DELETE") // never opened: the kill comes while the move is held there
	killed, out, _ := interruptWhen(t, w, []string{gate}, func() bool { return gateReached(gate) }, sigkill, "apply", "-auto-approve")
	if !killed {
		t.Fatalf("the apply finished before the kill:\n%s", out)
	}
	api := c.Kube.CoreV1().Services(ns)
	_, err := api.Get(t.Context(), "web", metav1.GetOptions{})
	assertGone(t, err, "web after the kill")
	// Made in the new range, so that the next apply does not move it too.
	thief := ipService("thief", "NodePort", "172.24.0.200")
	thief.Spec.Ports[0].NodePort = 30080
	f.service(ns, thief)

	out, err = w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
	got, err := api.Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("web after the next apply: %v\n%s", err, out)
	}
	if p := got.Spec.Ports[0].NodePort; p == 30080 || p == 0 {
		t.Errorf("web's nodePort is %d after the next apply, want a new one", p)
	}
	if !clusterIPIn(faultTarget, got) {
		t.Errorf("web is at %v after the next apply, want the target %s", got.Spec.ClusterIPs, faultTarget)
	}
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, fmt.Sprintf("%s/web: its nodePort 30080", ns)) ||
		!strings.Contains(flat, "was taken by another Service") {
		t.Errorf("the apply does not say web's nodePort changed:\n%s", out)
	}
	if th, err := api.Get(t.Context(), "thief", metav1.GetOptions{}); err != nil || th.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("the Service that took the port: %v, %v", th, err)
	}
	w.converged()
}
