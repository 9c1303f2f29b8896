// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

const recreationAddr = "k8scidr_service_recreation.this"

// recreationConfig creates the target range (left Terminating on destroy: the moved Services
// hold it) and moves the Services into it: dataArgs go to the moves data source, extra to the
// resource.
func recreationConfig(kubeconfig, dataArgs, extra string, cidrs ...string) string {
	return providerBlock(kubeconfig) + fmt.Sprintf(`
resource "k8scidr_service_cidr" "this" {
  name              = "new"
  cidrs             = [%s]
  wait_for_deletion = false
}
`, quoteJoin(cidrs)) + recreationHCL("k8scidr_service_cidr.this", fmt.Sprintf("  target_cidrs = [%s]\n%s", quoteJoin(cidrs), dataArgs), extra)
}

// fixture creates objects in a test cluster and fails the test on error.
type fixture struct {
	t    *testing.T
	kube kubernetes.Interface
}

func (f fixture) namespace(name string) {
	f.t.Helper()
	_, err := f.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) service(ns string, s *corev1.Service) *corev1.Service {
	f.t.Helper()
	got, err := f.kube.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("creating Service %s/%s: %v", ns, s.Name, err)
	}
	return got
}

// deployment runs replicas kwok pods labelled app=name.
func (f fixture) deployment(ns, name string, labels map[string]string) {
	f.t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}},
			},
		},
	}
	if labels[recreation.DNSServiceLabel] == "kube-dns" {
		// CoreDNS as installers ship it: it resolves upstream through the node, not through itself.
		d.Spec.Template.Spec.DNSPolicy = corev1.DNSDefault
	}
	if _, err := f.kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// waitReadySlice waits until the Service has an EndpointSlice with a ready endpoint.
func (f fixture) waitReadySlice(ns, name string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := f.kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, err
		}
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatalf("no ready endpoint for %s/%s: %v", ns, name, err)
	}
}

func ipService(name, typ string, ips ...string) *corev1.Service {
	s := clusterIPService(name, ips[0])
	s.Spec.Type = corev1.ServiceType(typ)
	s.Spec.ClusterIPs = ips
	return s
}

// mixedServices creates the write-ups' kinds of Service, and kube-dns at 100.64.0.10 with a
// running CoreDNS. It returns the Services expected to move, old IPs → new IPs.
func mixedServices(f fixture) map[string][2][]string {
	f.namespace("app")
	f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
	f.deployment("app", "web", map[string]string{"app": "web"})
	dns := ipService("kube-dns", "ClusterIP", "100.64.0.10")
	dns.Spec.Selector = map[string]string{"k8s-app": "kube-dns"}
	dns.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)}}
	f.service("kube-system", dns)

	web := ipService("web", "ClusterIP", "100.64.7.200")
	web.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "web-1.2.3"}
	web.Annotations = map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "app"}
	web.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	web.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	web.Spec.ExternalIPs = []string{"192.0.2.10"}
	f.service("app", web)

	np := ipService("np", "NodePort", "100.64.1.5")
	np.Spec.Selector = map[string]string{"app": "web"}
	np.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, AppProtocol: ptr.To("http")}}
	np.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	np.Spec.PublishNotReadyAddresses = true
	f.service("app", np)

	lb := ipService("lb", "LoadBalancer", "100.64.12.7")
	f.service("app", lb)
	headless := clusterIPService("headless", "None")
	headless.Spec.ClusterIPs = nil
	f.service("app", headless)
	f.service("app", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}})

	// Selector-less, with hand-made Endpoints and an EndpointSlice it owns.
	manual := ipService("manual", "ClusterIP", "100.64.2.2")
	manual.Spec.Selector = nil
	manualSvc := f.service("app", manual)
	ctx := context.Background()
	_, err := f.kube.CoreV1().Endpoints("app").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = f.kube.DiscoveryV1().EndpointSlices("app").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "manual-extra",
			Labels:          map[string]string{discoveryv1.LabelServiceName: "manual", discoveryv1.LabelManagedBy: "by-hand.example.com"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "manual", UID: manualSvc.UID}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.4"}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
	}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}

	cm, err := f.kube.CoreV1().ConfigMaps("app").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	owned := ipService("owned", "ClusterIP", "100.64.3.1")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: cm.UID, Controller: ptr.To(true)}}
	f.service("app", owned)
	withRef := ipService("withref", "ClusterIP", "100.64.4.4")
	withRef.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: cm.UID}}
	f.service("app", withRef)
	fin := ipService("fin", "ClusterIP", "100.64.3.2")
	fin.Finalizers = []string{"example.com/protect"}
	f.service("app", fin)

	ds := ipService("ds", "ClusterIP", "100.64.5.5", "fd00:10::55")
	ds.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	ds.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	f.service("app", ds)

	// preserve_offset beyond the /15's size: offsets 5.0.5 and 7.0.5 in the /13 both wrap to
	// 1.0.5, so the later one (by old IP) probes to the next address; offset 2.0.1 wraps to the
	// target's first address, which stays free for default/kubernetes.
	f.service("app", ipService("far", "ClusterIP", "100.71.0.5"))
	f.service("app", ipService("far2", "ClusterIP", "100.69.0.5"))
	f.service("app", ipService("first", "ClusterIP", "100.66.0.1"))

	f.waitReadySlice("kube-system", "kube-dns")
	f.waitReadySlice("app", "web")
	return map[string][2][]string{
		"kube-system/kube-dns": {{"100.64.0.10"}, {"172.24.0.10"}},
		"app/np":               {{"100.64.1.5"}, {"172.24.1.5"}},
		"app/manual":           {{"100.64.2.2"}, {"172.24.2.2"}},
		"app/withref":          {{"100.64.4.4"}, {"172.24.4.4"}},
		"app/ds":               {{"100.64.5.5", "fd00:10::55"}, {"172.24.5.5", "fd00:24::55"}},
		"app/web":              {{"100.64.7.200"}, {"172.24.7.200"}},
		"app/far2":             {{"100.69.0.5"}, {"172.25.0.5"}},
		"app/far":              {{"100.71.0.5"}, {"172.25.0.6"}},
		"app/first":            {{"100.66.0.1"}, {"172.24.0.2"}},
	}
}

// movesCheck checks a planned moves value: the old and new IPs of each Service, its type and
// a UID.
func movesCheck(moves map[string][2][]string) knownvalue.Check {
	m := map[string]knownvalue.Check{}
	for k, v := range moves {
		m[k] = moveCheck(v[0], v[1])
	}
	return knownvalue.MapExact(m)
}

// moveCheck checks one planned move: its old and new IPs, its type and a UID.
func moveCheck(oldIPs, newIPs []string) knownvalue.Check {
	return knownvalue.StringRegexp(regexp.MustCompile(`^` + regexp.QuoteMeta(movetext.Pair(oldIPs, newIPs)) + ` \([A-Za-z]+, uid [0-9a-f-]{36}\)$`))
}

// plannedMove is one move of the recreation in the saved plan tfplan, parsed.
func plannedMove(t *testing.T, w *cliWorkspace, key string) movetext.Move {
	t.Helper()
	s, _ := dig(w.planned(recreationAddr, "plan.moves"), key).(string)
	m, err := movetext.Parse(s)
	if err != nil {
		t.Fatalf("planned move %s: %v", key, err)
	}
	return m
}

// recreatedCheck checks a recreated value: the old and new IPs of each Service.
func recreatedCheck(moves map[string][2][]string) knownvalue.Check {
	m := map[string]knownvalue.Check{}
	for k, v := range moves {
		m[k] = knownvalue.StringExact(movetext.Pair(v[0], v[1]))
	}
	return knownvalue.MapExact(m)
}

func strListCheck(v ...string) knownvalue.Check {
	checks := make([]knownvalue.Check, len(v))
	for i, s := range v {
		checks[i] = knownvalue.StringExact(s)
	}
	return knownvalue.ListExact(checks)
}

// TestAccServiceRecreation_mixed moves a mixed set of Services on a dual-stack cluster: the plan
// shows every new IP, apply recreates exactly that (kube-dns first, then the DNS bridge), nothing
// but the IPs changes, a Service added later shows up in the next plan, and dns_bridge = false
// removes the bridge without moving completed_at or dns_moved_at.
func TestAccServiceRecreation_mixed(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13", "fd00:10::/108"}})
	f := fixture{t, c.Kube}
	moves := mixedServices(f)
	before := servicesIn(t, c.Kube, "")
	skipped := map[string]knownvalue.Check{}
	for k, re := range map[string]string{
		"default/kubernetes": "^owned by the apiserver", "app/lb": "^LoadBalancer", "app/headless": "^headless",
		"app/ext": "^ExternalName", "app/owned": "^owned by ConfigMap owner", "app/fin": "^carries finalizer example.com/protect",
	} {
		skipped[k] = knownvalue.StringRegexp(regexp.MustCompile(re))
	}
	cidrs := []string{"172.24.0.0/15", "fd00:24::/108"}
	const movesAddr = "data.k8scidr_service_moves.this"
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", cidrs...))

	w.planFile()
	expect(t, "planned moves", w.planned(recreationAddr, "plan.moves"), movesCheck(moves))
	expect(t, "planned restore", w.planned(recreationAddr, "plan.restore"), knownvalue.MapSizeExact(0))
	expect(t, "planned first", w.planned(recreationAddr, "plan.first_moves"), strListCheck("kube-system/kube-dns"))
	expect(t, "planned dns_service", w.planned(recreationAddr, "plan.dns_service"), knownvalue.StringExact("kube-system/kube-dns"))
	w.applyFile()
	if err := checkMoved(c.Kube, before, moves); err != nil {
		t.Fatal(err)
	}
	expect(t, "skipped", w.stateValue(movesAddr, "skipped"), knownvalue.MapExact(skipped))
	expect(t, "dns_service_ips", w.stateValue(movesAddr, "dns_service_ips"), strListCheck("172.24.0.10"))
	expect(t, "recreated", w.stateValue(recreationAddr, "recreated"), recreatedCheck(moves))
	expect(t, "moves", w.stateValue(recreationAddr, "plan.moves"), movesCheck(moves))
	expect(t, "not_moved", w.stateValue(recreationAddr, "not_moved"), knownvalue.MapSizeExact(0))
	dnsMovedAt := w.stateValue(recreationAddr, "dns_moved_at")
	expect(t, "dns_moved_at", dnsMovedAt, knownvalue.StringRegexp(rfc3339RE))
	// Without a refresh the state still holds the moves just made: a harmless update, documented.
	w.planFile("-refresh=false")
	if got := w.plannedActions(recreationAddr); !slices.Equal(got, []string{"update"}) {
		t.Errorf("plan -refresh=false right after the apply: %v, want the documented harmless update", got)
	}
	w.converged()

	// A Service created in the old range after the move is the next plan's work; moving it
	// leaves dns_moved_at alone, and the data source reads the same time off kube-dns.
	f.service("app", ipService("late", "ClusterIP", "100.64.9.9"))
	late := map[string][2][]string{"app/late": {{"100.64.9.9"}, {"172.24.9.9"}}}
	w.planFile()
	expect(t, "late moves", w.planned(recreationAddr, "plan.moves"), movesCheck(late))
	expect(t, "late first", w.planned(recreationAddr, "plan.first_moves"), knownvalue.ListSizeExact(0))
	w.applyFile()
	w.converged()
	expect(t, "dns_moved_at after a later move", w.stateValue(recreationAddr, "dns_moved_at"), knownvalue.StringExact(fmt.Sprint(dnsMovedAt)))
	expect(t, "the data source's dns_moved_at", w.stateValue(movesAddr, "dns_moved_at"), knownvalue.StringExact(fmt.Sprint(dnsMovedAt)))

	// dns_bridge = false is refused while app/web's pod, started before the DNS move, runs;
	// once it is replaced, the bridge goes and nothing moves.
	completedAt := w.stateValue(recreationAddr, "completed_at")
	// With no kubelet-config to read (kOps, EKS, GKE) the nodes registered before the DNS move
	// may still hand out its old IP: refused, naming them. Once the kubelets' clusterDNS can be
	// read, the pods are judged.
	w.write(recreationConfig(c.Kubeconfig, "  dns_bridge = false", "", cidrs...))
	if out, err := w.run("apply", "-auto-approve"); err == nil || !diagRE("Error: Nodes From Before the DNS Move", "no kube-system/kubelet-config", "Ready nodes registered before the DNS move", "kwok-").MatchString(out) {
		t.Fatalf("removing the bridge with the nodes of before the move and no kubelet-config: apply %v\n%s", err, out)
	}
	kubeletsOnDNSService(t, c, w)
	if out, err := w.run("apply", "-auto-approve"); err == nil || !diagRE("Error: DNS Bridge Still in Use", "app/web-").MatchString(out) {
		t.Fatalf("removing the bridge under app/web's pod: apply %v\n%s", err, out)
	}
	replacePods(t, c.Kube, "app", "app=web")
	w.planFile()
	w.applyFile()
	w.converged()
	expect(t, "completed_at after removing the bridge", w.stateValue(recreationAddr, "completed_at"), knownvalue.StringExact(fmt.Sprint(completedAt)))
	expect(t, "recreated after removing the bridge", w.stateValue(recreationAddr, "recreated"), recreatedCheck(late))
	_, err := c.Kube.CoreV1().Services("kube-system").Get(context.Background(), recreation.DefaultDNSBridgeName, metav1.GetOptions{})
	assertGone(t, err, "the DNS bridge after dns_bridge = false")

	importThenForget(t, w, c.Kube, strings.Join(cidrs, ","))
}

// importThenForget imports the recreation of a converged cluster again (a team adopting a
// migration made elsewhere): the import keeps the id and target ranges, its next plan moves
// nothing and its apply touches no Service; then a destroy only forgets: every Service keeps its
// UID and IPs.
func importThenForget(t *testing.T, w *cliWorkspace, kube kubernetes.Interface, importID string) {
	t.Helper()
	id := w.stateValue(recreationAddr, "id")
	before := servicesIn(t, kube, "")
	for _, args := range [][]string{{"state", "rm", recreationAddr}, {"import", recreationAddr, importID}} {
		if out, err := w.run(args...); err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	expect(t, "imported id", w.stateValue(recreationAddr, "id"), knownvalue.StringExact(fmt.Sprint(id)))
	expect(t, "imported target_cidrs", w.stateValue(recreationAddr, "plan.target_cidrs"), strListCheck(strings.Split(importID, ",")...))
	expect(t, "imported moves", w.stateValue(recreationAddr, "plan.moves"), knownvalue.MapSizeExact(0))
	expect(t, "imported recreated", w.stateValue(recreationAddr, "recreated"), knownvalue.MapSizeExact(0))
	w.planFile()
	expect(t, "moves planned after the import", w.planned(recreationAddr, "plan.moves"), knownvalue.MapSizeExact(0))
	w.applyFile()
	w.converged()
	sameServices(t, "after applying the imported recreation", before, servicesIn(t, kube, ""))

	if out, err := w.run("destroy", "-auto-approve", "-target="+recreationAddr); err != nil {
		t.Fatalf("terraform destroy: %v\n%s", err, out)
	}
	sameServices(t, "after destroying the recreation", before, servicesIn(t, kube, ""))
}

// sameServices fails the test unless after holds the Services of before, each with its UID and IPs.
func sameServices(t *testing.T, when string, before, after map[string]corev1.Service) {
	t.Helper()
	for key, b := range before {
		a, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s: Service %s is gone", when, key)
		case a.UID != b.UID || !slices.Equal(a.Spec.ClusterIPs, b.Spec.ClusterIPs):
			t.Errorf("%s: Service %s changed: UID %s → %s, IPs %v → %v", when, key, b.UID, a.UID, b.Spec.ClusterIPs, a.Spec.ClusterIPs)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%s: %d Services, want the %d there were", when, len(after), len(before))
	}
}

// replacePods deletes the pods of namespace ns matching selector and waits until their
// controller has made as many new ones.
func replacePods(t *testing.T, kube kubernetes.Interface, ns, selector string) {
	t.Helper()
	ctx := context.Background()
	old, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	gone := map[types.UID]bool{}
	for _, p := range old.Items {
		gone[p.UID] = true
		if err := kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		fresh := 0
		for _, p := range now.Items {
			if gone[p.UID] {
				return false, nil
			}
			fresh++
		}
		return fresh >= len(old.Items), nil
	})
	if err != nil {
		t.Fatalf("pods %s in %s not replaced: %v", selector, ns, err)
	}
}

var rfc3339RE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// servicesIn reads the Services of a namespace ("" for all) by namespace/name.
func servicesIn(t *testing.T, kube kubernetes.Interface, ns string) map[string]corev1.Service {
	t.Helper()
	list, err := kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Service{}
	for _, s := range list.Items {
		if s.Labels[recreation.HandOverLabel] != "" {
			continue // a hand-over's carrier or bridge, there only mid-move
		}
		out[s.Namespace+"/"+s.Name] = s
	}
	return out
}

// specWithoutIPs is what must survive a move: everything a user or controller set, but the IPs
// (and the record of the IPs before, which a move writes).
// handedOver reports whether the move of svc to newIPs is a hand-over, which keeps the Service
// (its UID): a ClusterIP Service with a selector and no external IPs of its own, every IP moving.
func handedOver(svc *corev1.Service, newIPs []string) bool {
	return svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.Selector) > 0 && len(svc.Spec.ExternalIPs) == 0 &&
		len(recreation.MovingIPs(svc.Spec.ClusterIPs, newIPs)) == len(svc.Spec.ClusterIPs)
}

func specWithoutIPs(s corev1.Service) corev1.Service {
	ann := maps.Clone(s.Annotations)
	delete(ann, k8sops.PreviousClusterIPsAnnotation)
	delete(ann, k8sops.MovedAtAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	out := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels,
		Annotations: ann, OwnerReferences: s.OwnerReferences, Finalizers: s.Finalizers}, Spec: *s.Spec.DeepCopy()}
	out.Spec.ClusterIP, out.Spec.ClusterIPs = "", nil
	return out
}

// checkMoved verifies the cluster after the move: IPs as planned, every other field as before,
// endpoints intact, kube-dns recreated before the others, the bridge on its old IP, no journal.
func checkMoved(kube kubernetes.Interface, before map[string]corev1.Service, moves map[string][2][]string) error {
	ctx := context.Background()
	after := map[string]corev1.Service{}
	list, err := kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		after[s.Namespace+"/"+s.Name] = s
	}
	var problems []string
	dnsRV := ""
	for key, old := range before {
		now, ok := after[key]
		if !ok {
			problems = append(problems, key+" is missing")
			continue
		}
		mv, moved := moves[key]
		switch {
		case moved && !slices.Equal(now.Spec.ClusterIPs, mv[1]):
			problems = append(problems, fmt.Sprintf("%s has %v, planned %v", key, now.Spec.ClusterIPs, mv[1]))
		case moved && (now.UID == old.UID) != handedOver(&old, mv[1]):
			problems = append(problems, fmt.Sprintf("%s kept its UID: %v, want %v (only a ClusterIP Service with a selector is handed over, never deleted)",
				key, now.UID == old.UID, handedOver(&old, mv[1])))
		case !moved && now.UID != old.UID:
			problems = append(problems, key+" was recreated but not planned")
		}
		if !reflect.DeepEqual(specWithoutIPs(old), specWithoutIPs(now)) {
			problems = append(problems, fmt.Sprintf("%s changed beyond its IPs:\n%+v\n%+v", key, specWithoutIPs(old), specWithoutIPs(now)))
		}
		if key == recreation.DNSServiceKey {
			dnsRV = now.ResourceVersion
		}
	}
	// Resource versions follow etcd's revision: kube-dns was written before every other move.
	for key := range moves {
		if key != recreation.DNSServiceKey && len(after[key].ResourceVersion) > 0 && rvLess(after[key].ResourceVersion, dnsRV) {
			problems = append(problems, key+" was recreated before kube-dns")
		}
	}
	bridge, ok := after["kube-system/"+recreation.DefaultDNSBridgeName]
	if !ok || bridge.Spec.ClusterIP != "100.64.0.10" || bridge.Spec.Selector["k8s-app"] != "kube-dns" || bridge.Labels[k8sops.DNSBridgeLabel] != "true" {
		problems = append(problems, fmt.Sprintf("DNS bridge wrong: %+v", bridge))
	}
	ep, err := kube.CoreV1().Endpoints("app").Get(ctx, "manual", metav1.GetOptions{})
	if err != nil || len(ep.Subsets) != 1 || ep.Subsets[0].Addresses[0].IP != "10.1.2.3" {
		problems = append(problems, fmt.Sprintf("hand-made Endpoints of app/manual not restored: %v %+v", err, ep))
	}
	slice, err := kube.DiscoveryV1().EndpointSlices("app").Get(ctx, "manual-extra", metav1.GetOptions{})
	if err != nil || !slices.ContainsFunc(slice.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == after["app/manual"].UID }) {
		problems = append(problems, fmt.Sprintf("owned EndpointSlice of app/manual not restored to the new owner: %v", err))
	}
	webSlices, err := kube.DiscoveryV1().EndpointSlices("app").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil || len(webSlices.Items) == 0 || webSlices.Items[0].OwnerReferences[0].UID != after["app/web"].UID {
		problems = append(problems, fmt.Sprintf("app/web has no EndpointSlice for its new UID: %v", err))
	}
	cms, err := kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).List(ctx, metav1.ListOptions{LabelSelector: recreation.JournalLabel})
	if err != nil || len(cms.Items) > 0 {
		problems = append(problems, fmt.Sprintf("journal left behind: %v %d", err, len(cms.Items)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// diagRE matches a diagnostic's parts in order, whatever the line wrapping. A part "@attr" is
// the attribute (or block) terraform points the diagnostic at: the source line it quotes, which
// for a diagnostic without an attribute path is the block's first line instead. A bare attribute
// name would match that quoted line whatever the diagnostic's path.
func diagRE(parts ...string) *regexp.Regexp {
	quoted := make([]string, len(parts))
	for i, p := range parts {
		if attr, ok := strings.CutPrefix(p, "@"); ok {
			quoted[i] = `\n\s*\d+:\s+` + regexp.QuoteMeta(attr) + `\s*[={]`
			continue
		}
		quoted[i] = strings.Join(strings.Fields(regexp.QuoteMeta(p)), `\s+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(quoted, ".*"))
}

// logDiag logs the diagnostic titled summary ("Error: …" or "Warning: …") from terraform's
// output, up to the next diagnostic: the refusal tests show the text a user reads (go test -v).
func logDiag(t *testing.T, out, summary string) {
	t.Helper()
	i := strings.Index(out, summary)
	if i < 0 {
		return
	}
	text := out[i:]
	if j := regexp.MustCompile(`\n(Error|Warning): `).FindStringIndex(text[len(summary):]); j != nil {
		text = text[:len(summary)+j[0]]
	}
	t.Logf("%s", strings.TrimSpace(text))
}

func rvLess(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

// TestAccServiceRecreation_invalid: mistakes are plan-time errors naming the attribute, those
// that need no cluster before it is read; hand-edited moves are refused before anything is
// touched; a target no Ready ServiceCIDR serves is a plan warning (it may be created in the same
// apply) and an apply error before anything moves.
func TestAccServiceRecreation_invalid(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	keep := f.service("app", ipService("keep", "ClusterIP", "100.64.1.1"))
	before := servicesIn(t, c.Kube, "")
	data := func(body string) string {
		return providerBlock(c.Kubeconfig) + "data \"k8scidr_service_moves\" \"this\" {\n" + body + "\n}\n"
	}
	// A resource whose moves are written by hand, as an edited configuration would have them.
	handMoves := func(target, newIP string) string {
		return providerBlock(c.Kubeconfig) + fmt.Sprintf(`
resource "k8scidr_service_recreation" "this" {
%s}
`, handPlan(map[string]string{"target_cidrs": fmt.Sprintf("[%q]", target),
			"moves": fmt.Sprintf(`{ "app/keep" = "100.64.1.1 to %s (ClusterIP, uid %s)" }`, newIP, keep.UID)}))
	}
	unchanged := func(*terraform.State) error {
		after := servicesIn(t, c.Kube, "")
		if !maps.EqualFunc(before, after, func(a, b corev1.Service) bool { return a.UID == b.UID }) {
			return fmt.Errorf("Services changed")
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: data(`target_cidrs = []`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)target_cidrs.*at least 1`)},
			{Config: data(`target_cidrs = ["172.24.0.1/15"]`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)target_cidrs.*172.24.0.0/15`)},
			{Config: data("target_cidrs = [\"172.24.0.0/15\"]\nip_assignment = \"random\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)ip_assignment.*preserve_offset`)},
			{Config: data("target_cidrs = [\"172.24.0.0/15\"]\nexclude = [\"nope\"]"), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)exclude.*namespace/name`)},
			{Config: data("target_cidrs = [\"172.24.0.0/15\"]\nselector = \"a in (b\""), PlanOnly: true, ExpectError: diagRE("Invalid Label Selector", "selector")},
			{Config: recreationConfig(c.Kubeconfig, `first = ["app/keep", "app/nope"]`, "", "172.24.0.0/15"), PlanOnly: true,
				ExpectError: diagRE("Service In first Does Not Exist", `first = ["app/keep", "app/nope"]`, `"app/nope" is not a Service`)},
			{Config: recreationConfig(c.Kubeconfig, "", "parallelism = 0", "172.24.0.0/15"), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)parallelism.*between 1 and 200`)},
			// Hand edits: outside the target, the target's network, broadcast and first addresses.
			{Config: handMoves("172.24.0.0/15", "10.0.0.1"), PlanOnly: true,
				ExpectError: diagRE("IP Outside the Target", `plan.moves["app/keep"]`, "10.0.0.1 is in none of target_cidrs")},
			{Config: handMoves("172.24.0.0/15", "172.25.255.255"), PlanOnly: true,
				ExpectError: diagRE("Unallocatable IP", `plan.moves["app/keep"]`, "broadcast")},
			{Config: handMoves("172.24.0.0/15", "172.24.0.1"), PlanOnly: true,
				ExpectError: diagRE("Reserved IP", `plan.moves["app/keep"]`, "first address")},
			// A first move that is not among the moves.
			{Config: providerBlock(c.Kubeconfig) + "resource \"k8scidr_service_recreation\" \"this\" {\n" +
				handPlan(map[string]string{"first_moves": `["app/nope"]`}) + "}\n", PlanOnly: true,
				ExpectError: diagRE("First Move Not Among the Moves", `plan.first_moves[0]`, `"app/nope" is to move first`)},
			// A /30 holds two addresses and .1 is reserved: one Service fits, two do not.
			{PreConfig: func() { f.service("app", ipService("second", "ClusterIP", "100.64.1.2")) },
				Config: recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/30"), PlanOnly: true,
				ExpectError: diagRE("Target Ranges Cannot Hold the Services", "target_cidrs", "is full")},
			// Not served: no ServiceCIDR is created here. Apply refuses before touching anything.
			{Config: providerBlock(c.Kubeconfig) + recreationHCL("", `  target_cidrs = ["172.24.0.0/15"]`, ""),
				ExpectError: diagRE("Target Range Not Served", "target_cidrs", "No Ready ServiceCIDR covers 172.24.0.0/15"),
				Check:       unchanged},
		},
	})
	before["app/second"] = servicesIn(t, c.Kube, "")["app/second"]
	if err := unchanged(nil); err != nil {
		t.Error(err)
	}
	// The plan of that last step is a warning on the recreation, not an error: the range may be
	// created in the same apply.
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+recreationHCL("", `  target_cidrs = ["172.24.0.0/15"]`, ""))
	if at := w.warnedAt("Target Range Not Served"); !slices.Contains(at, recreationAddr) {
		t.Errorf("the plan with no range serving the target warned %q at %v, want %s among them", "Target Range Not Served", at, recreationAddr)
	}
}

// TestAccServiceRecreation_bridgeOutsideReadyRange: kube-dns sits in a range that is Terminating,
// so its old IP cannot stay valid for the bridge: a plan warning, and an apply error before
// anything moves; with dns_bridge = false the move goes ahead.
func TestAccServiceRecreation_bridgeOutsideReadyRange(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	ctx := context.Background()
	client := clientFor(c)
	if _, err := servicecidr.CreateServiceCIDR(ctx, client, "old2", []string{"10.200.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	if _, err := servicecidr.WaitServiceCIDRReady(ctx, client, "old2"); err != nil {
		t.Fatal(err)
	}
	dns := ipService("kube-dns", "ClusterIP", "10.200.0.10")
	dns.Spec.Selector = map[string]string{"k8s-app": "kube-dns"}
	f.service("kube-system", dns)
	if err := servicecidr.DeleteServiceCIDR(ctx, client, "old2", false); err != nil {
		t.Fatal(err)
	}
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))
	if out := w.planFile(); !diagRE("Warning: DNS Bridge IP Outside a Ready Range", "This is an error at apply time").MatchString(out) {
		t.Errorf("the plan does not warn about the bridge IP:\n%s", out)
	}
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Error: DNS Bridge IP Outside a Ready Range", "old IP 10.200.0.10, which no Ready ServiceCIDR holds").MatchString(out) {
		t.Errorf("apply: %v\n%s", err, out)
	}
	if s, err := c.Kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{}); err != nil || s.Spec.ClusterIP != "10.200.0.10" {
		t.Fatalf("kube-dns touched: %v", err)
	}
	// Without the bridge, kube-dns's move is an outage unless the user states why it is not.
	w.write(recreationConfig(c.Kubeconfig, "  dns_bridge = false", "", "172.24.0.0/15"))
	if out, err := w.run("plan", "-out=tfplan"); err == nil || !diagRE("Error: Cluster DNS Would Move Without Its Bridge", "with data.k8scidr_service_moves.this",
		"kube-system/kube-dns", "dns_bridge_off_reason").MatchString(out) {
		t.Errorf("moving kube-dns with dns_bridge = false and no reason passed plan: %v\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Cluster DNS Would Move Without Its Bridge")
	}
	w.write(recreationConfig(c.Kubeconfig, "  dns_bridge = false\n  dns_bridge_off_reason = \"every node runs NodeLocal DNSCache\"", "", "172.24.0.0/15"))
	if out := w.planFile(); diagRE("DNS Bridge IP Outside a Ready Range").MatchString(out) {
		t.Errorf("with dns_bridge = false the plan still warns about the bridge:\n%s", out)
	}
	w.applyFile()
	w.converged()
	expect(t, "recreated", w.stateValue(recreationAddr, "recreated"),
		recreatedCheck(map[string][2][]string{"kube-system/kube-dns": {{"10.200.0.10"}, {"172.24.0.10"}}}))
}

// TestAccEndpointsControllerDeletesHandMadeEndpoints keeps proving the fact the journal of
// selector-less Services rests on: on the newest Kubernetes the endpoints controller deletes a
// Service's hand-made Endpoints together with the Service.
func TestAccEndpointsControllerDeletesHandMadeEndpoints(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "endpoints-fact")
	kube := testAccCluster.Kube
	svc := ipService("manual", "ClusterIP", "100.64.44.4")
	svc.Spec.Selector = nil
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := kube.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleteService(t, kube, ns, "manual")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Endpoints(ns).Get(ctx, "manual", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatal("the hand-made Endpoints outlived their Service: the journal of Endpoints may be unnecessary on this version")
	}
}

// TestAccServiceRecreation_unknownAtPlan: a moves data source that depends on a resource with
// changes is read only during apply, so the plan cannot show the moves: it says so, and the
// apply still moves exactly what the data source then reads.
func TestAccServiceRecreation_unknownAtPlan(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("web", "ClusterIP", "100.64.7.200"))
	config := providerBlock(c.Kubeconfig) + `
resource "k8scidr_service_cidr" "this" {
  name              = "new"
  cidrs             = ["172.24.0.0/15"]
  wait_for_deletion = false
}
` + recreationHCL("k8scidr_service_cidr.this", "  target_cidrs = [\"172.24.0.0/15\"]\n  depends_on = [k8scidr_service_cidr.this]", "")
	web := map[string][2][]string{"app/web": {{"100.64.7.200"}, {"172.24.7.200"}}}
	w := newCLIWorkspace(t, config)
	if out := w.planFile(); !diagRE("Service Moves Not Known Until Apply", "will move Services nobody reviewed").MatchString(out) {
		t.Errorf("the plan does not warn that the moves are unknown:\n%s", out)
	}
	if !w.plannedUnknown(recreationAddr, "plan.moves") || !w.plannedUnknown(recreationAddr, "recreated") {
		t.Error("moves and recreated must be unknown at plan")
	}
	w.applyFile()
	w.converged()
	expect(t, "moves", w.stateValue(recreationAddr, "plan.moves"), movesCheck(web))
	expect(t, "recreated", w.stateValue(recreationAddr, "recreated"), recreatedCheck(web))
}

// TestAccServiceRecreation_firstNoLongerHolds: "If a first move no longer holds at apply,
// nothing is moved." A saved plan moves app/a first; before it is applied app/a is replaced
// (a new object, the same name): the apply refuses and moves neither app/a nor app/b. A new
// plan then moves both.
func TestAccServiceRecreation_firstNoLongerHolds(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("a", "ClusterIP", "100.64.1.1"))
	f.service("app", ipService("b", "ClusterIP", "100.64.1.2"))
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  first = ["app/a"]`, "", "172.24.0.0/15"))
	w.planFile()
	ctx := context.Background()
	if err := c.Kube.CoreV1().Services("app").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.service("app", ipService("a", "ClusterIP", "100.64.1.1"))
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Error: Planned First Move No Longer Holds", "app/a",
		"so nothing was moved", "Run terraform plan again").MatchString(out) {
		t.Errorf("the apply with app/a replaced since the plan: %v\n%s", err, out)
	}
	for key, want := range map[string]string{"app/a": "100.64.1.1", "app/b": "100.64.1.2"} {
		if got := servicesIn(t, c.Kube, "app")[key].Spec.ClusterIP; got != want {
			t.Errorf("%s at %s after the refused apply, want %s (untouched)", key, got, want)
		}
	}
	w.planFile()
	w.applyFile()
	for key, want := range map[string]string{"app/a": "172.24.1.1", "app/b": "172.24.1.2"} {
		if got := servicesIn(t, c.Kube, "app")[key].Spec.ClusterIP; got != want {
			t.Errorf("%s at %s after the new plan's apply, want %s", key, got, want)
		}
	}
}

// TestAccServiceRecreation_includeLoadBalancersAndOwned moves what the defaults leave
// (TestAccServiceRecreation_mixed checks they are skipped): a LoadBalancer Service and a Service
// a controller owns. The docs promise, for include_load_balancers: "Also move LoadBalancer
// Services"; for include_owned: "Also move Services owned by a controller"; and for the copy:
// "node ports, health-check node port, external IPs, session affinity, traffic policies … survive".
// The apiserver allocates the node ports and the health-check node port here, so only a copy that
// keeps them gets the same ones back.
func TestAccServiceRecreation_includeLoadBalancersAndOwned(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	lb := ipService("lb", "LoadBalancer", "100.64.12.7")
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lb.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}, {Name: "https", Port: 443}}
	lb.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	lb.Spec.ExternalIPs = []string{"192.0.2.12"}
	created := f.service("app", lb)
	if created.Spec.HealthCheckNodePort == 0 || created.Spec.Ports[0].NodePort == 0 || created.Spec.Ports[1].NodePort == 0 {
		t.Fatalf("the apiserver allocated no node ports for app/lb: %+v", created.Spec)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps("app").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := ipService("owned", "NodePort", "100.64.3.1")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: cm.UID, Controller: ptr.To(true)}}
	f.service("app", owned)
	moves := map[string][2][]string{
		"app/lb":    {{"100.64.12.7"}, {"172.24.12.7"}},
		"app/owned": {{"100.64.3.1"}, {"172.24.3.1"}},
	}
	before := servicesIn(t, c.Kube, "app")

	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "  include_load_balancers = true\n  include_owned = true", "", "172.24.0.0/15"))
	w.planFile()
	expect(t, "planned moves", w.planned(recreationAddr, "plan.moves"), movesCheck(moves))
	w.applyFile()
	after := servicesIn(t, c.Kube, "app")
	for key, mv := range moves {
		b, a := before[key], after[key]
		switch {
		case a.UID == "" || (a.UID == b.UID) != handedOver(&b, mv[1]):
			t.Errorf("%s: UID %s → %s (handed over, keeping it: %v)", key, b.UID, a.UID, handedOver(&b, mv[1]))
		case !slices.Equal(a.Spec.ClusterIPs, mv[1]):
			t.Errorf("%s has %v, planned %v", key, a.Spec.ClusterIPs, mv[1])
		case !reflect.DeepEqual(specWithoutIPs(b), specWithoutIPs(a)):
			t.Errorf("%s changed beyond its IPs:\n%+v\n%+v", key, specWithoutIPs(b), specWithoutIPs(a))
		}
	}
	if got, want := after["app/lb"].Spec.HealthCheckNodePort, created.Spec.HealthCheckNodePort; got != want {
		t.Errorf("app/lb's health-check node port: %d, was %d", got, want)
	}
	expect(t, "not_moved", w.stateValue(recreationAddr, "not_moved"), knownvalue.MapSizeExact(0))
	w.converged()
}
