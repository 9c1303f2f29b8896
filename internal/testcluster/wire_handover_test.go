// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// TestWire_handOverProtocol moves every Service of the wire (the cluster DNS among them) by
// the hand-over the zero-downtime guide describes, written here with client-go alone, while
// the clients run: the Service is never deleted (ClusterIP → ExternalName → ClusterIP), a
// carrier and the old-IP bridge serve both IPs through externalIPs while the allocations move,
// and every step that the next relies on waits for kube-proxy's sync. It is the experiment
// that decides the provider's protocol, run by make test-wire: every kind of client must see
// no failure at all, with kOps' caching Corefile.
func TestWire_handOverProtocol(t *testing.T) { wireHandOver(t, ProxyNFTables) }

// TestWire_handOverProtocolIPTables is TestWire_handOverProtocol with kube-proxy in iptables mode.
func TestWire_handOverProtocolIPTables(t *testing.T) { wireHandOver(t, ProxyIPTables) }

func wireHandOver(t *testing.T, mode ProxyMode) {
	if RerunIsolated(t) {
		return
	}
	c, w, seed := startWire(t, WireOptions{Mode: mode, Corefile: CorefileKOps}, 10, 0)
	ctx := context.Background()
	cl, err := w.StartClients(ctx, ClientOptions{Services: seed.Services})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	time.Sleep(2 * time.Second)
	if r := cl.Report(); r.Failed(ClientKinds...) != 0 {
		t.Fatalf("clients failed before the move:\n%s", r)
	}
	target := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"172.24.0.0/15"}}}
	if _, err := c.Kube.NetworkingV1().ServiceCIDRs().Create(ctx, target, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sc, err := c.Kube.NetworkingV1().ServiceCIDRs().Get(ctx, "new", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady), nil
	})
	if err != nil {
		t.Fatalf("the ServiceCIDR for the new IPs is not Ready: %v", err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(seed.Services)+1)
	// The hand-over is for ClusterIP Services: the NodePort ones stay where they are.
	clusterIPs := slices.DeleteFunc(slices.Clone(seed.Services), func(s string) bool { return slices.Contains(seed.NodePorts, s) })
	for i, key := range append([]string{seed.DNS}, clusterIPs...) {
		wg.Go(func() { errs <- handOver(ctx, c.Kube, key, fmt.Sprintf("172.24.0.%d", 10+i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	moved := time.Since(start)
	time.Sleep(CorefileKOps.TTL + 3*time.Second)
	r := cl.Stop()
	t.Logf("kube-proxy %s: %d Services and the cluster DNS handed over in %s; what the clients saw:\n%s", mode,
		len(clusterIPs), moved.Round(time.Millisecond), r)
	if n := r.Failed(ClientKinds...); n > 0 {
		t.Errorf("%d failed queries or requests during the hand-over", n)
	}
}

// handOverSync is how long a step waits for kube-proxy to have synced what it wrote:
// --iptables-min-sync-period (1 s by default) after the sync it triggered, and the watch delay.
const handOverSync = 1500 * time.Millisecond

// handOver moves the Service key to newIP: carrier C (new IP, old IP as external IP), the
// Service as ExternalName C, the bridge B (old IP, new IP as external IP), the Service as
// ExternalName B, C deleted, the Service at the new IP, B without the external IP.
func handOver(ctx context.Context, kube kubernetes.Interface, key, newIP string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	api := kube.CoreV1().Services(ns)
	s, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	oldIP := s.Spec.ClusterIP
	fqdn := func(n string) string { return n + "." + ns + ".svc.cluster.local" }
	helper := func(n, clusterIP, externalIP string) *corev1.Service {
		ports := slices.Clone(s.Spec.Ports)
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: corev1.ServiceSpec{
			ClusterIP: clusterIP, Selector: s.Spec.Selector, Ports: ports, ExternalIPs: []string{externalIP}}}
	}
	carrier, bridge := name+"-carrier", name+"-bridge"
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %s: %w", key, what, err)
		}
		return nil
	}
	if _, err := api.Create(ctx, helper(carrier, newIP, oldIP), metav1.CreateOptions{}); err != nil {
		return step("creating the carrier", err)
	}
	if err := synced(ctx, kube, ns, carrier); err != nil {
		return step("the carrier's slice", err)
	}
	s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, fqdn(carrier)
	families, policy, internal := s.Spec.IPFamilies, s.Spec.IPFamilyPolicy, s.Spec.InternalTrafficPolicy
	s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy, s.Spec.InternalTrafficPolicy = "", nil, nil, nil, nil
	if s, err = api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return step("to ExternalName", err)
	}
	if _, err := api.Create(ctx, helper(bridge, oldIP, newIP), metav1.CreateOptions{}); err != nil {
		return step("creating the bridge", err)
	}
	if err := synced(ctx, kube, ns, bridge); err != nil {
		return step("the bridge's slice", err)
	}
	s.Spec.ExternalName = fqdn(bridge)
	if s, err = api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return step("pointing at the bridge", err)
	}
	if err := api.Delete(ctx, carrier, metav1.DeleteOptions{}); err != nil {
		return step("deleting the carrier", err)
	}
	s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ServiceTypeClusterIP, "", newIP, []string{newIP}
	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy, s.Spec.InternalTrafficPolicy = families, policy, internal
	if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return step("back to ClusterIP at the new IP", err)
	}
	time.Sleep(handOverSync)
	b, err := api.Get(ctx, bridge, metav1.GetOptions{})
	if err != nil {
		return step("reading the bridge", err)
	}
	b.Spec.ExternalIPs = nil
	_, err = api.Update(ctx, b, metav1.UpdateOptions{})
	return step("the bridge without the new IP", err)
}

// synced waits for the Service's EndpointSlice, then for kube-proxy to have synced it.
func synced(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		return err == nil && len(l.Items) > 0 && len(l.Items[0].Endpoints) > 0, nil
	})
	if err != nil {
		return err
	}
	time.Sleep(handOverSync)
	return nil
}
