// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// dnsService is a cluster DNS Service as installers make it: labelled k8s-app=kube-dns, selecting
// the CoreDNS pods, DNS ports.
func dnsService(name string, ips ...string) *corev1.Service {
	s := ipService(name, "ClusterIP", ips...)
	s.Labels = map[string]string{"k8s-app": "kube-dns"}
	s.Spec.Selector = map[string]string{"k8s-app": "kube-dns"}
	s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)}}
	return s
}

// setKubeletClusterDNS writes kubeadm's kube-system/kubelet-config with that clusterDNS.
func setKubeletClusterDNS(t *testing.T, c *testcluster.Cluster, ip string) {
	t.Helper()
	if err := c.SetKubeletClusterDNS(context.Background(), ip); err != nil {
		t.Fatal(err)
	}
}

// kubeletsOnDNSService sets kubeadm's kubelet-config clusterDNS to the DNS Service's IP as the
// recreation in w's state reports it (dns_service_ips): the kubelets' step after the DNS move,
// which the DNS bridge's removal reads where kubelet-config exists. Without it, the test
// cluster's nodes (registered before the move; kwok runs no kubelet) refuse the removal.
func kubeletsOnDNSService(t *testing.T, c *testcluster.Cluster, w *cliWorkspace) {
	t.Helper()
	ips, _ := w.stateValue(recreationAddr, "dns_service_ips").([]any)
	if len(ips) == 0 {
		t.Fatal("the recreation's state has no dns_service_ips")
	}
	setKubeletClusterDNS(t, c, fmt.Sprint(ips[0]))
}

// TestAccServiceRecreation_clusterDNSFoundAsItIs: a cluster whose DNS Service is
// kube-system/coredns (label k8s-app=kube-dns), with a second labelled Service. The plan refuses
// to guess, also when the kubelets' clusterDNS is NodeLocal DNSCache's link-local address; once
// kubeadm's kubelet-config names coredns's IP, coredns is moved first and the bridge keeps its
// old IP; the next plan, with clusterDNS now on the bridge, is empty.
func TestAccServiceRecreation_clusterDNSFoundAsItIs(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
	f.service("kube-system", dnsService("coredns", "100.64.0.10"))
	f.service("kube-system", dnsService("coredns-internal", "100.64.0.11"))
	f.waitReadySlice("kube-system", "coredns")
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))

	ambiguous := diagRE("Error: Cluster DNS Service Is Ambiguous", "kube-system/coredns, kube-system/coredns-internal", "Set dns_service")
	if out, err := w.run("plan"); err == nil || !ambiguous.MatchString(out) {
		t.Fatalf("two labelled DNS Services, nothing to tell them apart: plan %v\n%s", err, out)
	}
	setKubeletClusterDNS(t, c, "169.254.20.10")
	if out, err := w.run("plan"); err == nil || !ambiguous.MatchString(out) {
		t.Fatalf("a link-local clusterDNS decides nothing: plan %v\n%s", err, out)
	}
	setKubeletClusterDNS(t, c, "100.64.0.10")
	w.planFile()
	expect(t, "planned dns_service", w.planned(recreationAddr, "plan.dns_service"), knownvalue.StringExact("kube-system/coredns"))
	expect(t, "planned first", w.planned(recreationAddr, "plan.first_moves"), strListCheck("kube-system/coredns"))
	w.applyFile()
	expect(t, "dns_service_ips", w.stateValue("data.k8scidr_service_moves.this", "dns_service_ips"), strListCheck("172.24.0.10"))
	after := servicesIn(t, c.Kube, "kube-system")
	if got := after["kube-system/coredns"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.0.10"}) {
		t.Errorf("coredns at %v, want [172.24.0.10]", got)
	}
	bridge, ok := after["kube-system/"+recreation.DefaultDNSBridgeName]
	if !ok || !slices.Equal(bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) || bridge.Spec.Selector["k8s-app"] != "kube-dns" {
		t.Errorf("no DNS bridge on coredns's old IP 100.64.0.10: %+v", bridge)
	}
	w.converged()

	w.write(recreationConfig(c.Kubeconfig, `  dns_service = "kube-system/dns"`, "", "172.24.0.0/15"))
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Cluster DNS Service Does Not Exist", `"kube-system/dns" is not a Service`).MatchString(out) {
		t.Errorf("dns_service naming no Service: plan %v\n%s", err, out)
	}
}

// TestAccServiceRecreation_dualStackDNSOneFamilyStays: a dual-stack kube-dns whose IPv4 moves
// and IPv6 stays. The bridge takes only the IPv4, so kube-dns is recreated with its IPv6 and
// the run converges (with a bridge on both IPs, kube-dns could not be recreated).
func TestAccServiceRecreation_dualStackDNSOneFamilyStays(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13", "fd00:10::/108"}})
	f := fixture{t, c.Kube}
	f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
	dns := dnsService("kube-dns", "100.64.0.10", "fd00:10::a")
	dns.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	f.service("kube-system", dns)
	f.waitReadySlice("kube-system", "kube-dns")
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))
	w.planFile()
	expect(t, "planned moves", w.planned(recreationAddr, "plan.moves"),
		movesCheck(map[string][2][]string{"kube-system/kube-dns": {{"100.64.0.10", "fd00:10::a"}, {"172.24.0.10", "fd00:10::a"}}}))
	w.applyFile()
	after := servicesIn(t, c.Kube, "kube-system")
	if got := after["kube-system/kube-dns"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.0.10", "fd00:10::a"}) {
		t.Errorf("kube-dns at %v, want [172.24.0.10 fd00:10::a]", got)
	}
	bridge := after["kube-system/"+recreation.DefaultDNSBridgeName]
	if !slices.Equal(bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) || !slices.Equal(bridge.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) {
		t.Errorf("bridge at %v %v, want the IPv4 that moved only", bridge.Spec.ClusterIPs, bridge.Spec.IPFamilies)
	}
	w.converged()
}

// refuseBridges installs a ValidatingAdmissionPolicy that denies creating DNS bridges (as an
// organisation's policy or webhook might); see refuseLabelled.
func refuseBridges(t *testing.T, c *testcluster.Cluster) func() {
	t.Helper()
	return refuseLabelled(t, c, k8sops.DNSBridgeLabel, "DNS bridges are not allowed here")
}

// refuseLabelled installs a ValidatingAdmissionPolicy that denies creating Services with the
// label; see denyCreates.
func refuseLabelled(t *testing.T, c *testcluster.Cluster, label, message string) func() {
	t.Helper()
	name := "refuse-" + strings.NewReplacer(".", "-", "/", "-").Replace(label)
	return denyCreates(t, c, name, "services", `!has(object.metadata.labels) || !('`+label+`' in object.metadata.labels)`, message,
		func(ctx context.Context) error {
			s := clusterIPService("refuse-probe", "")
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Labels = map[string]string{label: "probe"}
			_, err := c.Kube.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{})
			if err == nil {
				_ = c.Kube.CoreV1().Services("default").Delete(ctx, s.Name, metav1.DeleteOptions{})
			}
			return err
		})
}

// denyCreates installs a ValidatingAdmissionPolicy that denies creating core resources for which
// expression is false (as an organisation's policy or webhook might), waits until probe (a
// create it must deny) fails, and returns its removal (binding and policy, so that it can be
// installed again), which waits until probe succeeds.
func denyCreates(t *testing.T, c *testcluster.Cluster, name, resource, expression, message string, probe func(context.Context) error) func() {
	t.Helper()
	ctx := context.Background()
	api := c.Kube.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}},
			Validations: []admissionv1.Validation{{Message: message, Expression: expression}},
		}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until := func(denied bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return (probe(ctx) != nil) == denied, nil
		})
		if err != nil {
			t.Fatalf("the admission policy %s did not take effect (denying: %v): %v", name, denied, err)
		}
	}
	until(true)
	return func() {
		if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := api.ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		until(false)
	}
}

// refuseAfterDelete lets an apply started with the AFTER_DELETE fault gate (openAfter) delete
// Service key, then installs refuse (an admission policy that refuses its create, or its
// bridge's) and opens the gate: the create fails after the delete, as when a policy arrives
// mid-apply, since the dry run before the delete met none. It returns the policy's removal.
func refuseAfterDelete(t *testing.T, c *testcluster.Cluster, cmd *exec.Cmd, out *bytes.Buffer, key string, openAfter func(), refuse func() func()) func() {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("%s was never deleted: %v\n%s", key, err, out.String())
	}
	allow := refuse()
	openAfter()
	return allow
}

// TestAccServiceRecreation_bridgeRetried: an admission policy that refuses the DNS bridge. In
// place before the apply, the dry run before kube-dns's delete finds it: kube-dns, moved first,
// is not moved, and the apply fails saying why. Arriving while kube-dns is between its delete and
// its create (a fault gate), it refuses the bridge after kube-dns moved: the apply fails saying
// so; once the policy is gone, the next plan shows kube-dns's journal entry under restore, and
// its apply creates the bridge on the old IP.
// A dns_bridge_name that is no Service name is refused at plan, before the cluster is read.
func TestAccServiceRecreation_bridgeRetried(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
	f.service("kube-system", dnsService("kube-dns", "100.64.0.10"))
	f.waitReadySlice("kube-system", "kube-dns")

	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", deleteAndCreate+`dns_bridge_name = "kube_dns_old"`, "172.24.0.0/15"))
	if out, err := w.run("validate"); err == nil || !diagRE("dns_bridge_name", "must be a Service name").MatchString(out) {
		t.Errorf("an invalid dns_bridge_name passes validate: %v\n%s", err, out)
	}
	w.write(recreationConfig(c.Kubeconfig, "", deleteAndCreate, "172.24.0.0/15"))
	allow := refuseBridges(t, c)
	w.planFile()
	if out, err := w.run("apply", "tfplan"); err == nil ||
		!diagRE("kube-system/kube-dns, moved first", "its bridge kube-system/kube-dns-legacy", "DNS bridges are not allowed here").MatchString(out) {
		t.Fatalf("apply with bridges refused from the start: %v\n%s", err, out)
	}
	if got := servicesIn(t, c.Kube, "kube-system")["kube-system/kube-dns"].Spec.ClusterIPs; !slices.Equal(got, []string{"100.64.0.10"}) {
		t.Fatalf("kube-dns at %v, want it left at 100.64.0.10 when its bridge would be refused", got)
	}
	allow()

	w.planFile()
	after, openAfter := faultGate(t, "AFTER_DELETE")
	cmd, out := w.start([]string{after}, "apply", "tfplan")
	allow = refuseAfterDelete(t, c, cmd, out, "kube-system/kube-dns", openAfter, func() func() { return refuseBridges(t, c) })
	if err := cmd.Wait(); err == nil || !diagRE("DNS bridge kube-system/kube-dns-legacy", "DNS bridges are not allowed here").MatchString(out.String()) {
		t.Fatalf("apply with bridges refused mid-apply: %v\n%s", err, out.String())
	}
	if got := servicesIn(t, c.Kube, "kube-system")["kube-system/kube-dns"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.0.10"}) {
		t.Fatalf("kube-dns at %v, want it moved to 172.24.0.10 before the bridge was refused", got)
	}
	allow()
	w.planFile()
	expect(t, "planned restore", w.planned(recreationAddr, "plan.restore"), knownvalue.MapSizeExact(1))
	w.applyFile()
	bridge, ok := servicesIn(t, c.Kube, "kube-system")["kube-system/"+recreation.DefaultDNSBridgeName]
	if !ok || !slices.Equal(bridge.Spec.ClusterIPs, []string{"100.64.0.10"}) {
		t.Errorf("no bridge on kube-dns's old IP after the retry: %+v", bridge)
	}
	w.converged()
}

// TestAccServiceRecreation_changeDuringApplyKept: another client relabels and annotates a
// Service after the apply journaled it and before its delete (held open by fault injection).
// The delete's resourceVersion precondition catches it; the Service is re-read and re-journaled,
// and the new Service keeps the change.
func TestAccServiceRecreation_changeDuringApplyKept(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("web", "ClusterIP", "100.64.1.5"))
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", deleteAndCreate, "172.24.0.0/15"))
	w.planFile()

	ctx := context.Background()
	gate, open := faultGate(t, "BEFORE_DELETE")
	cmd, out := w.start([]string{gate}, "apply", "tfplan")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return journalObjects(t, c) > 0, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the apply wrote no journal: %v\n%s", err, out.String())
	}
	// The move is held between its journal write and its delete: the patch lands on the
	// journaled Service, which the move must then take along.
	patch := `{"metadata":{"labels":{"team":"payments"},"annotations":{"example.com/owner":"payments"}}}`
	patched, err := c.Kube.CoreV1().Services("app").Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Spec.ClusterIP != "100.64.1.5" {
		t.Fatalf("the patch landed on app/web at %s, not on the journaled Service before its move", patched.Spec.ClusterIP)
	}
	open()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	web := servicesIn(t, c.Kube, "app")["app/web"]
	if !slices.Equal(web.Spec.ClusterIPs, []string{"172.24.1.5"}) || web.Labels["team"] != "payments" || web.Annotations["example.com/owner"] != "payments" {
		t.Errorf("app/web after the move: IPs %v labels %v annotations %v; want 172.24.1.5 with the change made during the apply",
			web.Spec.ClusterIPs, web.Labels, web.Annotations)
	}
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind", n)
	}
	w.converged()
}

// TestAccServiceRecreation_sweepsStaleCopies: EndpointSlice copies an earlier, killed run left
// for Services the controllers now serve themselves are deleted by the next apply: one the
// EndpointSlice controller serves (its slice is owned by the Service), and a selector-less one
// the mirroring controller serves (its slice is owned by the Endpoints object).
func TestAccServiceRecreation_sweepsStaleCopies(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.deployment("app", "a", map[string]string{"app": "a"})
	a := f.service("app", ipService("a", "ClusterIP", "100.64.1.1"))
	f.service("app", ipService("b", "ClusterIP", "100.64.1.2"))
	selectorless(f, "app", "m", "100.64.1.3", "10.8.8.8", false, nil)
	f.waitReadySlice("app", "a")
	f.waitReadySlice("app", "m")
	ctx := context.Background()
	copyOf := func(svc *corev1.Service) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-k8scidr-0", Namespace: "app",
				Labels:          map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "k8scidr.io"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
	}
	m, err := c.Kube.CoreV1().Services("app").Get(ctx, "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := []*discoveryv1.EndpointSlice{copyOf(a), copyOf(m)}
	for _, s := range stale {
		if _, err := c.Kube.DiscoveryV1().EndpointSlices("app").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  exclude = ["app/a", "app/m"]`, "", "172.24.0.0/15"))
	w.planFile()
	w.applyFile()
	for _, s := range stale {
		_, err := c.Kube.DiscoveryV1().EndpointSlices("app").Get(ctx, s.Name, metav1.GetOptions{})
		assertGone(t, err, "the stale copy app/"+s.Name+" after the apply")
	}
	if got := servicesIn(t, c.Kube, "app")["app/b"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.1.2"}) {
		t.Errorf("app/b at %v", got)
	}
}

// TestAccServiceRecreation_interruptFinishesInFlight: SIGINT to terraform while moves sit
// between their delete and their create (held open by fault injection). The moves in flight
// are finished within the grace period, no new one starts, and no Service is missing when
// terraform exits; the next apply moves the rest.
func TestAccServiceRecreation_interruptFinishesInFlight(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	const n = 12
	for i := range n {
		f.service("app", ipService(fmt.Sprintf("s%d", i), "ClusterIP", fmt.Sprintf("100.64.1.%d", 10+i)))
	}
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", deleteAndCreate, "172.24.0.0/15"))
	w.planFile()

	ctx := context.Background()
	gate, _ := faultGate(t, "AFTER_DELETE")
	cmd, out := w.start([]string{gate}, "apply", "tfplan")
	count := func() int {
		list, err := c.Kube.CoreV1().Services("app").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return count() < n, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no Service was deleted: %v\n%s", err, out.String())
	}
	// The moves past their delete are held there (the gate is never opened): the interrupt
	// releases them, and the apply must finish them and start no other.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the interrupted apply succeeded:\n%s", out.String())
	}
	if got := count(); got != n {
		t.Fatalf("%d of %d Services exist after the interrupted apply:\n%s", got, n, out.String())
	}
	if !diagRE("interrupted", "no new move was started", "moves already past their delete were finished").MatchString(out.String()) {
		t.Errorf("the diagnostic does not say what was finished:\n%s", out.String())
	}
	w.planFile()
	w.applyFile()
	for key, s := range servicesIn(t, c.Kube, "app") {
		if !strings.HasPrefix(s.Spec.ClusterIP, "172.24.") {
			t.Errorf("%s at %s after the next apply", key, s.Spec.ClusterIP)
		}
	}
	w.converged()
}

// journalObjects counts the recreation journal's ConfigMaps in its default namespace.
func journalObjects(t *testing.T, c *testcluster.Cluster) int {
	t.Helper()
	list, err := c.Kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: recreation.JournalLabel})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// TestAccServiceRecreation_stalledControllerStops: kube-controller-manager is stopped after the
// plan, so no moved Service gets its EndpointSlice. After 5 moves in a row without one the apply
// starts no further move and fails naming them; nothing is lost; once kube-controller-manager
// runs again, the next apply moves the rest.
func TestAccServiceRecreation_stalledControllerStops(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.deployment("app", "web", map[string]string{"app": "web"})
	const n = 12
	for i := range n {
		s := ipService(fmt.Sprintf("s%02d", i), "ClusterIP", fmt.Sprintf("100.64.1.%d", 10+i))
		s.Spec.Selector = map[string]string{"app": "web"}
		f.service("app", s)
		f.waitReadySlice("app", s.Name)
	}
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  namespaces = ["app"]`, deleteAndCreate+`  endpoint_wait = "3s"`, "172.24.0.0/15"))
	// The new range first: kube-controller-manager is what makes it Ready.
	if out, err := w.run("apply", "-auto-approve", "-target=k8scidr_service_cidr.this"); err != nil {
		t.Fatalf("creating the target range: %v\n%s", err, out)
	}
	w.planFile()
	if err := c.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	out, err := w.run("apply", "tfplan")
	if err == nil {
		t.Fatalf("the apply went on moving Services with kube-controller-manager stopped:\n%s", out)
	}
	stopped := diagRE("kube-controller-manager wrote no EndpointSlice for 5 moved Services in a row", "endpoint_wait (3s each)",
		"no further move was started", "Moved and still without endpoints: app/s", "the next apply moves the rest")
	if !stopped.MatchString(out) {
		t.Fatalf("the diagnostic does not say why the run stopped:\n%s", out)
	}
	services := servicesIn(t, c.Kube, "app")
	moved := 0
	for key, s := range services {
		if strings.HasPrefix(s.Spec.ClusterIP, "172.24.") {
			moved++
			if !strings.Contains(out, key) {
				t.Errorf("%s moved without endpoints but is not named in the diagnostic", key)
			}
		}
	}
	// Five stalled moves, and at most the few that were in flight beside them.
	if len(services) != n || moved < 5 || moved > 8 {
		t.Fatalf("after the stopped run: %d Services, %d moved; want all %d, 5 to 8 moved:\n%s", len(services), moved, n, out)
	}
	if err := c.RestartControllerManager(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.planFile()
	w.applyFile()
	for key, s := range servicesIn(t, c.Kube, "app") {
		if !strings.HasPrefix(s.Spec.ClusterIP, "172.24.") {
			t.Errorf("%s at %s after the next apply", key, s.Spec.ClusterIP)
		}
		f.waitReadySlice("app", s.Name)
	}
	w.converged()
}

// refuseLabel marks the test Services whose creation refuseLabelled makes fail.
const refuseLabel = "example.com/refuse"

// TestAccServiceRecreation_noResurrection: another client deletes a Service after the apply
// journaled it and before its delete, while another move of the same journal chunk fails (an
// admission policy that arrives after its delete refuses its create). The deleted Service is reported in not_moved, not as an
// error, and dropped from the kept journal: the next plan restores only the refused one, and
// the Service the other client deleted stays deleted.
func TestAccServiceRecreation_noResurrection(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("a", "ClusterIP", "100.64.1.1"))
	refused := ipService("b", "ClusterIP", "100.64.1.2")
	refused.Labels = map[string]string{refuseLabel: "true"}
	f.service("app", refused)
	f.service("app", ipService("c", "ClusterIP", "100.64.1.3"))
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  namespaces = ["app"]`, deleteAndCreate, "172.24.0.0/15"))
	w.planFile()

	ctx := context.Background()
	gate, open := faultGate(t, "BEFORE_DELETE")
	after, openAfter := faultGate(t, "AFTER_DELETE")
	cmd, out := w.start([]string{gate, after}, "apply", "tfplan")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return journalObjects(t, c) > 0, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the apply wrote no journal: %v\n%s", err, out.String())
	}
	if err := c.Kube.CoreV1().Services("app").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	open()
	allow := refuseAfterDelete(t, c, cmd, out, "app/b", openAfter, func() func() {
		return refuseLabelled(t, c, refuseLabel, "this Service may not be created")
	})
	if err := cmd.Wait(); err == nil || !diagRE("this Service may not be created").MatchString(out.String()) {
		t.Fatalf("apply with app/b refused: %v\n%s", err, out.String())
	}
	if !diagRE("app/a: deleted by another client during the apply").MatchString(out.String()) {
		t.Errorf("app/a, deleted by another client, is not reported as not moved:\n%s", out.String())
	}
	if diagRE("app/a: deleted by another client after the plan").MatchString(out.String()) {
		t.Errorf("app/a is reported as an error:\n%s", out.String())
	}
	allow()
	w.planFile()
	expect(t, "planned restore", w.planned(recreationAddr, "plan.restore"), knownvalue.MapExact(map[string]knownvalue.Check{
		"app/b": knownvalue.ObjectPartial(map[string]knownvalue.Check{"new_ips": strListCheck("172.24.1.2")}),
	}))
	w.applyFile()
	services := servicesIn(t, c.Kube, "app")
	if _, ok := services["app/a"]; ok {
		t.Error("app/a, deleted by another client during the apply, was brought back")
	}
	for _, key := range []string{"app/b", "app/c"} {
		if s, ok := services[key]; !ok || !strings.HasPrefix(s.Spec.ClusterIP, "172.24.") {
			t.Errorf("%s after the next apply: %+v", key, s.Spec.ClusterIPs)
		}
	}
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind", n)
	}
	w.converged()
}

// TestAccServiceRecreation_namespaceGoingDropped: an interrupted apply left the journal entry of
// a Service whose namespace is then deleted (kube-controller-manager stopped, so it stays
// Terminating with its Services). The plan drops the entry with a warning instead of planning
// a restore that fails every apply, skips the namespace's Services with that reason, and the
// apply removes the journal.
func TestAccServiceRecreation_namespaceGoingDropped(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.namespace("doomed")
	f.service("app", ipService("a", "ClusterIP", "100.64.1.1"))
	refused := ipService("x", "ClusterIP", "100.64.2.1")
	refused.Labels = map[string]string{refuseLabel: "true"}
	f.service("doomed", refused)
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", deleteAndCreate, "172.24.0.0/15"))
	w.planFile()
	after, openAfter := faultGate(t, "AFTER_DELETE")
	cmd, out := w.start([]string{after}, "apply", "tfplan")
	allow := refuseAfterDelete(t, c, cmd, out, "doomed/x", openAfter, func() func() {
		return refuseLabelled(t, c, refuseLabel, "this Service may not be created")
	})
	if err := cmd.Wait(); err == nil || !diagRE("this Service may not be created").MatchString(out.String()) {
		t.Fatalf("apply with doomed/x refused: %v\n%s", err, out.String())
	}
	allow()

	if err := c.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	f.service("doomed", ipService("z", "ClusterIP", "100.64.2.3"))
	f.service("app", ipService("b", "ClusterIP", "100.64.1.2"))
	ctx := context.Background()
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	plan := w.planFile()
	if !diagRE("Journal Entries Dropped, Not Restored", "doomed/x: its namespace doomed is being deleted").MatchString(plan) {
		t.Errorf("the plan does not say the journal entry is dropped:\n%s", plan)
	}
	expect(t, "planned restore", w.planned(recreationAddr, "plan.restore"), knownvalue.MapSizeExact(0))
	w.applyFile()
	expect(t, "skipped", w.stateValue("data.k8scidr_service_moves.this", "skipped"), knownvalue.MapPartial(map[string]knownvalue.Check{
		"doomed/z": knownvalue.StringExact("its namespace doomed is being deleted"),
	}))
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind", n)
	}
	if got := servicesIn(t, c.Kube, "app")["app/b"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.1.2"}) {
		t.Errorf("app/b at %v", got)
	}
	if err := c.RestartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace doomed is not gone: %v", err)
	}
	w.converged()
}

// selectorless creates a selector-less Service at ip with hand-made Endpoints at addr; with
// owned, the Endpoints name the Service as their owner (as some operators write them).
func selectorless(f fixture, ns, name, ip, addr string, owned bool, labels map[string]string) {
	f.t.Helper()
	s := ipService(name, "ClusterIP", ip)
	s.Spec.Selector = nil
	s.Labels = labels
	s = f.service(ns, s)
	ep := endpointsAt(ns, name, addr)
	if owned {
		ep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: s.UID}}
	}
	if _, err := f.kube.CoreV1().Endpoints(ns).Create(context.Background(), ep, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func endpointsAt(ns, name, addr string) *corev1.Endpoints {
	//nolint:staticcheck // hand-made Endpoints are what selector-less Services of the write-ups have
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: addr}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
}

// endpointsAddr is the first address of the Endpoints of Service app/name, "" when they do not exist.
func endpointsAddr(t *testing.T, c *testcluster.Cluster, name string) (string, *corev1.Endpoints) {
	t.Helper()
	ep, err := c.Kube.CoreV1().Endpoints("app").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) == 0 {
		return "", ep
	}
	return ep.Subsets[0].Addresses[0].IP, ep
}

// TestAccServiceRecreation_endpointsKeptCurrent: hand-made Endpoints changed by another client
// after the apply journaled them are re-read before the delete, and the new Service gets the
// changed ones (app/ext2's move fails meanwhile: a policy arriving after its delete refuses it); Endpoints that name the Service as owner are rewritten to the new Service's UID,
// so the garbage collector leaves them; and Endpoints another client wrote after the delete
// are kept when the journal restores their Service.
func TestAccServiceRecreation_endpointsKeptCurrent(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	selectorless(f, "app", "ext", "100.64.1.1", "10.0.0.1", true, nil)
	selectorless(f, "app", "ext2", "100.64.1.2", "10.0.0.2", false, map[string]string{refuseLabel: "true"})
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  namespaces = ["app"]`, deleteAndCreate, "172.24.0.0/15"))
	w.planFile()

	ctx := context.Background()
	gate, open := faultGate(t, "BEFORE_DELETE")
	after, openAfter := faultGate(t, "AFTER_DELETE")
	cmd, out := w.start([]string{gate, after}, "apply", "tfplan")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return journalObjects(t, c) > 0, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the apply wrote no journal: %v\n%s", err, out.String())
	}
	_, ep := endpointsAddr(t, c, "ext")
	ep.Subsets[0].Addresses[0].IP = "10.0.0.11"
	if _, err := c.Kube.CoreV1().Endpoints("app").Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	open()
	allow := refuseAfterDelete(t, c, cmd, out, "app/ext2", openAfter, func() func() {
		return refuseLabelled(t, c, refuseLabel, "this Service may not be created")
	})
	if err := cmd.Wait(); err == nil || !diagRE("this Service may not be created").MatchString(out.String()) {
		t.Fatalf("apply with app/ext2 refused: %v\n%s", err, out.String())
	}
	ext := servicesIn(t, c.Kube, "app")["app/ext"]
	if !slices.Equal(ext.Spec.ClusterIPs, []string{"172.24.1.1"}) {
		t.Fatalf("app/ext at %v, want 172.24.1.1", ext.Spec.ClusterIPs)
	}
	// app/ext2 was deleted and refused; its Endpoints go with it: once the garbage collector has
	// deleted them, it has also seen app/ext's old object go, and app/ext's Endpoints, owned by
	// the new object, must still be there.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, ep := endpointsAddr(t, c, "ext2")
		return ep == nil, nil
	})
	if err != nil {
		t.Fatalf("app/ext2's Endpoints were not deleted with it: %v", err)
	}
	addr, ep := endpointsAddr(t, c, "ext")
	switch {
	case ep == nil:
		t.Error("app/ext's Endpoints are gone after the move (their owner reference names the old Service?)")
	case addr != "10.0.0.11":
		t.Errorf("app/ext's Endpoints at %s after the move, want 10.0.0.11 as changed during the apply", addr)
	case len(ep.OwnerReferences) != 1 || ep.OwnerReferences[0].UID != ext.UID:
		t.Errorf("app/ext's Endpoints owned by %+v, want the new Service %s", ep.OwnerReferences, ext.UID)
	}

	// Another client writes new Endpoints for app/ext2.
	if _, err := c.Kube.CoreV1().Endpoints("app").Create(ctx, endpointsAt("app", "ext2", "10.0.0.22"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allow()
	w.planFile()
	expect(t, "planned restore", w.planned(recreationAddr, "plan.restore"), knownvalue.MapSizeExact(1))
	if out := w.applyFile(); !diagRE("app/ext2: its Endpoints were written by another client after the delete", "kept as they are").MatchString(out) {
		t.Errorf("the apply does not say it kept app/ext2's newer Endpoints:\n%s", out)
	}
	if addr, _ := endpointsAddr(t, c, "ext2"); addr != "10.0.0.22" {
		t.Errorf("app/ext2's Endpoints at %q after the restore, want 10.0.0.22 as written after the delete", addr)
	}
	w.converged()
}

// TestAccServiceRecreation_splitJournalNoOrphan: a journal chunk too large for one ConfigMap is
// split; when the second ConfigMap is refused (an admission policy), the first is removed again,
// nothing is moved, and the next apply, once allowed, moves everything and leaves no journal.
func TestAccServiceRecreation_splitJournalNoOrphan(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	const n = 50 // one journal chunk; 20 kB each splits it in two ConfigMaps
	for i := range n {
		s := ipService(fmt.Sprintf("s%02d", i), "ClusterIP", fmt.Sprintf("100.64.1.%d", 10+i))
		s.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 20000)}
		f.service("app", s)
	}
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  namespaces = ["app"]`, "", "172.24.0.0/15"))
	w.planFile()
	// s49 is journaled in the second ConfigMap of the chunk.
	allow := denyCreates(t, c, "no-second-journal", "configmaps",
		`!has(object.data) || !('entries.json' in object.data) || !object.data['entries.json'].contains('"name":"s49"')`,
		"this journal may not be written", func(ctx context.Context) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}, Data: map[string]string{"entries.json": `{"name":"s49"}`}}
			got, err := c.Kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
			if err == nil {
				_ = c.Kube.CoreV1().ConfigMaps("default").Delete(ctx, got.Name, metav1.DeleteOptions{})
			}
			return err
		})
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("writing the journal", "this journal may not be written").MatchString(out) {
		t.Fatalf("apply with the second journal ConfigMap refused: %v\n%s", err, out)
	}
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind by the write that failed partway", n)
	}
	for key, s := range servicesIn(t, c.Kube, "app") {
		if !strings.HasPrefix(s.Spec.ClusterIP, "100.64.") {
			t.Errorf("%s moved (%s) although its journal was not written", key, s.Spec.ClusterIP)
		}
	}
	allow()
	w.planFile()
	w.applyFile()
	if got := len(servicesIn(t, c.Kube, "app")); got != n {
		t.Fatalf("%d of %d Services after the apply", got, n)
	}
	for key, s := range servicesIn(t, c.Kube, "app") {
		if !strings.HasPrefix(s.Spec.ClusterIP, "172.24.") {
			t.Errorf("%s at %s after the apply", key, s.Spec.ClusterIP)
		}
	}
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind", n)
	}
	w.converged()
}

// TestAccServiceRecreation_formerOwnersKeep: a Service a GitOps tool owns by server-side apply
// (and another manager annotated) is moved; afterwards the tool applies a change to the fields
// it owns without --force-conflicts, and the mover owns only the IPs. A Service an operator's
// client created is moved under the operator's name (no second write): the operator still owns
// its fields, so another manager's server-side apply of one conflicts with it. A Service Helm
// created is given its fields back, so that Helm's entry does not claim spec.clusterIP.
func TestAccServiceRecreation_formerOwnersKeep(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	ctx := context.Background()
	api := c.Kube.CoreV1().Services("app")
	apply := func(label string, port int) error {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","labels":{"tier":%q}},`+
			`"spec":{"selector":{"app":"web"},"ports":[{"port":80,"targetPort":%d,"protocol":"TCP"}]%s}}`,
			label, port, map[bool]string{true: `,"clusterIP":"100.64.1.7"`}[label == "v1"])
		_, err := api.Patch(ctx, "web", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "flux", Force: ptr.To(false)})
		return err
	}
	if err := apply("v1", 8080); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/tracking-id":"web"}}}`),
		metav1.PatchOptions{FieldManager: "argocd-controller"}); err != nil {
		t.Fatal(err)
	}
	for name, manager := range map[string]string{"metrics": "prometheus-operator", "chart": "helm"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "v1"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := api.Create(ctx, svc, metav1.CreateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	// Selector-less Services whose Endpoints a script wrote (updates) or a pipeline applies.
	for name, manager := range map[string]string{"ext": "ops-script", "ext-ssa": "flux"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := api.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":%q},"subsets":[{"addresses":[{"ip":"10.1.2.3"}],"ports":[{"port":80}]}]}`, name)
		var err error
		if manager == "flux" {
			_, err = c.Kube.CoreV1().Endpoints("app").Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true)})
		} else {
			ep := &corev1.Endpoints{} //nolint:staticcheck // selector-less Services are served from hand-made Endpoints
			if err = json.Unmarshal([]byte(body), ep); err == nil {
				_, err = c.Kube.CoreV1().Endpoints("app").Create(ctx, ep, metav1.CreateOptions{FieldManager: manager})
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Flux's source no longer sets clusterIP (its next apply below has none); its ownership of
	// the field says otherwise until then, so the user lists web.
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, `  include_pinned = ["app/web"]`, "", "172.24.0.0/15"))
	w.planFile()
	if out := w.applyFile(); strings.Contains(out, "former managers") {
		t.Errorf("the apply could not give the fields back:\n%s", out)
	}
	for name, want := range map[string]string{"ext": "ops-script/Update/", "ext-ssa": "flux/Apply/"} {
		ep, err := c.Kube.CoreV1().Endpoints("app").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("app/%s's Endpoints after the move: %v", name, err)
		}
		var got []string
		for _, e := range ep.ManagedFields {
			got = append(got, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
		}
		if !slices.Equal(got, []string{want}) {
			t.Errorf("app/%s's Endpoints owned by %v after the move; want %s alone, as before", name, got, want)
		}
	}
	ownersOf := func(name string) map[string]string {
		svc, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !netip.MustParsePrefix("172.24.0.0/15").Contains(ip) {
			t.Fatalf("app/%s at %s, want it moved into 172.24.0.0/15", name, svc.Spec.ClusterIP)
		}
		out := map[string]string{}
		for _, e := range svc.ManagedFields {
			out[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = e.FieldsV1.GetRawString()
		}
		return out
	}
	if o := ownersOf("metrics"); len(o) != 1 || !strings.Contains(o["prometheus-operator/Update/"], `"f:tier"`) {
		t.Errorf("app/metrics owners %v; want the operator alone, holding its fields", o)
	}
	_, err := api.Patch(ctx, "metrics", types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"metrics","labels":{"tier":"v2"}}}`),
		metav1.PatchOptions{FieldManager: "someone-else", Force: ptr.To(false)})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "prometheus-operator") {
		t.Errorf("a server-side apply of the operator's label after the move: %v; want a conflict with prometheus-operator", err)
	}
	if o := ownersOf("chart"); o["k8scidr/Update/"] != `{"f:spec":{"f:clusterIP":{},"f:clusterIPs":{}}}` ||
		!strings.Contains(o["helm/Update/"], `"f:tier"`) || strings.Contains(o["helm/Update/"], "clusterIP") {
		t.Errorf("app/chart owners %v; want helm's fields back without the IPs, the mover holding the IPs", o)
	}
	web, err := api.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(web.Spec.ClusterIPs, []string{"172.24.1.7"}) {
		t.Fatalf("app/web at %v, want it moved to 172.24.1.7", web.Spec.ClusterIPs)
	}
	owners := map[string]string{}
	for _, e := range web.ManagedFields {
		owners[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = e.FieldsV1.GetRawString()
	}
	if mine := owners["k8scidr/Update/"]; mine != `{"f:spec":{"f:clusterIP":{},"f:clusterIPs":{}}}` {
		t.Errorf("the mover owns %s; want only spec.clusterIP and spec.clusterIPs (all owners: %v)", mine, owners)
	}
	if !strings.Contains(owners["flux/Apply/"], `"f:tier"`) || !strings.Contains(owners["argocd-controller/Update/"], "tracking-id") {
		t.Errorf("former owners not restored: %v", owners)
	}
	// The tool's next apply changes a label and a port's target (its manifest no longer names
	// the old IP): no conflict.
	if err := apply("v2", 9090); err != nil {
		t.Fatalf("server-side apply by the former owner after the move: %v", err)
	}
	w.converged()
}

// groupConfig is a recreation of the Services of namespace ns alone into faultTarget (a range
// made beforehand), with its own journal_group ns, which the resource takes with the plan.
func groupConfig(kubeconfig, ns, journalNamespace string) string {
	data := fmt.Sprintf("  target_cidrs = [%q]\n  namespaces = [%q]\n  journal_group = %q\n  journal_namespace = %q", faultTarget, ns, ns, journalNamespace)
	return providerBlock(kubeconfig) + recreationHCL("", data, deleteAndCreate)
}

// TestAccServiceRecreation_journalPerResource: two recreations with journal groups of their own
// are applied side by side: while one holds app-b/web between its delete and its create, the
// other plans and applies, and neither restores nor removes the other's entries. Then an apply
// of a third is killed between a delete and its create, and moving its journal to another
// namespace is refused at plan until an apply with the old journal has restored the Service.
func TestAccServiceRecreation_journalPerResource(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	if _, err := servicecidr.CreateServiceCIDR(ctx, clientFor(c), "new", []string{faultTarget.String()}); err != nil {
		t.Fatal(err)
	}
	f := fixture{t, c.Kube}
	for i, ns := range []string{"app-a", "app-b"} {
		f.namespace(ns)
		f.service(ns, ipService("web", "ClusterIP", fmt.Sprintf("100.64.%d.5", i+1)))
	}
	gone := func(ns string) bool {
		_, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	waitGone := func(ns string, cmd interface{ Kill() error }, out fmt.Stringer) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			return gone(ns), nil
		})
		if err != nil {
			_ = cmd.Kill()
			t.Fatalf("%s/web was never deleted: %v\n%s", ns, err, out.String())
		}
	}

	wb := newCLIWorkspace(t, groupConfig(c.Kubeconfig, "app-b", "kube-system"))
	wb.planFile()
	gate, open := faultGate(t, "AFTER_DELETE")
	cmd, out := wb.start([]string{gate}, "apply", "tfplan")
	waitGone("app-b", cmd.Process, out) // and held there until open

	wa := newCLIWorkspace(t, groupConfig(c.Kubeconfig, "app-a", "kube-system"))
	wa.planFile()
	// Known and empty (null would mean the plan could not tell).
	expect(t, "app-a's planned restore (app-b's journal entry is another resource's)", wa.planned(recreationAddr, "plan.restore"), knownvalue.MapSizeExact(0))
	wa.applyFile()
	if !gone("app-b") {
		t.Errorf("app-b/web exists again before its own apply recreated it: app-a's apply restored it")
	}
	open()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("app-b's apply: %v\n%s", err, out.String())
	}
	for i, ns := range []string{"app-a", "app-b"} {
		if got := servicesIn(t, c.Kube, ns)[ns+"/web"].Spec.ClusterIPs; !slices.Equal(got, []string{fmt.Sprintf("172.24.%d.5", i+1)}) {
			t.Errorf("%s/web at %v after both applies", ns, got)
		}
	}
	wa.converged()
	wb.converged()

	// A later apply of a recreation that exists, killed between the delete and the create,
	// leaves app-c/web in the journal.
	f.namespace("app-c")
	wc := newCLIWorkspace(t, groupConfig(c.Kubeconfig, "app-c", "kube-system"))
	wc.planFile()
	wc.applyFile()
	f.service("app-c", ipService("web", "ClusterIP", "100.64.3.5"))
	wc.planFile()
	cmd, out = wc.start([]string{"K8SCIDR_FAULT_DELAY_AFTER_DELETE=2m"}, "apply", "tfplan")
	waitGone("app-c", cmd.Process, out)
	sigkill(cmd)
	_ = cmd.Wait()
	wc.write(groupConfig(c.Kubeconfig, "app-c", "default"))
	refused := diagRE("Error: Old Journal Still Holds Entries", "kube-system (journal_group app-c)", "app-c/web", "Apply once more with the old journal_namespace")
	if out, err := wc.run("plan"); err == nil || !refused.MatchString(out) {
		t.Fatalf("moving the journal while it holds app-c/web: plan %v\n%s", err, out)
	}
	wc.write(groupConfig(c.Kubeconfig, "app-c", "kube-system"))
	wc.planFile()
	wc.applyFile()
	if got := servicesIn(t, c.Kube, "app-c")["app-c/web"].Spec.ClusterIPs; !slices.Equal(got, []string{"172.24.3.5"}) {
		t.Errorf("app-c/web at %v after the restoring apply", got)
	}
	wc.write(groupConfig(c.Kubeconfig, "app-c", "default"))
	wc.planFile()
	wc.applyFile()
	wc.converged()
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind", n)
	}
}

// barePod creates pod app/name with that DNS setting (and nameservers, when given) and waits
// until a kubelet started it.
func (f fixture) barePod(name string, policy corev1.DNSPolicy, hostNetwork bool, nameservers ...string) {
	const ns = "app"
	f.t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: podTemplate(name).Spec}
	p.Spec.DNSPolicy, p.Spec.HostNetwork = policy, hostNetwork
	if len(nameservers) > 0 {
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: nameservers}
	}
	if _, err := f.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := f.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.StartTime != nil, err
	})
	if err != nil {
		f.t.Fatalf("pod %s/%s not started: %v", ns, name, err)
	}
}

// TestAccServiceRecreation_bridgeRemovalSafe: dns_bridge = false is refused while a pod that uses
// the cluster resolver and started before the DNS move runs (pods on the node's resolver or the
// host network are not counted), and while kubeadm's kubelet-config still names the bridge's IP;
// a kubelet-config changed later moves the bound (and the plan says that per-kubelet restarts
// could not be read); a pod naming the bridge's IP in its dnsConfig counts whenever it started;
// dns_bridge_force_removal removes it anyway.
func TestAccServiceRecreation_bridgeRemovalSafe(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("kube-system", dnsService("kube-dns", "100.64.0.10"))
	f.barePod("old", corev1.DNSClusterFirst, false)
	f.barePod("own-dns", corev1.DNSDefault, false)
	f.barePod("host", corev1.DNSClusterFirst, true)
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))
	w.planFile()
	w.applyFile()
	ctx := context.Background()
	bridgeThere := func() bool {
		_, err := c.Kube.CoreV1().Services("kube-system").Get(ctx, recreation.DefaultDNSBridgeName, metav1.GetOptions{})
		return err == nil
	}
	if !bridgeThere() {
		t.Fatal("no DNS bridge after the DNS move")
	}

	w.write(recreationConfig(c.Kubeconfig, "  dns_bridge = false", "", "172.24.0.0/15"))
	out := w.planFile()
	inUse := diagRE("DNS Bridge Still in Use", "1 running pods on 1 nodes", "started before the DNS move", "100.64.0.10: app/old (node")
	// No kubelet-config to read: the nodes, all registered before the move, may hand out the old IP.
	nodes := diagRE("Nodes From Before the DNS Move", "no kube-system/kubelet-config", "Ready nodes registered before the DNS move", "kwok-")
	if !inUse.MatchString(out) || !nodes.MatchString(out) || strings.Contains(out, "app/own-dns") || strings.Contains(out, "app/host") {
		t.Errorf("the plan does not warn about exactly app/old, and about the nodes from before the move:\n%s", out)
	}
	if out, err := w.run("apply", "tfplan"); err == nil || !diagRE("Error: DNS Bridge Still in Use", "app/old").MatchString(out) ||
		!diagRE("Error: Nodes From Before the DNS Move").MatchString(out) || !bridgeThere() {
		t.Fatalf("removing the bridge under app/old: apply %v, bridge there %v\n%s", err, bridgeThere(), out)
	}

	setKubeletClusterDNS(t, c, "100.64.0.10")
	if out, err := w.run("apply", "-auto-approve"); err == nil || !diagRE("Error: Kubelets Still Use the Bridge", "clusterDNS 100.64.0.10").MatchString(out) || !bridgeThere() {
		t.Fatalf("removing the bridge the kubelets still hand out: apply %v\n%s", err, out)
	}
	setKubeletClusterDNS(t, c, "172.24.0.10")
	f.barePod("new", corev1.DNSClusterFirst, false)
	f.barePod("pinned", corev1.DNSNone, false, "100.64.0.10")
	out, err := w.run("apply", "-auto-approve")
	if err == nil || !diagRE("Error: DNS Bridge Still in Use", "the last change of kube-system/kubelet-config", "app/old").MatchString(out) ||
		!diagRE("Error: Pods Name the DNS Bridge", "1 running pods name the bridge's IP 100.64.0.10", "app/pinned").MatchString(out) ||
		!diagRE("DNS Bridge Removal Not Fully Checked", "clusterDNS 172.24.0.10", "without nodes/proxy").MatchString(out) ||
		strings.Contains(out, "app/new") {
		t.Fatalf("after kubelet-config names the new IP: app/old (started before) and app/pinned (names the bridge), "+
			"not app/new, and what could not be checked per kubelet: apply %v\n%s", err, out)
	}

	w.write(recreationConfig(c.Kubeconfig, "  dns_bridge = false", "dns_bridge_force_removal = true", "172.24.0.0/15"))
	w.planFile()
	w.applyFile()
	if bridgeThere() {
		t.Error("the bridge is still there with dns_bridge_force_removal = true")
	}
	w.converged()
}

// TestAccServiceMoves_pinnedClusterIP: Services whose clusterIP a tool applies again (Argo CD by
// server-side apply, Helm by its updates) are not planned to move: the plan warns, naming each
// and its tool, and the apply moves only the rest. Once Argo CD applies its manifest without
// clusterIP its ownership of the field is gone and the Service moves; Helm's update keeps its
// ownership, so the user lists the chart's Service in include_pinned, and it moves.
func TestAccServiceMoves_pinnedClusterIP(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := targetCluster(t)
	f := fixture{t, c.Kube}
	f.namespace("app")
	ctx := context.Background()
	api := c.Kube.CoreV1().Services("app")
	argo := func(clusterIP string) {
		t.Helper()
		spec := corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "gitops"}).WithPorts(corev1ac.ServicePort().WithName("p").WithPort(80))
		if clusterIP != "" {
			spec = spec.WithClusterIP(clusterIP)
		}
		if _, err := api.Apply(ctx, corev1ac.Service("gitops", "app").WithSpec(spec), metav1.ApplyOptions{FieldManager: "argocd-controller", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	argo("100.64.1.7")
	chart := ipService("chart", "ClusterIP", "100.64.1.8")
	if _, err := api.Create(ctx, chart, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	f.service("app", ipService("plain", "ClusterIP", "100.64.1.9"))

	config := func(dataArgs string) string {
		return providerBlock(c.Kubeconfig) + recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]\n%s", faultTarget, dataArgs), "")
	}
	w := newCLIWorkspace(t, config(""))
	var warned *planDiagnostic
	for _, d := range w.planDiagnostics() {
		if d.Summary == "Cluster IPs Pinned by a Tool That Applies Them Again" {
			warned = &d
		}
	}
	if warned == nil || warned.Severity != "warning" || warned.Address != "data.k8scidr_service_moves.this" ||
		!diagRE("2 Service", "- app/chart: spec.clusterIP set by helm (update)", "- app/gitops: spec.clusterIP set by argocd-controller (apply)",
			"include_pinned").MatchString(warned.Detail) {
		t.Fatalf("the plan does not warn of the two pinned Services: %+v", warned)
	}
	w.planFile()
	w.applyFile()
	at := func(name string) string {
		svc, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc.Spec.ClusterIP
	}
	if got := map[string]string{"chart": at("chart"), "gitops": at("gitops"), "plain": at("plain")}; got["chart"] != "100.64.1.8" ||
		got["gitops"] != "100.64.1.7" || !strings.HasPrefix(got["plain"], "172.24.") {
		t.Fatalf("after the first apply: %v; want the pinned two where they were, plain moved", got)
	}

	argo("") // the repository's manifest lost its clusterIP, and Argo CD synced it
	w.write(config(`  include_pinned = ["app/chart"]`))
	w.planFile()
	w.applyFile()
	for _, name := range []string{"chart", "gitops"} {
		if ip := at(name); !strings.HasPrefix(ip, "172.24.") {
			t.Errorf("app/%s at %s after its tool let go of clusterIP; want it moved", name, ip)
		}
	}
	argo("") // Argo CD's next sync goes through on the moved Service
	w.converged()
}
