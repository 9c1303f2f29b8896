// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The tests of what a migration leaves for the next one: the bridges of an earlier migration, an
// IP another client took, the labels pruning tools act on, the copies of an interrupted run.

// dnsBridgesByIP are the DNS bridges in kube-system, by the IPs each keeps.
func dnsBridgesByIP(t *testing.T, kube kubernetes.Interface) map[string]corev1.Service {
	t.Helper()
	list, err := kube.CoreV1().Services("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: k8sops.DNSBridgeLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Service{}
	for _, s := range list.Items {
		out[strings.Join(s.Spec.ClusterIPs, ",")] = s
	}
	return out
}

// oldIPBridgesFor are the old-IP bridges standing in for Service key, by the IPs each keeps.
func oldIPBridgesFor(t *testing.T, kube kubernetes.Interface, key string) map[string]corev1.Service {
	t.Helper()
	ns, _, _ := strings.Cut(key, "/")
	out := map[string]corev1.Service{}
	for _, s := range servicesIn(t, kube, ns) {
		if s.Labels[k8sops.OldIPBridgeLabel] == "true" && s.Annotations["k8scidr.io/bridge-for"] == key {
			out[strings.Join(s.Spec.ClusterIPs, ",")] = s
		}
	}
	return out
}

// dnsAndWeb gives a cluster of the test's own kube-system/kube-dns on 100.64.0.10 with a running
// CoreDNS, and Deployment app/web, whose pods resolve through it.
func dnsAndWeb(t *testing.T, c *testcluster.Cluster) fixture {
	t.Helper()
	f := fixture{t, c.Kube}
	f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
	f.service("kube-system", dnsService("kube-dns", "100.64.0.10"))
	f.namespace("app")
	f.deployment("app", "web", map[string]string{"app": "web"})
	f.waitReadySlice("kube-system", "kube-dns")
	return f
}

// moveTo is a recreation of everything into target: dataArgs go to the moves data source,
// resourceArgs to the resource.
func moveTo(c *testcluster.Cluster, target netip.Prefix, dataArgs, resourceArgs string) string {
	return providerBlock(c.Kubeconfig) + recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]\n%s", target, dataArgs), resourceArgs)
}

// bridgesOffOnceReplaced replaces app/web's pods, which started before the DNS bridges, and
// applies w's configuration (dns_bridge = false): every DNS bridge must go.
func bridgesOffOnceReplaced(t *testing.T, c *testcluster.Cluster, w *cliWorkspace) {
	t.Helper()
	replacePods(t, c.Kube, "app", "app=web")
	w.planFile()
	w.applyFile()
	if left := dnsBridgesByIP(t, c.Kube); len(left) != 0 {
		t.Errorf("DNS bridges left after dns_bridge = false: %v", slices.Collect(maps.Keys(left)))
	}
	w.converged()
}

// TestAccServiceRecreation_secondMigration: the Services move twice, into 172.24.0.0/15 and then
// (the range was chosen wrong) into 10.100.0.0/16, with the DNS bridge on and old_ip_bridges =
// "all" throughout. After the second move the kubelets and the clients may use the IPs of
// either: every old IP has its bridge, with the Service's selector, and each is served. Before,
// the second move took the first move's bridges for its own ("found") and left 172.24.0.10 and
// 172.24.1.5 unbridged. Switching the DNS bridge off removes both DNS bridges, once the pods that
// started before them have been replaced.
func TestAccServiceRecreation_secondMigration(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := targetCluster(t)
	f := dnsAndWeb(t, c)
	f.service("app", ipService("web", "ClusterIP", "100.64.1.5"))
	f.waitReadySlice("app", "web")
	second := netip.MustParsePrefix("10.100.0.0/16")
	if _, err := servicecidr.CreateServiceCIDR(context.Background(), clientFor(c), "second", []string{second.String()}); err != nil {
		t.Fatal(err)
	}
	const bridges = `  old_ip_bridges = "all"`
	w := newCLIWorkspace(t, moveTo(c, faultTarget, "", bridges))
	w.planFile()
	w.applyFile()
	w.write(moveTo(c, second, "", bridges))
	w.planFile()
	expect(t, "the second move", w.planned(recreationAddr, "plan.moves"), movesCheck(map[string][2][]string{
		"kube-system/kube-dns": {{"172.24.0.10"}, {"10.100.0.10"}}, "app/web": {{"172.24.1.5"}, {"10.100.1.5"}}}))
	w.applyFile()

	now := servicesIn(t, c.Kube, "")
	if got := now["kube-system/kube-dns"].Spec.ClusterIPs; !slices.Equal(got, []string{"10.100.0.10"}) {
		t.Errorf("kube-dns at %v after the second move", got)
	}
	dns := dnsBridgesByIP(t, c.Kube)
	if got := slices.Sorted(maps.Keys(dns)); !slices.Equal(got, []string{"100.64.0.10", "172.24.0.10"}) {
		t.Errorf("DNS bridges on %v; want one on each old IP of kube-dns, 100.64.0.10 and 172.24.0.10", got)
	}
	web := oldIPBridgesFor(t, c.Kube, "app/web")
	if got := slices.Sorted(maps.Keys(web)); !slices.Equal(got, []string{"100.64.1.5", "172.24.1.5"}) {
		t.Errorf("app/web's old-IP bridges on %v; want one on each of its old IPs, 100.64.1.5 and 172.24.1.5", got)
	}
	for ip, b := range dns {
		if b.Spec.Selector["k8s-app"] != "kube-dns" {
			t.Errorf("the DNS bridge on %s selects %v", ip, b.Spec.Selector)
		}
		f.waitReadySlice("kube-system", b.Name)
	}
	for ip, b := range web {
		if b.Spec.Selector["app"] != "web" {
			t.Errorf("app/web's bridge on %s selects %v", ip, b.Spec.Selector)
		}
		f.waitReadySlice("app", b.Name)
	}
	expect(t, "bridges in state", w.stateValue(recreationAddr, "bridges"), knownvalue.MapSizeExact(2))
	w.converged()

	// Off: refused while app/web's pods, started before both bridges, run; then both DNS bridges go.
	kubeletsOnDNSService(t, c, w)
	w.write(moveTo(c, second, "  dns_bridge = false", bridges))
	if out, err := w.run("apply", "-auto-approve"); err == nil || !diagRE("DNS Bridge Still in Use", "100.64.0.10", "172.24.0.10", "app/web-").MatchString(out) {
		t.Fatalf("switching the DNS bridges off under running pods: %v\n%s", err, out)
	}
	bridgesOffOnceReplaced(t, c, w)
}

// TestAccServiceRecreation_dnsGotAnotherIP: while kube-dns is between its delete and its create
// (a fault gate), another client creates a Service on kube-dns's planned IP 172.24.0.10, so
// kube-dns gets the next free one, 172.24.0.11. The resource's dns_service_ips says so, and so
// does the data source's afterwards, also once the kubelets were set to the planned IP (which
// now names the other client's Service); switching the DNS bridge off is refused while they are.
// Before, nothing told the IP kube-dns got but a note, the data source took the other client's
// Service for the cluster DNS, and the bridge was removed under kubelets that named it.
func TestAccServiceRecreation_dnsGotAnotherIP(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := targetCluster(t)
	f := dnsAndWeb(t, c)
	w := newCLIWorkspace(t, moveTo(c, faultTarget, "", deleteAndCreate))
	w.planFile()
	expect(t, "planned", w.planned(recreationAddr, "plan.moves"),
		movesCheck(map[string][2][]string{"kube-system/kube-dns": {{"100.64.0.10"}, {"172.24.0.10"}}}))

	ctx := context.Background()
	gate, open := faultGate(t, "AFTER_DELETE")
	cmd, out := w.start([]string{gate}, "apply", "tfplan")
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("kube-dns was never deleted: %v\n%s", err, out.String())
	}
	f.service("app", ipService("took-it", "ClusterIP", "172.24.0.10"))
	open()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the apply: %v\n%s", err, out.String())
	}
	if got := servicesIn(t, c.Kube, "kube-system")["kube-system/kube-dns"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.0.11"}) {
		t.Fatalf("kube-dns at %v; want the next free IP 172.24.0.11", got)
	}
	expect(t, "the resource's dns_service_ips", w.stateValue(recreationAddr, "dns_service_ips"), strListCheck("172.24.0.11"))
	// A warning says the apply did not do what the plan showed; the step it changes is in
	// next_steps, with the IP to use.
	if !strings.Contains(out.String(), "kube-system/kube-dns got [172.24.0.11] instead of the planned [172.24.0.10]") {
		t.Errorf("the apply does not warn that kube-dns got 172.24.0.11, not the planned 172.24.0.10:\n%s", out.String())
	}
	if next := fmt.Sprint(w.stateValue(recreationAddr, "next_steps")); !diagRE("kubeDNS.serverIP", "172.24.0.11", "not the planned 172.24.0.10").MatchString(next) {
		t.Errorf("next_steps does not say to set kubeDNS.serverIP to 172.24.0.11, not the planned 172.24.0.10: %s", next)
	}

	// The kubelets were set to the planned IP, which the other client's Service holds.
	setKubeletClusterDNS(t, c, "172.24.0.10")
	w.planFile()
	expect(t, "dns_service", w.planned(recreationAddr, "plan.dns_service"), knownvalue.StringExact("kube-system/kube-dns"))
	expect(t, "the data source's dns_service_ips", w.readAtPlan("data.k8scidr_service_moves.this", "dns_service_ips"), strListCheck("172.24.0.11"))
	w.write(moveTo(c, faultTarget, "  dns_bridge = false", deleteAndCreate))
	refused := diagRE("Kubelets Do Not Name the Cluster DNS Service", "clusterDNS 172.24.0.10", "cluster DNS Service's IP 172.24.0.11")
	if out, err := w.run("apply", "-auto-approve"); err == nil || !refused.MatchString(out) {
		t.Fatalf("the bridge removal under kubelets naming another Service: %v\n%s", err, out)
	}
	if _, ok := dnsBridgesByIP(t, c.Kube)["100.64.0.10"]; !ok {
		t.Fatal("the DNS bridge is gone after the refused removal")
	}
	setKubeletClusterDNS(t, c, "172.24.0.11")
	bridgesOffOnceReplaced(t, c, w)
}

// TestAccServiceRecreation_bridgeEndpointsNotPruned: a selector-less Service's hand-made
// Endpoints are deployed by a pruning tool, kubectl's ApplySet (KUBECTL_APPLYSET), which labels
// what it applies applyset.kubernetes.io/part-of and deletes on the next apply what carries the
// label and is not in its manifests; Argo CD does the same by app.kubernetes.io/instance. The
// old-IP bridge's copy of those Endpoints must carry neither, and survive the next `kubectl
// apply --prune`, a server-side apply, which must meet no conflict on the restored original
// either: its fields go back to kubectl, their manager before the move. Before, the copy took
// the original's labels and the prune deleted it (the bridge answered with no endpoints), and
// the restored Endpoints were k8scidr's ("conflict with k8scidr: .subsets").
func TestAccServiceRecreation_bridgeEndpointsNotPruned(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := targetCluster(t)
	f := fixture{t, c.Kube}
	f.namespace("app")
	ext := ipService("ext", "ClusterIP", "100.64.1.7")
	ext.Spec.Selector = nil
	f.service("app", ext)
	endpoints := func(name, ip string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: %s\n  labels:\n    app.kubernetes.io/instance: shop\n"+
			"subsets:\n- addresses:\n  - ip: %s\n  ports:\n  - port: 80\n", name, ip)
	}
	kubectlApply := func(manifest string) {
		t.Helper()
		file := t.TempDir() + "/manifest.yaml"
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl(c, []string{"KUBECTL_APPLYSET=true"}, "apply", "-n", "app", "--prune", "--applyset=shop",
			"--server-side", "-f", file); err != nil {
			t.Fatalf("kubectl apply --prune: %v\n%s", err, out)
		}
	}
	kubectlApply(endpoints("ext", "10.9.0.1") + "---\n" + endpoints("gone", "10.9.0.2"))
	kubectlApply(endpoints("ext", "10.9.0.1")) // the pruning works: "gone" was left out
	_, err := c.Kube.CoreV1().Endpoints("app").Get(context.Background(), "gone", metav1.GetOptions{})
	assertGone(t, err, "the Endpoints the second kubectl apply left out")

	w := newCLIWorkspace(t, bridgeConfig(c, `  old_ip_bridges = "all"`+"\n"+deleteAndCreate))
	w.planFile()
	w.applyFile()
	bname := recreation.OldIPBridgeName("app", "ext", []string{"100.64.1.7"})
	copied, err := c.Kube.CoreV1().Endpoints("app").Get(context.Background(), bname, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the bridge %s has no Endpoints: %v", bname, err)
	}
	for _, l := range []string{"applyset.kubernetes.io/part-of", "app.kubernetes.io/instance"} {
		if v, ok := copied.Labels[l]; ok {
			t.Errorf("the bridge's Endpoints carry %s=%s, which a pruning tool acts on", l, v)
		}
	}
	kubectlApply(endpoints("ext", "10.9.0.1"))
	got, err := c.Kube.CoreV1().Endpoints("app").Get(context.Background(), bname, metav1.GetOptions{})
	if err != nil || len(got.Subsets) != 1 || got.Subsets[0].Addresses[0].IP != "10.9.0.1" {
		t.Fatalf("the bridge's Endpoints after kubectl apply --prune: %v %+v", err, got)
	}
	f.waitReadySlice("app", bname)
	w.converged()
}

// TestAccServiceRecreation_interruptSweepsCopies: SIGINT while moves with old-IP bridges sit
// between their delete and their create (a fault gate), then a run that times out there. The
// moves in flight finish, with the EndpointSlice copies that serve their bridges and their
// selector-less Services until kube-controller-manager writes their own; before the
// interrupted run ends it deletes every copy the controller has replaced by then, as a
// successful run does, and names any it must keep. Before, only a successful run swept them:
// an interrupted or timed-out one left copies that go stale as pods change.
func TestAccServiceRecreation_interruptSweepsCopies(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const ns, n = "sw", 12
	c := targetCluster(t)
	before := bridgeServices(t, c, ns, n) // s000 and s010 selector-less, the rest select Deployment backend
	third := netip.MustParsePrefix("10.100.0.0/16")
	if _, err := servicecidr.CreateServiceCIDR(context.Background(), clientFor(c), "third", []string{third.String()}); err != nil {
		t.Fatal(err)
	}
	made := watchCopies(t, c.Kube, ns)
	interrupted := func(w *cliWorkspace, sigint bool) {
		t.Helper()
		made.reset()
		w.planFile()
		gate, _ := faultGate(t, "AFTER_DELETE") // never opened: the interrupt or the timeout releases the moves
		cmd, out := w.start([]string{gate}, "apply", "tfplan")
		// Only a selector-less Service's move makes a copy the sweep must delete (a selector's
		// copies are adopted by the controller), and two moves start at once: wait until one
		// of those is past its delete, not only any move.
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			now := servicesIn(t, c.Kube, ns)
			for key, s := range before {
				if _, ok := now[key]; !ok && len(s.Spec.Selector) == 0 {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no move of a selector-less Service reached its delete: %v\n%s", err, out.String())
		}
		if sigint {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("the interrupted apply succeeded:\n%s", out.String())
		}
		if made.count() == 0 {
			t.Fatalf("the run made no EndpointSlice copy, so the test saw no sweep:\n%s", out.String())
		}
		left := copiesIn(t, c.Kube, ns)
		for _, name := range left {
			if !strings.Contains(out.String(), ns+"/"+name) {
				t.Errorf("the copy %s/%s outlived the interrupted run, which did not say why it kept it:\n%s", ns, name, out.String())
			}
		}
		t.Logf("%d copies made, %d left (each named as kept)", made.count(), len(left))
	}

	w := newCLIWorkspace(t, bridgeConfig(c, `  old_ip_bridges = "all"`+"\n"+deleteAndCreate))
	interrupted(w, true)
	w.planFile()
	w.applyFile()
	checkBridged(t, c.Kube, ns, before)

	// Timed out: on to a third range, held until the update's timeout ends the run.
	w.write(moveTo(c, third, "", "  old_ip_bridges = \"all\"\n  timeouts {\n    update = \"20s\"\n  }"))
	interrupted(w, false)
	w.planFile()
	w.applyFile()
	w.converged()
}

// copiesIn are the names of the EndpointSlice copies the provider made in namespace ns.
func copiesIn(t *testing.T, kube kubernetes.Interface, ns string) []string {
	t.Helper()
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: copyLabel})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

const copyLabel = discoveryv1.LabelManagedBy + "=k8scidr.io"

// copyWatch counts the EndpointSlice copies created in a namespace.
type copyWatch struct {
	mu    sync.Mutex
	names map[string]bool
}

func (w *copyWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.names)
}

func (w *copyWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.names)
}

// watchCopies watches namespace ns for EndpointSlice copies until the test ends.
func watchCopies(t *testing.T, kube kubernetes.Interface, ns string) *copyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kube.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: copyLabel})
	if err != nil {
		t.Fatal(err)
	}
	cw := &copyWatch{names: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && ev.Type == watch.Added {
				cw.mu.Lock()
				cw.names[s.Name] = true
				cw.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return cw
}

// kubectl runs make testbin's kubectl against the cluster with extra environment.
func kubectl(c *testcluster.Cluster, env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testcluster.DefaultBinDir(), "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
