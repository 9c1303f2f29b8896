// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// ipWatch is an independent watcher of which ClusterIPs of a namespace are served: held by a
// Service that has an EndpointSlice with a ready endpoint. For each watched IP it records how
// long each stretch without service lasted.
type ipWatch struct {
	mu       sync.Mutex
	services map[types.UID]*corev1.Service
	slices   map[string]*discoveryv1.EndpointSlice
	watched  []string
	down     map[string]time.Time       // watched IP → since when it is not served (absent: served)
	gaps     map[string][]time.Duration // watched IP → the stretches it was not served
	stop     chan struct{}
}

func watchIPs(t *testing.T, kube kubernetes.Interface, ns string, ips []string) *ipWatch {
	t.Helper()
	w := &ipWatch{services: map[types.UID]*corev1.Service{}, slices: map[string]*discoveryv1.EndpointSlice{}, watched: ips,
		down: map[string]time.Time{}, gaps: map[string][]time.Duration{}, stop: make(chan struct{})}
	for _, ip := range ips {
		w.down[ip] = time.Now() // until the informers have shown it served
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { w.event(o, false) }, UpdateFunc: func(_, o any) { w.event(o, false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			w.event(o, true)
		},
	}
	for _, inf := range []cache.SharedIndexInformer{factory.Core().V1().Services().Informer(), factory.Discovery().V1().EndpointSlices().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(w.stop)
	factory.WaitForCacheSync(w.stop)
	t.Cleanup(func() { close(w.stop) })
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.downNow()) == 0, nil
	})
	if err != nil {
		t.Fatalf("not every watched IP is served before the move: %v", w.downNow())
	}
	w.mu.Lock()
	w.gaps = map[string][]time.Duration{} // only from here on
	w.mu.Unlock()
	return w
}

func (w *ipWatch) event(o any, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch v := o.(type) {
	case *corev1.Service:
		if deleted {
			delete(w.services, v.UID)
		} else {
			w.services[v.UID] = v
		}
	case *discoveryv1.EndpointSlice:
		if deleted {
			delete(w.slices, v.Name)
		} else {
			w.slices[v.Name] = v
		}
	}
	now := time.Now()
	served := w.served()
	for _, ip := range w.watched {
		since, isDown := w.down[ip]
		switch {
		case isDown && served[ip]:
			w.gaps[ip] = append(w.gaps[ip], now.Sub(since))
			delete(w.down, ip)
		case !isDown && !served[ip]:
			w.down[ip] = now
		}
	}
}

// served are the IPs held by a Service with a ready endpoint in a slice of its own (owned by it,
// or mirrored from its Endpoints).
func (w *ipWatch) served() map[string]bool {
	ready := map[string]bool{} // Service name → has a ready endpoint
	byName := map[string]types.UID{}
	for uid, s := range w.services {
		byName[s.Name] = uid
	}
	for _, s := range w.slices {
		name := s.Labels[discoveryv1.LabelServiceName]
		uid, ok := byName[name]
		mirrored := s.Labels[discoveryv1.LabelManagedBy] == "endpointslicemirroring-controller.k8s.io"
		if !ok || (!ownedBySvc(s, uid) && !mirrored) {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready[name] = true
			}
		}
	}
	out := map[string]bool{}
	for _, s := range w.services {
		if ready[s.Name] {
			for _, ip := range s.Spec.ClusterIPs {
				out[ip] = true
			}
		}
	}
	return out
}

func ownedBySvc(s *discoveryv1.EndpointSlice, uid types.UID) bool {
	return slices.ContainsFunc(s.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// downNow are the watched IPs not served now (with w.mu held).
func (w *ipWatch) downNow() []string { return slices.Sorted(maps.Keys(w.down)) }

// atMostOneGap fails the test for each watched IP that went unserved more than once (why: what
// leaves the one gap).
func (w *ipWatch) atMostOneGap(t *testing.T, why string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for ip, gaps := range w.gaps {
		if len(gaps) > 1 {
			t.Errorf("%s went unserved %d times (%v); %s", ip, len(gaps), gaps, why)
		}
	}
}

// worst is the longest stretch any watched IP went unserved, with the IP; and the IPs unserved now.
func (w *ipWatch) worst() (time.Duration, string, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var most time.Duration
	var at string
	for ip, gaps := range w.gaps {
		for _, g := range gaps {
			if g > most {
				most, at = g, ip
			}
		}
	}
	return most, at, w.downNow()
}

// bridgeServices are namespace ns's Services with n to move to faultTarget, all with ready
// endpoints: every 10th selector-less with hand-made Endpoints, every 20th (from the 5th) a
// NodePort, one with a 63-character name, and the rest selecting the pods of Deployment backend.
func bridgeServices(t *testing.T, c *testcluster.Cluster, ns string, n int) map[string]corev1.Service {
	t.Helper()
	f := fixture{t, c.Kube}
	f.namespace(ns)
	f.deployment(ns, "backend", map[string]string{"app": "backend"})
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		if i == n-1 {
			name = "s" + strings.Repeat("x", 61) + "z"
		}
		s := ipService(name, "ClusterIP", fmt.Sprintf("100.64.%d.%d", 1+i/200, 2+i%200))
		s.Spec.Selector = map[string]string{"app": "backend"}
		if i%20 == 5 {
			s.Spec.Type = corev1.ServiceTypeNodePort
		}
		if i%10 == 0 {
			s.Spec.Selector = nil
		}
		f.service(ns, s)
		if i%10 == 0 {
			_, err := c.Kube.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.9.0.%d", 1+i/10)}},
					Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return servicesIn(t, c.Kube, ns)
}

// ordinary drops the bridges from a namespace's Services.
func ordinary(in map[string]corev1.Service) map[string]corev1.Service {
	out := maps.Clone(in)
	maps.DeleteFunc(out, func(_ string, s corev1.Service) bool { return s.Labels[k8sops.OldIPBridgeLabel] == "true" })
	return out
}

// checkBridged checks that every Service of before moved into faultTarget with its spec kept, and
// that its old-IP bridge stands on its old IP with its ports and selector; a selector-less
// Service's bridge has its Endpoints.
func checkBridged(t *testing.T, kube kubernetes.Interface, ns string, before map[string]corev1.Service) {
	t.Helper()
	ctx := context.Background()
	now := servicesIn(t, kube, ns)
	if err := checkMovedKeepingSpecs(ordinary(now), before); err != nil {
		t.Fatal(err)
	}
	for key, old := range before {
		bkey := ns + "/" + recreation.OldIPBridgeName(ns, old.Name, old.Spec.ClusterIPs)
		b, ok := now[bkey]
		switch {
		case !ok:
			t.Errorf("%s has no old-IP bridge %s", key, bkey)
			continue
		case len(b.Name) > 63 || b.Spec.Type != corev1.ServiceTypeClusterIP || !slices.Equal(b.Spec.ClusterIPs, old.Spec.ClusterIPs):
			t.Errorf("bridge %s: type %s, IPs %v; want a ClusterIP Service on %v", bkey, b.Spec.Type, b.Spec.ClusterIPs, old.Spec.ClusterIPs)
		case b.Spec.Ports[0].Port != old.Spec.Ports[0].Port || b.Spec.Ports[0].NodePort != 0 || !maps.Equal(b.Spec.Selector, old.Spec.Selector):
			t.Errorf("bridge %s: ports %v selector %v; want %s's ports without node ports, and its selector", bkey, b.Spec.Ports, b.Spec.Selector, key)
		}
		if old.Spec.Selector == nil {
			want, err1 := kube.CoreV1().Endpoints(ns).Get(ctx, old.Name, metav1.GetOptions{})
			got, err2 := kube.CoreV1().Endpoints(ns).Get(ctx, b.Name, metav1.GetOptions{})
			if err1 != nil || err2 != nil || !reflect.DeepEqual(want.Subsets, got.Subsets) {
				t.Errorf("bridge %s of the selector-less %s: Endpoints %v (%v), want %v (%v)", bkey, key, got, err2, want, err1)
			}
		}
	}
}

// checkBridgeSlices waits until every old-IP bridge of a Service with a selector in ns is served
// by the EndpointSlice controller alone, with exactly the ready pods of selector: one slice,
// managed by the controller and owned by the bridge, and no copy left for k8scidr to delete. It
// returns how many of those slices are the copies the apply wrote (named <bridge>-k8scidr-N),
// which the controller adopted instead of writing its own.
func checkBridgeSlices(t *testing.T, kube kubernetes.Interface, ns, selector string) (adopted, bridges int) {
	t.Helper()
	var problem string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		adopted, bridges, problem = 0, 0, ""
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		var want []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				want = append(want, p.Status.PodIP)
			}
		}
		slices.Sort(want)
		all, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, b := range servicesIn(t, kube, ns) {
			if b.Labels[k8sops.OldIPBridgeLabel] != "true" || len(b.Spec.Selector) == 0 {
				continue
			}
			bridges++
			var own []discoveryv1.EndpointSlice
			for _, s := range all.Items {
				if s.Labels[discoveryv1.LabelServiceName] == b.Name {
					own = append(own, s)
				}
			}
			if len(own) != 1 {
				problem = fmt.Sprintf("bridge %s has %d EndpointSlices, want 1", b.Name, len(own))
				return false, nil
			}
			s := own[0]
			var got []string
			for _, ep := range s.Endpoints {
				got = append(got, ep.Addresses...)
			}
			slices.Sort(got)
			if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" || !ownedBySvc(&s, b.UID) || !slices.Equal(got, want) {
				problem = fmt.Sprintf("bridge %s: slice %s managed by %s, owners %v, addresses %v; want the controller's, owned by "+
					"the bridge, with the pods' %v", b.Name, s.Name, s.Labels[discoveryv1.LabelManagedBy], s.OwnerReferences, got, want)
				return false, nil
			}
			if strings.HasPrefix(s.Name, b.Name+"-k8scidr-") {
				adopted++
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("old-IP bridges not served by the EndpointSlice controller alone: %v (%s)", err, problem)
	}
	return adopted, bridges
}

// checkMovedKeepingSpecs: the same Services as before, each in faultTarget and equal but for its IPs.
func checkMovedKeepingSpecs(now, before map[string]corev1.Service) error {
	if len(now) != len(before) {
		return fmt.Errorf("%d Services before, %d now", len(before), len(now))
	}
	for key, s := range now {
		old, ok := before[key]
		switch {
		case !ok:
			return fmt.Errorf("%s is new", key)
		case !clusterIPIn(faultTarget, &s):
			return fmt.Errorf("%s not moved: %s %q %v (annotations %v)", key, s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIPs, s.Annotations)
		case !reflect.DeepEqual(specWithoutIPs(old), specWithoutIPs(s)):
			return fmt.Errorf("%s changed beyond its IPs:\n%+v\n%+v", key, specWithoutIPs(old).Spec, specWithoutIPs(s).Spec)
		}
	}
	return nil
}

// checkProgressEvents checks the Events a recreation of n Services posted on its journal's
// Lease: the last says it finished with every one moved; an apply that took longer than the
// progress interval posted progress on the way. The apply, w's last, says the same in the
// resource's summary attribute, not in a warning.
func checkProgressEvents(t *testing.T, kube kubernetes.Interface, n int, took time.Duration, w *cliWorkspace, out string) {
	t.Helper()
	lease := recreation.Journal{Namespace: recreation.DefaultJournalNamespace}.LeaseName()
	list, err := kube.CoreV1().Events(recreation.DefaultJournalNamespace).List(context.Background(),
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + lease})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string][]string{}
	for _, e := range list.Items {
		reasons[e.Reason] = append(reasons[e.Reason], e.Message)
	}
	t.Logf("progress Events on %s: %v", lease, reasons)
	done := fmt.Sprintf("Finished: %d of %d Services moved", n, n)
	if fin := reasons[recreation.FinishedReason]; len(fin) != 1 || !strings.HasPrefix(fin[0], done) {
		t.Errorf("the Finished Events %q, want one starting %q", fin, done)
	}
	if took > recreation.DefaultProgressEvery+5*time.Second && len(reasons[recreation.ProgressReason]) == 0 {
		t.Errorf("an apply of %s posted no progress Event", took)
	}
	expect(t, "summary", w.stateValue(recreationAddr, "summary"), knownvalue.StringRegexp(regexp.MustCompile("^"+regexp.QuoteMeta(done)+", ")))
	if strings.Contains(out, "Recreation Summary") {
		t.Errorf("the apply still ends on a summary warning:\n%s", out)
	}
}

func bridgeConfig(c *testcluster.Cluster, extra string) string {
	return providerBlock(c.Kubeconfig) + recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", faultTarget), extra)
}

// TestAccServiceRecreation_oldIPBridges moves 200 Services with old_ip_bridges = "all" while an
// independent watcher follows every old and new IP: an old IP goes unserved only between its
// Service's delete and its bridge (one gap per IP; how long is the bench's to measure, not a
// test's on two busy cores); every new IP is served after the
// move; specs are unchanged, and a selector-less Service's bridge serves its Endpoints. Lowering
// the setting is refused while the pods that ran before the move still run, and removes every
// bridge once they have been replaced.
func TestAccServiceRecreation_oldIPBridges(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n, ns = 200, "br"
	c := targetCluster(t)
	before := bridgeServices(t, c, ns, n)
	var oldIPs []string
	for _, s := range before {
		oldIPs = append(oldIPs, s.Spec.ClusterIPs...)
	}
	w := newCLIWorkspace(t, bridgeConfig(c, `  old_ip_bridges = "all"`))
	out := w.planFile()
	if got := w.planned(recreationAddr, "bridges"); got == nil || len(got.(map[string]any)) != n {
		t.Fatalf("the plan shows %v bridges, want one per moved Service (%d):\n%s", got, n, out)
	}
	watch := watchIPs(t, c.Kube, ns, oldIPs)
	start := time.Now()
	applied := w.applyFile()
	took := time.Since(start)
	t.Logf("moved %d Services with their bridges in %s", n, took.Round(time.Millisecond))
	checkProgressEvents(t, c.Kube, n, took, w, applied)
	// The new IPs are served once the moves are done (their EndpointSlices may trail the apply a little).
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		served := watch.served()
		for _, s := range ordinary(servicesIn(t, c.Kube, ns)) {
			if !served[s.Spec.ClusterIP] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("not every moved Service is served at its new IP: %v", err)
	}
	most, at, down := watch.worst()
	t.Logf("the longest an old IP went unserved: %s (%s)", most.Round(time.Millisecond), at)
	if len(down) > 0 {
		t.Errorf("old IPs unserved after the apply: %v", down)
	}
	watch.atMostOneGap(t, "a move leaves one gap, from the delete to its bridge")
	checkBridged(t, c.Kube, ns, before)
	// The copies that served the bridges at once are the controller's slices now: it adopted
	// them, unless it wrote its own before it saw the copy and then kept one of the two (which,
	// is up to its cache's order). A copy it did not take for its own it would delete every time.
	adopted, bridges := checkBridgeSlices(t, c.Kube, ns, "app=backend")
	t.Logf("%d of %d bridges with a selector are served by the copy the apply wrote, adopted by the EndpointSlice controller", adopted, bridges)
	if adopted == 0 {
		t.Errorf("the EndpointSlice controller adopted none of the copies of %d bridges", bridges)
	}
	w.converged()

	// Lowering the setting while the backend pods that ran before the move still run: refused.
	w.write(bridgeConfig(c, `  old_ip_bridges = "dns"`))
	out = w.planFile()
	inUse := diagRE("Old-IP Bridges Still in Use", "br/backend-", "of 200 bridges")
	if !inUse.MatchString(out) {
		t.Errorf("the plan does not warn that the bridges are in use:\n%s", out)
	}
	if out, err := w.run("apply", "tfplan"); err == nil || !inUse.MatchString(out) {
		t.Fatalf("removing the bridges under running pods: apply %v\n%s", err, out)
	}
	checkBridged(t, c.Kube, ns, before)

	replacePods(t, c.Kube, ns, "app=backend")
	checkBridgeSlices(t, c.Kube, ns, "app=backend") // adopted copies follow the pods
	w.planFile()
	w.applyFile()
	if left := len(servicesIn(t, c.Kube, ns)) - len(before); left != 0 {
		t.Errorf("%d bridges left after old_ip_bridges = \"dns\"", left)
	}
	if err := checkMovedKeepingSpecs(servicesIn(t, c.Kube, ns), before); err != nil {
		t.Error(err)
	}
	// The Endpoints copied to the bridges of selector-less Services go with them.
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		eps, err := c.Kube.CoreV1().Endpoints(ns).List(ctx, metav1.ListOptions{LabelSelector: k8sops.OldIPBridgeLabel})
		return err == nil && len(eps.Items) == 0, err
	})
	if err != nil {
		t.Errorf("bridge Endpoints left after the bridges went: %v", err)
	}
	w.converged()
}

// TestAccServiceRecreation_oldIPBridgeTTL: bridges older than old_ip_bridge_ttl are removed by
// the next plan and apply, without the check for running pods; the data sources report them
// apart from ordinary Services while they exist.
func TestAccServiceRecreation_oldIPBridgeTTL(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := targetCluster(t)
	const ns = "ttl"
	before := bridgeServices(t, c, ns, 4)
	extra := `  old_ip_bridges = "all"
  old_ip_bridge_ttl = "8s"
}

data "k8scidr_service_allocations" "all" {
  depends_on = [k8scidr_service_recreation.this]
}

data "k8scidr_service_moves" "after" {
  target_cidrs = [` + fmt.Sprintf("%q", faultTarget) + `]
  depends_on   = [k8scidr_service_recreation.this]
`
	w := newCLIWorkspace(t, bridgeConfig(c, extra))
	w.planFile()
	w.applyFile()
	applied := time.Now()
	checkBridged(t, c.Kube, ns, before)
	bridgeOf := func(key string) string {
		return recreation.OldIPBridgeName(ns, before[key].Name, before[key].Spec.ClusterIPs)
	}
	movesBridges, _ := w.stateValue("data.k8scidr_service_moves.after", "bridges").(map[string]any)
	if b, _ := movesBridges[ns+"/"+bridgeOf(ns+"/s001")].(map[string]any); len(movesBridges) != len(before) || b["service"] != ns+"/s001" {
		t.Errorf("the moves data source reports bridges %v, want the %d", movesBridges, len(before))
	}
	forBridge := map[string]string{}
	for key := range before {
		forBridge[bridgeOf(key)] = key
	}
	services, _ := w.stateValue("data.k8scidr_service_allocations.all", "services").([]any)
	bridgesSeen := 0
	for _, s := range services {
		s := s.(map[string]any)
		if s["bridge_for"] != nil {
			bridgesSeen++
			if s["stays"] != true || s["bridge_for"] != forBridge[s["name"].(string)] {
				t.Errorf("allocations report bridge %v", s)
			}
		}
	}
	if bridgesSeen != len(before) {
		t.Errorf("the allocations data source marks %d bridges, want %d", bridgesSeen, len(before))
	}
	// A plan saved before the TTL ran out (a change of parallelism, so that the apply plans
	// again) and applied after it: the apply does what the plan showed, keeping the bridges,
	// instead of failing as an inconsistent final plan.
	w.write(bridgeConfig(c, strings.Replace(extra, `old_ip_bridges = "all"`, "old_ip_bridges = \"all\"\n  parallelism = 3", 1)))
	w.planFile()
	if got, _ := w.planned(recreationAddr, "bridges").(map[string]any); len(got) != len(before) {
		t.Fatalf("before the TTL the plan keeps bridges %v, want the %d", got, len(before))
	}
	time.Sleep(time.Until(applied.Add(9 * time.Second)))
	w.applyFile()
	checkBridged(t, c.Kube, ns, before)
	// The pods ran before the move, but the TTL is the operator's word: no check.
	w.planFile()
	if got := w.planned(recreationAddr, "bridges"); got == nil || len(got.(map[string]any)) != 0 {
		t.Errorf("after the TTL the plan keeps bridges %v", got)
	}
	w.applyFile()
	if left := len(servicesIn(t, c.Kube, ns)) - len(before); left != 0 {
		t.Errorf("%d bridges left after their TTL", left)
	}
}

// TestAccKill_oldIPBridges SIGKILLs terraform and the provider in the middle of a recreation with
// old_ip_bridges = "all" (every move held between delete and create, so that some are caught
// there); the next apply leaves every moved Service with its bridge, nothing lost, no journal.
func TestAccKill_oldIPBridges(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n, ns = 60, "kb"
	c := targetCluster(t)
	before := bridgeServices(t, c, ns, n)
	w := newCLIWorkspace(t, bridgeConfig(c, `  old_ip_bridges = "all"`))
	killed, out, _ := interruptWhen(t, w, []string{"K8SCIDR_FAULT_DELAY_AFTER_DELETE=150ms"}, func() bool {
		moved, _ := movedCount(t, c.Kube, ns, faultTarget, n)
		return moved >= n/3
	}, sigkill, "apply", "-auto-approve")
	if !killed {
		t.Fatalf("the apply finished before the kill:\n%s", out)
	}
	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the recovery apply:\n%s", out)
		}
	}()
	checkBridged(t, c.Kube, ns, before)
	cms, err := c.Kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: recreation.JournalLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		var entries []recreation.JournalEntry
		if err := json.Unmarshal([]byte(cm.Data["entries.json"]), &entries); err != nil {
			t.Fatal(err)
		}
		t.Errorf("journal %s (created %s) left after the recovery apply:", cm.Name, cm.CreationTimestamp)
		for _, e := range entries {
			svc, err := c.Kube.CoreV1().Services(e.Service.Namespace).Get(context.Background(), e.Service.Name, metav1.GetOptions{})
			if err != nil {
				svc = &corev1.Service{}
			}
			var bridge *corev1.Service
			if e.Bridge != nil {
				if bridge, err = c.Kube.CoreV1().Services(e.Bridge.Namespace).Get(context.Background(), e.Bridge.Name, metav1.GetOptions{}); err != nil {
					bridge = nil
				}
			}
			t.Errorf("  %s written %s old %v → %v; now %v (created %s); bridge (created %s)", e.Key, e.Written.Format(time.RFC3339Nano),
				e.OldIPs, e.Service.Spec.ClusterIPs, svc.Spec.ClusterIPs, svc.CreationTimestamp, bridgeCreated(bridge))
		}
	}
	w.converged()
}

// bridgeCreated is when bridge b was created, for a failure message; "-" when there is none.
func bridgeCreated(b *corev1.Service) string {
	if b == nil {
		return "-"
	}
	return b.CreationTimestamp.Format(time.RFC3339Nano)
}

// TestAccServiceRecreation_restoreFindsBridge: an apply killed after a selector-less Service's
// move and its old-IP bridge, but before its hand-made Endpoints were checked back, leaves a
// journal entry the next plan restores while the bridge already holds the old IP. The restore
// finds the bridge (the apiserver refuses its create as "IP already allocated", not as
// AlreadyExists), brings the Endpoints back and removes the journal, with no warning.
func TestAccServiceRecreation_restoreFindsBridge(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const ns = "rf"
	c := targetCluster(t)
	ctx := context.Background()
	before := bridgeServices(t, c, ns, 2) // s000 is selector-less with hand-made Endpoints
	w := newCLIWorkspace(t, bridgeConfig(c, `  old_ip_bridges = "all"`))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	checkBridged(t, c.Kube, ns, before)

	// What the killed apply leaves: the journal entry of the finished move, the Endpoints gone.
	moved, err := c.Kube.CoreV1().Services(ns).Get(ctx, "s000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := c.Kube.CoreV1().Endpoints(ns).Get(ctx, "s000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bname := recreation.OldIPBridgeName(ns, "s000", before[ns+"/s000"].Spec.ClusterIPs)
	bridge, err := c.Kube.CoreV1().Services(ns).Get(ctx, bname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copyOf := func(s *corev1.Service) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels}, Spec: s.Spec}
	}
	entry := recreation.JournalEntry{Key: ns + "/s000", OldIPs: before[ns+"/s000"].Spec.ClusterIPs, Service: copyOf(moved),
		Endpoints: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Namespace: ns}, Subsets: ep.Subsets},
		Written:   time.Now().UTC()}
	b := copyOf(bridge)
	entry.Bridge = &b
	data, err := json.Marshal([]recreation.JournalEntry{entry})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "k8scidr-journal-killed", Labels: map[string]string{recreation.JournalLabel: "service-recreation"}},
		Data:       map[string]string{"entries.json": string(data)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kube.CoreV1().Endpoints(ns).Delete(ctx, "s000", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?s)restore\s+=\s+\{\s*\+\s+"rf/s000"`).MatchString(out) {
		t.Errorf("the apply's plan does not list rf/s000 under plan.restore:\n%s", out)
	}
	// The plan says what the journal holds; the apply itself warns of nothing.
	if w := slices.DeleteFunc(cliWarnings(out), func(s string) bool { return s == "Interrupted Apply Left Work in the Journal" }); len(w) > 0 {
		t.Errorf("the restore warned %v; want no warning:\n%s", w, out)
	}
	_, err = c.Kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).Get(ctx, "k8scidr-journal-killed", metav1.GetOptions{})
	assertGone(t, err, "the journal after the restore")
	if now, err := c.Kube.CoreV1().Services(ns).Get(ctx, bname, metav1.GetOptions{}); err != nil || now.UID != bridge.UID {
		t.Errorf("bridge %s: %v; want the one the first apply made (UID %s), kept", bname, err, bridge.UID)
	}
	checkBridged(t, c.Kube, ns, before) // the Endpoints are back, and the bridge serves them
	w.converged()
}

// TestAccServiceRecreation_bridgeForceRemoval: old_ip_bridges_force_removal "Remove[s] old-IP
// bridges when old_ip_bridges is set to dns even though running pods may still use an old IP":
// the removal the plan refuses while the backend pods that ran before the moves still run goes
// through with it, and takes the bridges' copied Endpoints along. Before that, a change to a
// selector-less Service's Endpoints reaches its bridge's copy with the next apply.
func TestAccServiceRecreation_bridgeForceRemoval(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const ns = "bf"
	c := targetCluster(t)
	before := bridgeServices(t, c, ns, 11) // s000 and s010 are selector-less
	w := newCLIWorkspace(t, bridgeConfig(c, `  old_ip_bridges = "all"`))
	w.planFile()
	w.applyFile()
	checkBridged(t, c.Kube, ns, before)

	// "A selector-less Service's bridge gets a copy of its Endpoints, which every apply that runs
	// brings in step": another client changes bf/s000's Endpoints; the next apply (here one that
	// moves a Service created since) copies the change to the bridge.
	ctx := context.Background()
	ep, err := c.Kube.CoreV1().Endpoints(ns).Get(ctx, "s000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep.Subsets[0].Addresses[0].IP = "10.9.9.9"
	if _, err := c.Kube.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	late := fixture{t, c.Kube}.service(ns, ipService("late", "ClusterIP", "100.64.99.9"))
	w.planFile()
	w.applyFile()
	before[ns+"/late"] = *late
	checkBridged(t, c.Kube, ns, before)

	w.write(bridgeConfig(c, `  old_ip_bridges = "dns"`))
	if out, err := w.run("apply", "-auto-approve"); err == nil || !diagRE("Old-IP Bridges Still in Use", "bf/backend-").MatchString(out) {
		t.Fatalf("removing the bridges under running pods without force_removal: %v\n%s", err, out)
	}
	w.write(bridgeConfig(c, "  old_ip_bridges = \"dns\"\n  old_ip_bridges_force_removal = true"))
	w.planFile()
	w.applyFile()
	if left := len(servicesIn(t, c.Kube, ns)) - len(before); left != 0 {
		t.Errorf("%d bridges left after a forced removal", left)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		eps, err := c.Kube.CoreV1().Endpoints(ns).List(ctx, metav1.ListOptions{LabelSelector: k8sops.OldIPBridgeLabel})
		return err == nil && len(eps.Items) == 0, err
	})
	if err != nil {
		t.Errorf("bridge Endpoints left after the forced removal: %v", err)
	}
	w.converged()
}
