// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// wireServices is how many Services (besides the cluster DNS) the wire tests move.
const wireServices = 20

// TestAccWire_recreation moves the cluster DNS Service and 20 Services while one client of each
// kind sends a request to each Service every 100 ms through a real kube-proxy (nftables) and
// CoreDNS: with the default configuration (the moves data source whole, nothing else set,
// which keeps every old IP by an old-IP bridge) and kubeadm's Corefile, and with
// old_ip_bridges = "dns" and kOps' Corefile. It logs what each kind of client saw, and fails on
// any failure of a client kind the configuration promises to keep: by default every kind, the
// clients that resolve names (on the old DNS IP or the new) and those that keep the IP they
// resolved once or use <SVC>_SERVICE_HOST; with "dns" the clients that resolve names (the old
// IPs are freed dns_ttl after each move, and the others fail from then on: their failures must
// not start earlier).
func TestAccWire_recreation(t *testing.T) {
	testAccPreCheck(t)
	wireCases(t, testcluster.ProxyNFTables)
}

// TestAccWire_recreationIPTables is TestAccWire_recreation's moves with kube-proxy in iptables mode.
func TestAccWire_recreationIPTables(t *testing.T) {
	testAccPreCheck(t)
	wireCases(t, testcluster.ProxyIPTables)
}

func wireCases(t *testing.T, mode testcluster.ProxyMode) {
	cases := []struct {
		corefile testcluster.Corefile
		bridges  string // old_ip_bridges; "" the default
	}{{testcluster.CorefileKubeadm, ""}, {testcluster.CorefileKOps, recreation.BridgesDNS}}
	for _, c := range cases {
		name := c.corefile.Name + "-" + cmp.Or(c.bridges, "defaults")
		t.Run(name, func(t *testing.T) {
			wireRecreation(t, testcluster.WireOptions{Mode: mode, Corefile: c.corefile}, c.bridges, savedPlanApply, false)
		})
	}
}

// TestAccWire_killed is TestAccWire_recreation's default configuration (kOps' Corefile, whose
// 5 s TTL keeps it short) with terraform and the provider SIGKILLed mid-hand-over, at a point
// the seed picks: carriers made, Services ExternalName, or Services on their new IPs with
// their bridges up. Until a plain apply finishes the job, and while it does, no client that
// uses a Service (by name, by a kept IP or by <SVC>_SERVICE_HOST) sees a failure: every state a
// hand-over can be cut off in is served.
func TestAccWire_killed(t *testing.T) {
	testAccPreCheck(t)
	wireRecreation(t, testcluster.WireOptions{Mode: testcluster.ProxyNFTables, Corefile: testcluster.CorefileKOps}, "", killedApply, true)
}

// savedPlanApply applies w's configuration as a pipeline does: a saved plan, then its apply.
func savedPlanApply(t *testing.T, w *cliWorkspace, _ *testcluster.Cluster) {
	w.planFile()
	w.applyFile()
}

// killedApply SIGKILLs an apply of w's configuration mid-hand-over (killPoints, by the fault
// seed), holds the cluster as the kill left it for a while, then applies again.
func killedApply(t *testing.T, w *cliWorkspace, c *testcluster.Cluster) {
	seed := faultSeed(t)
	point := killPoints[rand.New(rand.NewPCG(seed, seed)).IntN(len(killPoints))]
	killed, out, _ := interruptWhen(t, w, nil, func() bool {
		list, err := c.Kube.CoreV1().Services("wire").List(context.Background(), metav1.ListOptions{})
		return err == nil && point.reached(list.Items)
	}, sigkill, "apply", "-auto-approve")
	if !killed {
		t.Fatalf("the apply finished before it reached %q, so the kill tested nothing:\n%s", point.name, out)
	}
	state := map[string]int{}
	for _, s := range servicesIn(t, c.Kube, "wire") {
		state[string(s.Spec.Type)]++
	}
	helpers, err := c.Kube.CoreV1().Services("wire").List(context.Background(), metav1.ListOptions{LabelSelector: recreation.HandOverLabel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed once %s: the Services by type %v, %d hand-over helpers", point.name, state, len(helpers.Items))
	time.Sleep(3 * time.Second) // the clients meanwhile see what the kill left
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
}

// killPoints are the states of a batch of hand-overs a kill may cut off, each seen by a
// list of the Services for at least a kube-proxy sync wait.
var killPoints = []struct {
	name    string
	reached func([]corev1.Service) bool
}{
	{"carriers made", func(l []corev1.Service) bool {
		return slices.ContainsFunc(l, func(s corev1.Service) bool { return s.Labels[recreation.HandOverLabel] == "carrier" })
	}},
	{"Services ExternalName", func(l []corev1.Service) bool {
		return slices.ContainsFunc(l, func(s corev1.Service) bool { return s.Spec.Type == corev1.ServiceTypeExternalName })
	}},
	{"Services on their new IPs, bridges up", func(l []corev1.Service) bool {
		return slices.ContainsFunc(l, func(s corev1.Service) bool {
			return s.Labels[recreation.HandOverLabel] == "" && clusterIPIn(faultTarget, &s)
		})
	}},
}

// informerLag is how much earlier than the harness's informer another watcher (CoreDNS,
// kube-proxy) may see a Service's change.
const informerLag = 250 * time.Millisecond

// killed says apply may cut a move by delete and create off between the delete and the create:
// the NodePort Service is then gone until the next apply creates it, its node ports closed and
// its name answered NXDOMAIN meanwhile (its IPs stay served by its escort).
func wireRecreation(t *testing.T, o testcluster.WireOptions, bridges string, apply func(*testing.T, *cliWorkspace, *testcluster.Cluster), killed bool) {
	if testcluster.RerunIsolated(t) {
		return
	}
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1})
	wire, err := c.StartWire(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := wire.Seed(ctx, "wire", wireServices, "100.64.0.10")
	if err != nil {
		t.Fatal(err)
	}
	// Only now: the apiserver would give some of the Services an IP in it (any Ready range).
	if _, err := servicecidr.CreateServiceCIDR(ctx, clientFor(c), "new", []string{faultTarget.String()}); err != nil {
		t.Fatal(err)
	}
	cl, err := wire.StartClients(ctx, testcluster.ClientOptions{Services: seed.Services})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	time.Sleep(2 * time.Second)
	if r := cl.Report(); r.Failed(testcluster.ClientKinds...) != 0 {
		t.Fatalf("clients failed before the move:\n%s", r)
	}

	settings := ""
	if bridges != "" {
		settings = fmt.Sprintf("  old_ip_bridges = %q\n", bridges)
	}
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+recreationHCLWith("", `  target_cidrs = ["`+faultTarget.String()+`"]`, settings))
	start := time.Now()
	apply(t, w, c)
	applied := time.Now()
	// Clients that cached an answer from before the move ask again once the Corefile's TTL ran out.
	time.Sleep(o.Corefile.TTL + 3*time.Second)
	settled := time.Now()
	time.Sleep(2 * time.Second)
	r := cl.Stop()
	t.Logf("kube-proxy %s, %s's Corefile, old_ip_bridges %q: %d Services and the cluster DNS moved in %s; what the clients saw:\n%s",
		o.Mode, o.Corefile.Name, cmp.Or(bridges, recreation.DefaultOldIPBridges), wireServices, applied.Sub(start).Round(time.Millisecond), r)
	promised := append(slices.Clone(testcluster.ClientKinds), testcluster.ClientNodePort)
	if bridges == recreation.BridgesDNS {
		promised = []testcluster.ClientKind{testcluster.ClientOldResolver, testcluster.ClientNewResolver, testcluster.ClientNodePort}
	}
	// The gaps left (docs/guides/zero-downtime.md): a move by delete and create (the NodePort
	// Services) leaves the name unanswered from the delete to the create; a resolver asking then
	// gets NXDOMAIN, which kOps' Corefile caches for its TTL. And where kube-proxy, kept busy by
	// the other moves (CI: two suites at once on 2 cores), syncs between the delete and the
	// create after all, the node ports close until its next sync (about a second). A kill between
	// the two stretches both until the next apply. Logged, not failed on; node-port refusals only
	// within two sync waits of the move.
	failed, gap, stray := 0, 0, 0
	for _, k := range promised {
		if r.Kinds[k] == nil {
			t.Errorf("no %s client ran", k)
			continue
		}
		for _, f := range r.Kinds[k].Failures {
			if k == testcluster.ClientNodePort && strayRefusal(r.Kinds[k].Failures, f, applied) {
				stray++
				t.Logf("node-port: a single refused request at %s, %s after its move and %s after the apply ended, with none for %s either side (not counted)",
					f.Service, f.Since.Round(time.Millisecond), f.At.Sub(applied).Round(time.Millisecond), strayQuiet)
				continue
			}
			// Since is measured from the harness's own informer, which may learn of the delete a
			// moment after CoreDNS's does.
			atNodePort, since := slices.Contains(seed.NodePorts, f.Service), f.Since+informerLag
			if atNodePort && f.Reason == "dns: NameError" && since >= 0 && (killed || f.Since <= o.Corefile.TTL) ||
				atNodePort && k == testcluster.ClientNodePort && (killed || since >= 0 && f.Since <= 2*recreation.DefaultProxySync) {
				gap++
				continue
			}
			failed++
		}
	}
	if gap > 0 {
		t.Logf("%d queries answered NXDOMAIN, or node-port requests refused, between a NodePort Service's delete and its create (the known gaps)", gap)
	}
	if stray > 0 {
		t.Logf("%d stray node-port refusals, each a single request long after the apply (see strayRefusal)", stray)
	}
	if failed > 0 {
		t.Errorf("%d failed queries or requests of the client kinds %v during the move: zero wanted", failed, promised)
	}
	for _, k := range testcluster.ClientKinds {
		if slices.Contains(promised, k) {
			continue
		}
		// Not promised: the old IPs go with their bridges, dns_ttl after each Service's move.
		for _, f := range r.Kinds[k].Failures {
			if f.Since < recreation.DefaultDNSTTL {
				t.Errorf("%s: %s failed %s after its move, before its old IPs' bridge was due to go (%s): %s", k, f.Service, f.Since, recreation.DefaultDNSTTL, f.Reason)
				break
			}
		}
	}

	// Failures after the TTL are logged; a Service that does not answer again is an error.
	late := 0
	for _, k := range []testcluster.ClientKind{testcluster.ClientOldResolver, testcluster.ClientNewResolver} {
		kr := r.Kinds[k]
		if kr.Requests == 0 {
			t.Errorf("%s: no request sent", k)
		}
		for _, f := range kr.Failures {
			if f.At.After(settled) {
				late++
				t.Logf("%s: %s failed %s after the move, past the Corefile's TTL: %s", k, f.Service, f.At.Sub(applied).Round(time.Millisecond), f.Reason)
			}
		}
		for _, svc := range seed.Services {
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				return cl.Reach(ctx, k, svc, "") == nil, nil
			})
			if err != nil {
				t.Errorf("%s: %s does not answer through its name after the move and the Corefile's TTL: %v", k, svc, cl.Reach(ctx, k, svc, ""))
			}
		}
	}
}

// strayQuiet is how long a stray refusal's node port answered on either side of it.
const strayQuiet = 2 * time.Second

// strayRefusal says whether f, a node-port client's failure, is a single refused request long
// after the apply ended (two sync waits: any change the run made is in kube-proxy's rules by
// then), with no other failure at its Service for strayQuiet either side. Three such, 25 to 60 s
// after their Services' moves, were seen once on a loaded CI machine and never in local runs;
// no step of the move is under way then, and kube-proxy's rules cannot flip for less than a
// sync wait, so they are logged and counted apart. A window of failures is never one.
func strayRefusal(all []testcluster.Failure, f testcluster.Failure, applied time.Time) bool {
	if !strings.HasSuffix(f.Reason, ": refused") || f.At.Before(applied.Add(2*recreation.DefaultProxySync)) {
		return false
	}
	return !slices.ContainsFunc(all, func(o testcluster.Failure) bool {
		d := o.At.Sub(f.At)
		return o.Service == f.Service && o.At != f.At && d > -strayQuiet && d < strayQuiet
	})
}

// TestStrayRefusal: only a lone refusal long after the apply is stray; one in a window, one
// during the apply's last sync waits, and a failure of another kind are not.
func TestStrayRefusal(t *testing.T) {
	applied := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration, svc, reason string) testcluster.Failure {
		return testcluster.Failure{Kind: testcluster.ClientNodePort, Service: svc, At: applied.Add(d), Reason: reason}
	}
	lone := at(30*time.Second, "wire/web-4", "http 192.0.2.1: refused")
	windowed := at(40*time.Second, "wire/web-9", "http 192.0.2.1: refused")
	all := []testcluster.Failure{lone, windowed, at(40*time.Second+100*time.Millisecond, "wire/web-9", "http 192.0.2.1: refused"),
		at(30*time.Second+500*time.Millisecond, "wire/web-14", "http 192.0.2.1: refused")}
	for _, c := range []struct {
		f    testcluster.Failure
		want bool
	}{
		{lone, true},
		{windowed, false},
		{at(time.Second, "wire/web-19", "http 192.0.2.1: refused"), false},
		{at(50*time.Second, "wire/web-19", "http 192.0.2.1: connect timeout"), false},
	} {
		if got := strayRefusal(all, c.f, applied); got != c.want {
			t.Errorf("strayRefusal(%s at %s: %s) = %v, want %v", c.f.Service, c.f.At.Sub(applied), c.f.Reason, got, c.want)
		}
	}
}
