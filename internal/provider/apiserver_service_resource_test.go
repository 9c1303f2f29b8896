// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// apiServerConfig is the new Service range (as stage 1 leaves it) and, with the resource's
// arguments, the apiserver Service's move.
func apiServerConfig(kubeconfig, args string) string {
	cfg := providerBlock(kubeconfig) + `
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]
}
`
	if args != "none" {
		cfg += fmt.Sprintf(`
resource "k8scidr_apiserver_service" "this" {
  service_cidrs = ["172.24.0.0/15"]
%s
  depends_on = [k8scidr_service_cidr.new]
}
`, args)
	}
	return cfg
}

// apiServerEndpointFlags give kube-apiserver endpoints for default/kubernetes: the reconciler
// the test clusters turn off (they advertise 127.0.0.1, which an Endpoints object may not hold),
// with 192.0.2.1 (TEST-NET-1) advertised. It is object data only: nothing connects to it, the
// clients use the bind address.
var apiServerEndpointFlags = []string{"--advertise-address=192.0.2.1", "--endpoint-reconciler-type=lease"}

// onNewRange is where the apiserver Service's move starts: the new Service range made (as stage 1
// leaves it) and kube-apiserver restarted on it. It returns the workspace holding the range.
func onNewRange(t *testing.T, c *testcluster.Cluster) *cliWorkspace {
	t.Helper()
	w := newCLIWorkspace(t, apiServerConfig(c.Kubeconfig, "none"))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the new Service range: %v\n%s", err, out)
	}
	if err := c.RestartAPIServer(context.Background(), []string{"172.24.0.0/15"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// startedPod creates a bare pod in default and waits until a kubelet (kwok) started it.
func startedPod(t *testing.T, kube kubernetes.Interface, name string, env ...corev1.EnvVar) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: podTemplate(name).Spec}
	p.Spec.Containers[0].Env = env
	if _, err := kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.StartTime != nil, err
	})
	if err != nil {
		t.Fatalf("pod default/%s not started: %v", name, err)
	}
}

// TestAccAPIServerService_move is the apiserver's own Service moving with its range, on a real
// kube-apiserver restarted with the new --service-cluster-ip-range: default/kubernetes recreated
// at the new range's first address, the old IP kept by a bridge serving the apiserver's
// endpoints (checked every 50 ms by a probe of its own: the longest gap is logged and must stay
// under a second), the old default ServiceCIDR retired and recreated by kube-apiserver from its
// flags, the bridge's endpoints kept current by every apply, and its removal refused while a pod
// started before the move runs.
func TestAccAPIServerService_move(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags})
	kube := c.Kube
	startedPod(t, kube, "old-client")
	startedPod(t, kube, "pinned", corev1.EnvVar{Name: "API", Value: "https://100.64.0.1:443"})

	// Outside the API: kube-apiserver restarts on the new range. It leaves default/kubernetes
	// and the default ServiceCIDR as they are.
	w := onNewRange(t, c)
	if s, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil || s.Spec.ClusterIP != "100.64.0.1" {
		t.Fatalf("default/kubernetes after the restart: %v (%v), want it left at 100.64.0.1", s.Spec.ClusterIPs, err)
	}
	probe, err := c.ProbeAPIServerIP("100.64.0.1", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Stop()

	w.write(apiServerConfig(c.Kubeconfig, ""))
	t.Logf("plan:\n%s", w.planFile())
	if got := w.planned("k8scidr_apiserver_service.this", "new_ips"); fmt.Sprint(got) != "[172.24.0.1]" {
		t.Errorf("planned new_ips %v, want [172.24.0.1] known at plan", got)
	}
	w.applyFile()
	svc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || !slices.Equal(svc.Spec.ClusterIPs, []string{"172.24.0.1"}) || svc.Labels["component"] != "apiserver" ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("default/kubernetes after the move: %+v (%v)", svc, err)
	}
	bridge, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes-old-100-64-0-1", metav1.GetOptions{})
	if err != nil || !slices.Equal(bridge.Spec.ClusterIPs, []string{"100.64.0.1"}) || len(bridge.Spec.Selector) > 0 {
		t.Fatalf("the bridge: %+v (%v)", bridge, err)
	}
	apiEPs, bridgeEPs := sliceEndpoints(t, kube, "kubernetes"), sliceEndpoints(t, kube, bridge.Name)
	if len(apiEPs) == 0 || !slices.Equal(apiEPs, bridgeEPs) {
		t.Errorf("the bridge serves %v, the apiserver is at %v", bridgeEPs, apiEPs)
	}
	keep, err := k8sops.GetServiceCIDR(ctx, clientFor(c), "kubernetes-old-100-64-0-0-30")
	if err != nil || !keep.Ready || !slices.Equal(keep.CIDRs, []string{"100.64.0.0/30"}) {
		t.Errorf("the keep-range: %+v (%v)", keep, err)
	}
	def, err := k8sops.GetServiceCIDR(ctx, clientFor(c), k8sops.DefaultServiceCIDRName)
	if err != nil || !def.Ready || !slices.Equal(def.CIDRs, []string{"172.24.0.0/15"}) {
		t.Errorf("the default ServiceCIDR after the move: %+v (%v), want it recreated with 172.24.0.0/15", def, err)
	}
	for attr, want := range map[string]string{"old_ips": "[100.64.0.1]", "bridge_service": "default/kubernetes-old-100-64-0-1",
		"default_service_cidr": "[172.24.0.0/15]", "in_sync": "true", "keep_cidrs": "[kubernetes-old-100-64-0-0-30=100.64.0.0/30]"} {
		if got := fmt.Sprint(w.stateValue("k8scidr_apiserver_service.this", attr)); got != want {
			t.Errorf("state %s = %s, want %s", attr, got, want)
		}
	}
	movedAt, err := time.Parse(time.RFC3339, fmt.Sprint(w.stateValue("k8scidr_apiserver_service.this", "moved_at")))
	if err != nil || !movedAt.Equal(svc.CreationTimestamp.UTC()) {
		t.Errorf("moved_at %v (%v), want default/kubernetes's creation %v", movedAt, err, svc.CreationTimestamp)
	}
	w.converged()
	polls, ok, gaps, holder := probe.Report()
	longest := probe.Longest()
	t.Logf("old apiserver IP 100.64.0.1: %d polls, %d served, %d gap(s), longest %v, held by %s at the end", polls, ok, len(gaps), longest, holder)
	if polls < 20 || longest >= time.Second || holder != bridge.Name {
		t.Errorf("the old apiserver IP was not served by the apiserver's endpoints: %d polls, longest gap %v, gaps %v, holder %s",
			polls, longest, gaps, holder)
	}

	// Drift: the bridge's endpoints no longer the apiserver's (as after a control-plane roll).
	// Refresh shows in_sync false, and the apply copies them again.
	stale, err := kube.DiscoveryV1().EndpointSlices("default").Get(ctx, bridge.Name+"-ipv4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.99"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	if _, err := kube.DiscoveryV1().EndpointSlices("default").Update(ctx, stale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.planFile()
	if got := w.plannedActions("k8scidr_apiserver_service.this"); !slices.Equal(got, []string{"update"}) {
		t.Errorf("stale bridge endpoints: planned %v, want an update (in_sync back to true)", got)
	}
	w.applyFile()
	if got := sliceEndpoints(t, kube, bridge.Name); !slices.Equal(got, sliceEndpoints(t, kube, "kubernetes")) {
		t.Errorf("after the apply the bridge serves %v, not the apiserver's endpoints", got)
	}
	w.converged()

	// The bridge stays while a pod started before the move runs, and while one names the old IP.
	w.write(apiServerConfig(c.Kubeconfig, "  bridge = false"))
	out, err := w.run("plan", "-input=false")
	if err == nil || !diagRE("Apiserver Bridge Still in Use", "default/old-client").MatchString(out) ||
		!diagRE("Pods Name the Apiserver's Old IP", "default/pinned").MatchString(out) {
		t.Errorf("bridge = false with pods started before the move: %v\n%s", err, out)
	}
	for _, name := range []string{"old-client", "pinned"} {
		if err := kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	startedPod(t, kube, "new-client") // started after the move: it does not hold the bridge
	if out, err := w.run("apply", "-auto-approve", "-input=false"); err != nil {
		t.Fatalf("bridge = false after the pods restarted: %v\n%s", err, out)
	}
	if _, err := kube.CoreV1().Services("default").Get(ctx, bridge.Name, metav1.GetOptions{}); err == nil {
		t.Error("the bridge is still there after bridge = false")
	}
	if _, err := k8sops.GetServiceCIDR(ctx, clientFor(c), "kubernetes-old-100-64-0-0-30"); err == nil {
		t.Error("the keep-range is still there after bridge = false")
	}
	if eps := sliceEndpoints(t, kube, bridge.Name); len(eps) > 0 {
		t.Errorf("the bridge's EndpointSlice is still there: %v", eps)
	}
	w.converged()
	if out, err := w.run("destroy", "-auto-approve", "-input=false"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	if svc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil || svc.Spec.ClusterIP != "172.24.0.1" {
		t.Errorf("default/kubernetes after destroy: %v (%v): destroy must not move it", svc.Spec.ClusterIPs, err)
	}
}

// TestAccAPIServerService_destroyRefused: destroying the resource while the bridge serves pods
// started before the move is refused at plan, naming the way out.
func TestAccAPIServerService_destroyRefused(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags})
	startedPod(t, c.Kube, "old-client")
	w := onNewRange(t, c)
	w.write(apiServerConfig(c.Kubeconfig, "  retire_default_service_cidr = false"))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the move: %v\n%s", err, out)
	}
	if def, err := k8sops.GetServiceCIDR(ctx, clientFor(c), k8sops.DefaultServiceCIDRName); err != nil || !slices.Equal(def.CIDRs, []string{"100.64.0.0/13"}) {
		t.Errorf("retire_default_service_cidr = false retired it: %+v (%v)", def, err)
	}
	out, err := w.run("plan", "-destroy", "-input=false")
	if err == nil || !diagRE("Apiserver Bridge Still in Use", "default/old-client", "started_before = moved_at").MatchString(out) {
		t.Errorf("destroy with the bridge in use: %v\n%s", err, out)
	}
	w.write(apiServerConfig(c.Kubeconfig, "  retire_default_service_cidr = false\n  bridge_force_removal = true"))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("bridge_force_removal: %v\n%s", err, out)
	}
	// The new range stays: with the default range not retired, it alone holds default/kubernetes.
	if out, err := w.run("destroy", "-auto-approve", "-target=k8scidr_apiserver_service.this"); err != nil {
		t.Fatalf("forced destroy: %v\n%s", err, out)
	}
	if _, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes-old-100-64-0-1", metav1.GetOptions{}); err == nil {
		t.Error("the bridge outlived a forced destroy")
	}
}

// sliceEndpoints are the ready "ip:port" endpoints of Service default/name's EndpointSlices.
func sliceEndpoints(t *testing.T, kube kubernetes.Interface, name string) []string {
	t.Helper()
	list, err := kube.DiscoveryV1().EndpointSlices("default").List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				for _, p := range s.Ports {
					out = append(out, fmt.Sprintf("%s:%d", a, ptr.Deref(p.Port, 0)))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestAccAPIServerService_resumes: an apply that stopped right after deleting default/kubernetes
// (the keep-range made, the bridge not yet) is finished by the next: the old IP, recorded on
// the keep-range, gets its bridge, and the Service is at the new IP.
func TestAccAPIServerService_resumes(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags})
	w := onNewRange(t, c)
	// What the stopped apply left: the keep-range recording the old IP, and the Service deleted.
	client := clientFor(c)
	api, _, err := k8sops.ServiceCIDRAPI(client)
	if err != nil {
		t.Fatal(err)
	}
	keep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
		"metadata": map[string]any{"name": "kubernetes-old-100-64-0-0-30",
			"labels":      map[string]any{k8sops.APIServerBridgeLabel: "true"},
			"annotations": map[string]any{servicecidr.APIServerOldIPsAnnotation: "100.64.0.1"}},
		"spec": map[string]any{"cidrs": []any{"100.64.0.0/30"}},
	}}
	if _, err := api.Create(ctx, keep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := servicecidr.WaitServiceCIDRReady(ctx, client, "kubernetes-old-100-64-0-0-30"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kube.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.write(apiServerConfig(c.Kubeconfig, ""))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the apply after the stopped one: %v\n%s", err, out)
	}
	bridge, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes-old-100-64-0-1", metav1.GetOptions{})
	if err != nil || !slices.Equal(bridge.Spec.ClusterIPs, []string{"100.64.0.1"}) {
		t.Fatalf("the bridge after resuming: %+v (%v)", bridge, err)
	}
	if eps := sliceEndpoints(t, c.Kube, bridge.Name); len(eps) == 0 || !slices.Equal(eps, sliceEndpoints(t, c.Kube, "kubernetes")) {
		t.Errorf("the bridge serves %v, the apiserver %v", eps, sliceEndpoints(t, c.Kube, "kubernetes"))
	}
	svc, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "172.24.0.1" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("default/kubernetes after resuming: %+v (%v)", svc, err)
	}
	if got := fmt.Sprint(w.stateValue("k8scidr_apiserver_service.this", "old_ips")); got != "[100.64.0.1]" {
		t.Errorf("old_ips %s, want the IP the keep-range recorded", got)
	}
	w.converged()
}

// TestAccAPIServerService_bridgeRefused: a ResourceQuota in default with no room for another
// Service would refuse the bridge; the apply finds out by a dry run before anything is deleted,
// says so, and default/kubernetes stays where it is. With room, the next apply moves it.
func TestAccAPIServerService_bridgeRefused(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags})
	w := onNewRange(t, c)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "services"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: apiresource.MustParse("1")}}}
	if _, err := c.Kube.CoreV1().ResourceQuotas("default").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := c.Kube.CoreV1().ResourceQuotas("default").Get(ctx, "services", metav1.GetOptions{})
		return err == nil && q.Status.Used != nil && !q.Status.Used.Name(corev1.ResourceServices, "").IsZero(), err
	})
	if err != nil {
		t.Fatalf("the quota never counted default's Services: %v", err)
	}
	w.write(apiServerConfig(c.Kubeconfig, ""))
	out, err := w.run("apply", "-auto-approve")
	if err == nil || !diagRE("would refuse the bridge Service default/kubernetes-old-100-64-0-1", "nothing was deleted").MatchString(out) {
		t.Fatalf("apply with no room for the bridge: %v\n%s", err, out)
	}
	if s, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil || s.Spec.ClusterIP != "100.64.0.1" {
		t.Errorf("default/kubernetes after the refused apply: %v (%v), want it left at 100.64.0.1", s.Spec.ClusterIPs, err)
	}
	if err := c.Kube.CoreV1().ResourceQuotas("default").Delete(ctx, "services", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("apply with room: %v\n%s", err, out)
	}
	if s, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil || s.Spec.ClusterIP != "172.24.0.1" {
		t.Errorf("default/kubernetes after the second apply: %v (%v)", s.Spec.ClusterIPs, err)
	}
}

// TestAccAPIServerService_servingCertificate: kube-apiserver's serving certificate names the
// old kubernetes IP (as kubeadm issues it) but not the new one: the plan warns, and the apply
// refuses before the delete, saying how to issue it, with default/kubernetes left where it was
// (moved, every in-cluster client would fail to verify the API at the new IP). A certificate
// that names both lets the move through, once every kube-apiserver's mirror pod says the new
// --service-cluster-ip-range: a second control-plane node's, not yet rolled (kOps' shell command
// line, on the old range), would recreate default/kubernetes in the old range, so the plan warns
// and the apply refuses until its pod is made again with the new flag.
func TestAccAPIServerService_servingCertificate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		ips     []string
		refused bool
	}{{"old IP only", []string{"100.64.0.1"}, true}, {"old and new IPs", []string{"100.64.0.1", "172.24.0.1"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags, ServingCertIPs: tc.ips})
			w := onNewRange(t, c)
			w.write(apiServerConfig(c.Kubeconfig, ""))
			kubernetesAt := func() string {
				t.Helper()
				s, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return s.Spec.ClusterIP
			}
			warned := func(summary string, detail ...string) bool {
				for _, d := range w.planDiagnostics() {
					if d.Summary == summary && d.Severity == "warning" && diagRE(detail...).MatchString(d.Detail) {
						return true
					}
				}
				return false
			}
			certWarned := warned("Apiserver Certificate Lacks the New IP", "names default/kubernetes's IP 100.64.0.1 but not its new IP 172.24.0.1", "kubeadm init phase certs apiserver")
			if certWarned != tc.refused {
				t.Errorf("the plan warns of the certificate: %t, want %t", certWarned, tc.refused)
			}
			if tc.refused {
				out, err := w.run("apply", "-auto-approve")
				if err == nil || !diagRE("serving certificate", "but not its new IP 172.24.0.1", "so it was not moved", "kops update cluster").MatchString(out) {
					t.Fatalf("apply with a certificate lacking the new IP: %v\n%s", err, out)
				}
				if ip := kubernetesAt(); ip != "100.64.0.1" {
					t.Errorf("default/kubernetes at %s after the refused apply, want it left at 100.64.0.1", ip)
				}
				return
			}
			// The second control-plane node's kube-apiserver, still on the old range.
			mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-cp-b", Namespace: "kube-system",
				Labels: map[string]string{"k8s-app": "kube-apiserver"}, Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
				Spec: corev1.PodSpec{HostNetwork: true, NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "kube-apiserver", Image: "kube-apiserver",
					Command: []string{"/bin/sh", "-c", "/usr/local/bin/kube-apiserver --allow-privileged=true --service-cluster-ip-range=100.64.0.0/13 2>&1 | /bin/tee -a /var/log/kube-apiserver.log"}}}}}
			pods := c.Kube.CoreV1().Pods("kube-system")
			if _, err := pods.Create(ctx, mirror, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			staleRE := []string{"in kube-system/kube-apiserver-cp-b (--service-cluster-ip-range=100.64.0.0/13)", "would be undone at the old IP",
				"--service-cluster-ip-range=172.24.0.0/15 first", "kops rolling-update cluster"}
			if !warned("Apiserver Runs Another Range", staleRE...) {
				t.Errorf("the plan does not warn that kube-system/kube-apiserver-cp-b runs the old range")
			}
			out, err := w.run("apply", "-auto-approve")
			if err == nil || !diagRE(staleRE...).MatchString(out) {
				t.Fatalf("apply with a kube-apiserver on the old range: %v\n%s", err, out)
			}
			if ip := kubernetesAt(); ip != "100.64.0.1" {
				t.Errorf("default/kubernetes at %s after the refused apply, want it left at 100.64.0.1", ip)
			}
			// Rolled: its kubelet makes the mirror pod again from the new manifest.
			if err := pods.Delete(ctx, mirror.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			mirror.Spec.Containers[0].Command[2] = strings.Replace(mirror.Spec.Containers[0].Command[2], "100.64.0.0/13", "172.24.0.0/15", 1)
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := pods.Create(ctx, mirror, metav1.CreateOptions{})
				return err == nil, nil // AlreadyExists while the old one terminates
			})
			if err != nil {
				t.Fatal(err)
			}
			if warned("Apiserver Runs Another Range") {
				t.Errorf("the plan still warns of the old range once every kube-apiserver runs the new one")
			}
			if out, err := w.run("apply", "-auto-approve"); err != nil || kubernetesAt() != "172.24.0.1" {
				t.Fatalf("apply with a certificate naming the new IP and every kube-apiserver on the new range: %v, default/kubernetes at %s\n%s", err, kubernetesAt(), out)
			}
		})
	}
}

// TestAccAPIServerService_bridgeFailsAfterDelete: a ValidatingAdmissionPolicy lets the bridge's
// dry run through and refuses its create (a policy that judges `request.dryRun`, as a quota
// filled between the two would). The apply must still recreate default/kubernetes at the new IP
// itself (its field manager on the Service, not kube-apiserver's own reconciler some seconds
// later), fail naming the bridge, and the next apply, once the policy is gone, must make the
// bridge on the old IP. Before, the bridge's error returned before default/kubernetes was made.
func TestAccAPIServerService_bridgeFailsAfterDelete(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags})
	w := onNewRange(t, c)
	admission := c.Kube.AdmissionregistrationV1()
	_, err := admission.ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-real-bridge"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}}}}}},
			Validations: []admissionv1.Validation{{
				Expression: "request.dryRun || !object.metadata.name.startsWith('kubernetes-old-')",
				Message:    "no bridge today"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admission.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-real-bridge"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-real-bridge",
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-old-probe"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Services("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "no bridge today"), nil
	})
	if err == nil {
		t.Fatal("the policy refuses dry runs too: the test needs one that lets them through")
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Services("default").Create(ctx, probe.DeepCopy(), metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "no bridge today"), nil
	})
	if err != nil {
		t.Fatalf("the policy is not enforced: %v", err)
	}

	w.write(apiServerConfig(c.Kubeconfig, ""))
	out, err := w.run("apply", "-auto-approve")
	if err == nil || !diagRE("Apiserver Service Move Not Finished", "default/kubernetes was moved, but its old IPs have no bridge", "no bridge today").MatchString(out) {
		t.Fatalf("apply whose bridge create is refused after the delete: %v\n%s", err, out)
	}
	s, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || s.Spec.ClusterIP != "172.24.0.1" {
		t.Fatalf("default/kubernetes right after the apply: %v, want it recreated at 172.24.0.1", err)
	}
	managers := []string{}
	for _, f := range s.ManagedFields {
		managers = append(managers, f.Manager)
	}
	if !slices.Contains(managers, k8sops.DefaultFieldManager) {
		t.Errorf("default/kubernetes was made by %v, not by the apply (field manager %s)", managers, k8sops.DefaultFieldManager)
	}

	if err := admission.ValidatingAdmissionPolicyBindings().Delete(ctx, "no-real-bridge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Services("default").Create(ctx, probe.DeepCopy(), metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the policy is still enforced after its binding's delete: %v", err)
	}
	if err := c.Kube.CoreV1().Services("default").Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("apply once the bridge is admitted: %v\n%s", err, out)
	}
	b, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes-old-100-64-0-1", metav1.GetOptions{})
	if err != nil || b.Spec.ClusterIP != "100.64.0.1" {
		t.Errorf("the bridge after the second apply: %v", err)
	}
	if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
		t.Errorf("plan after the bridge was made is not empty: %v\n%s", err, out)
	}
}

// TestAccAPIServerService_twoFamilies: kube-apiserver on two families' ranges makes
// default/kubernetes single-stack on its primary range's first address. The resource given both
// ranges must move it there, single-stack, and a later plan must find nothing to do; before, it
// built a dual-stack Service kube-apiserver never makes.
func TestAccAPIServerService_twoFamilies(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags})
	cidrs := `["172.24.0.0/15", "fd00:24::/108"]`
	config := func(apiserver bool) string {
		cfg := providerBlock(c.Kubeconfig) + `
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ` + cidrs + `
}
`
		if apiserver {
			cfg += `
resource "k8scidr_apiserver_service" "this" {
  service_cidrs = ` + cidrs + `
  depends_on    = [k8scidr_service_cidr.new]
}
`
		}
		return cfg
	}
	w := newCLIWorkspace(t, config(false))
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("the new two-family Service range: %v\n%s", err, out)
	}
	if err := c.RestartAPIServer(ctx, []string{"172.24.0.0/15", "fd00:24::/108"}); err != nil {
		t.Fatal(err)
	}
	w.write(config(true))
	out, err := w.run("apply", "-auto-approve")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	s, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Spec.ClusterIPs, []string{"172.24.0.1"}) || s.Spec.IPFamilyPolicy == nil || *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		t.Errorf("default/kubernetes at %v (%v), want 172.24.0.1 single-stack as kube-apiserver makes it", s.Spec.ClusterIPs, ptr.Deref(s.Spec.IPFamilyPolicy, ""))
	}
	if strings.Contains(out, "fd00:24::1") {
		t.Errorf("the plan gave default/kubernetes a second family's IP (fd00:24::1):\n%s", out)
	}
	if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
		t.Errorf("plan after the move is not empty: %v\n%s", err, out)
	}
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("apply again: %v\n%s", err, out)
	}
	again, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || again.UID != s.UID {
		t.Errorf("default/kubernetes after the next apply: %v, UID %s, want it untouched (%s)", err, again.UID, s.UID)
	}
}
