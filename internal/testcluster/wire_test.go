// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// startWire starts a cluster and its wire in this test's network namespace, with the seed.
// termination is the cluster's Options.PodTermination.
func startWire(t *testing.T, o WireOptions, services int, termination time.Duration) (*Cluster, *Wire, *WireSeed) {
	t.Helper()
	requireBinaries(t)
	ctx := context.Background()
	// kube-apiserver on the wire too: listening on the node address its endpoints name, with a
	// certificate for default/kubernetes's IP, so that in-cluster API clients reach it.
	c, err := Start(ctx, Options{Nodes: 1, ServingCertIPs: []string{"100.64.0.1"}, PodTermination: termination,
		APIServerFlags: []string{"--advertise-address=" + WireNodeIP, "--endpoint-reconciler-type=lease", "--bind-address=0.0.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	w, err := c.StartWire(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := w.Seed(ctx, "wire", services, "100.64.0.10")
	if err != nil {
		t.Fatal(err)
	}
	return c, w, seed
}

// windowsAfter are the windows of kind at svc that began at or after from.
func windowsAfter(r *WireReport, kind ClientKind, svc string, from time.Time) []Window {
	return slices.DeleteFunc(slices.Clone(r.Kinds[kind].Windows[svc]), func(w Window) bool { return w.From.Before(from) })
}

func hasReason(ws []Window, prefix string) bool {
	return slices.ContainsFunc(ws, func(w Window) bool {
		return slices.ContainsFunc(w.Reasons, func(r string) bool { return strings.HasPrefix(r, prefix) })
	})
}

// failedAfter says whether kind failed at svc after from (in a window that may have begun before).
func failedAfter(r *WireReport, kind ClientKind, svc string, from time.Time) bool {
	return slices.ContainsFunc(r.Kinds[kind].Failures, func(f Failure) bool { return f.Service == svc && f.At.After(from) })
}

// TestWire_clientsSeeFailures proves the harness can fail: on a cluster served without a fault,
// no client fails; then a Service deleted and not recreated fails every client of it (the name
// through CoreDNS's cache of its last answer, kOps' Corefile), a Service moved by hand is
// answered from that cache with its old IP, which no longer routes, and
// with kube-proxy gone every kind of client fails, the restarted pod's included.
func TestWire_clientsSeeFailures(t *testing.T) {
	if RerunIsolated(t) {
		return
	}
	c, w, seed := startWire(t, WireOptions{Corefile: CorefileKOps}, 3, 0)
	ctx := context.Background()
	cl, err := w.StartClients(ctx, ClientOptions{Services: seed.Services, Interval: 50 * time.Millisecond, APIServerCA: c.CACert})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	time.Sleep(2 * time.Second)
	if r := cl.Report(); r.Failed(append(ClientKinds, APIClientKinds...)...) != 0 {
		t.Fatalf("clients failed on a cluster without a fault:\n%s", r)
	}
	svcs := c.Kube.CoreV1().Services("wire")

	deleted := time.Now()
	if err := svcs.Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	old, err := svcs.Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svcs.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	moved1 := old.DeepCopy()
	moved1.ResourceVersion, moved1.UID, moved1.Spec.ClusterIP, moved1.Spec.ClusterIPs = "", "", "", nil
	if _, err := svcs.Create(ctx, moved1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // longer than the clients' timeout: a dropped packet is recorded
	r := cl.Report()
	for _, k := range []ClientKind{ClientOldResolver, ClientKeptIP, ClientServiceHost} {
		if len(windowsAfter(r, k, "wire/web-0", deleted)) == 0 {
			t.Errorf("%s: no failure at a deleted Service", k)
		}
	}
	// The name answers again at once with its new IP, but CoreDNS's cache (kOps: cache 30,
	// ttl 30) hands out the old one, which no Service holds: the request to it fails.
	if !hasReason(windowsAfter(r, ClientOldResolver, "wire/web-1", moved), "http "+old.Spec.ClusterIP) {
		t.Errorf("old-resolver at a Service moved by hand: no failed request to its cached old IP %s among %v",
			old.Spec.ClusterIP, r.Kinds[ClientOldResolver].Windows["wire/web-1"])
	}
	if ws := windowsAfter(r, ClientOldResolver, "wire/web-2", deleted); len(ws) != 0 {
		t.Errorf("old-resolver failed at web-2, which nothing touched: %v", ws)
	}

	// A restarted pod resolves through the DNS Service's new IP once the API shows it.
	dns, err := c.Kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kube.CoreV1().Services("kube-system").Delete(ctx, "kube-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dns.ResourceVersion, dns.UID, dns.Spec.ClusterIP, dns.Spec.ClusterIPs = "", "", "100.64.0.53", nil
	if _, err := c.Kube.CoreV1().Services("kube-system").Create(ctx, dns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	stopped := time.Now()
	if err := w.StopKubeProxy(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	r = cl.Stop()
	t.Logf("what the clients saw:\n%s", r)
	if r.Kinds[ClientNewResolver].Requests == 0 {
		t.Errorf("new-resolver sent nothing after the DNS Service moved")
	}
	for _, k := range ClientKinds {
		if !failedAfter(r, k, "wire/web-2", stopped) {
			t.Errorf("%s: no failure at web-2 with kube-proxy gone", k)
		}
	}
	if !failedAfter(r, ClientAPIOld, "default/kubernetes", stopped) {
		t.Errorf("%s: no failure with kube-proxy gone", ClientAPIOld)
	}
}

// TestWire_podTermination proves a pod answers on the wire while it terminates
// (Options.PodTermination), and not once it is gone.
func TestWire_podTermination(t *testing.T) {
	if RerunIsolated(t) {
		return
	}
	c, w, _ := startWire(t, WireOptions{}, 1, 3*time.Second)
	ctx := context.Background()
	pods, err := c.Kube.CoreV1().Pods("wire").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the web pods: %v (%v)", pods, err)
	}
	p := pods.Items[0]
	get := func() error {
		return (&Clients{o: ClientOptions{Timeout: time.Second}, http: map[ClientKind]*http.Client{"": noKeepAlive(nil, nil)}}).get(ctx, "", p.Status.PodIP)
	}
	if err := get(); err != nil {
		t.Fatalf("pod %s at %s does not answer: %v", p.Name, p.Status.PodIP, err)
	}
	// Scaled to zero, not deleted: no new pod takes the IP.
	deleted := time.Now()
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := c.Kube.AppsV1().Deployments("wire").Patch(ctx, "web", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := c.Kube.CoreV1().Pods("wire").Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && cur.DeletionTimestamp != nil, nil
	}); err != nil {
		t.Fatalf("pod %s was not deleted: %v", p.Name, err)
	}
	if err := get(); err != nil || !w.Has(p.Status.PodIP) {
		t.Errorf("pod %s's IP %s does not answer %v after its delete, while it terminates: %v", p.Name, p.Status.PodIP, time.Since(deleted), err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Pods("wire").Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("pod %s was not removed: %v", p.Name, err)
	}
	if gone := time.Since(deleted); gone < 2*time.Second {
		t.Errorf("pod %s was removed %v after its delete: it did not terminate for 3 s", p.Name, gone)
	}
	time.Sleep(time.Second) // the wire's watch
	if err := get(); err == nil || w.Has(p.Status.PodIP) {
		t.Errorf("pod %s's IP %s still answers once the pod is gone", p.Name, p.Status.PodIP)
	}
	// The last endpoint of its Service, it was routed to until it was gone (kube-proxy keeps a
	// Service's terminating endpoints when it has no other); kube-proxy's next sync drops it.
	t.Logf("pod %s left the wire with kube-proxy still routing to it: %v", p.Name, len(w.GoneWhileRouted("wire/"+p.Name)) > 0)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		routed, err := proxyRoutesTo(p.Status.PodIP)
		return !routed, err
	}); err != nil {
		t.Errorf("kube-proxy still routes to %s, the IP of pod %s, gone: %v", p.Status.PodIP, p.Name, err)
	}

	// A pod removed without terminating (grace period 0) leaves while kube-proxy still sends
	// connections to it: the wire tells (GoneWhileRouted), which is what lets a test name the
	// failures of a termination shorter than kube-proxy's lag.
	scale = []byte(`{"spec":{"replicas":1}}`)
	if _, err := c.Kube.AppsV1().Deployments("wire").Patch(ctx, "web", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var q corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods("wire").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
			return false, nil
		}
		q = pods.Items[0]
		routed, err := proxyRoutesTo(q.Status.PodIP)
		return routed, err
	}); err != nil {
		t.Fatalf("kube-proxy never routed to the scaled-up web pod %s (%s): %v", q.Name, q.Status.PodIP, err)
	}
	zero := int64(0)
	if err := c.Kube.CoreV1().Pods("wire").Delete(ctx, q.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !w.Has(q.Status.PodIP), nil
	}); err != nil {
		t.Fatalf("pod %s's IP %s stayed on the wire after its forced delete", q.Name, q.Status.PodIP)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(w.GoneWhileRouted("wire/"+q.Name)) > 0, nil
	}); err != nil {
		t.Errorf("pod %s, deleted with no grace period, left the wire unnoticed while kube-proxy routed to it", q.Name)
	}
	if err := w.Err(); err != nil {
		t.Error(err)
	}
}
