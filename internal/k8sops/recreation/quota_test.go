// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// TestAwaitQuotaRecount: a quota at its limit with fewer Services in the namespace than it
// counts (a create admitted and never stored) is waited for until recounted, with a note saying
// why and how to hurry it; a quota the Services do fill, or a refusal that is not a Services
// count's, is not waited for; an ended context ends the wait.
func TestAwaitQuotaRecount(t *testing.T) {
	defer func(d time.Duration) { quotaRecountEvery = d }(quotaRecountEvery)
	quotaRecountEvery = 10 * time.Millisecond
	quota := func(res corev1.ResourceName, hard, used int64) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "q"},
			Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{res: *resource.NewQuantity(hard, resource.DecimalSI)}},
			Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{res: *resource.NewQuantity(hard, resource.DecimalSI)}, Used: corev1.ResourceList{res: *resource.NewQuantity(used, resource.DecimalSI)}}}
	}
	services := func(n int) []runtime.Object {
		var out []runtime.Object
		for i := range n {
			out = append(out, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: string(rune('a' + i))}})
		}
		return out
	}
	// Read by a listing every quotaRecountEvery, or from the run's watch of the quotas.
	for _, watched := range []bool{false, true} {
		t.Run(map[bool]string{false: "stale, listed", true: "stale, watched"}[watched], func(t *testing.T) { testStaleQuota(t, watched, quota, services) })
	}
	testOtherQuotas(t, quota, services)
}

func testStaleQuota(t *testing.T, watched bool, quota func(corev1.ResourceName, int64, int64) *corev1.ResourceQuota, services func(int) []runtime.Object) {
	ctx := context.Background()
	kube := fake.NewClientset(append(services(1), quota("count/services", 2, 2))...)
	x := &executor{c: &k8sops.Client{Kube: kube}}
	if watched {
		t.Cleanup(x.guards.watch(ctx, x.c, testLog(t)))
		if x.guards.watched() == nil {
			t.Fatal("the watches did not start")
		}
	}
	go func() { // the recount
		time.Sleep(50 * time.Millisecond)
		if _, err := kube.CoreV1().ResourceQuotas("app").UpdateStatus(ctx, quota("count/services", 2, 1), metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	if !x.awaitQuotaRecount(ctx, quotaTestService("b", corev1.ServiceTypeClusterIP), "app/b") {
		t.Fatal("a stale quota was not waited for")
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Error("returned before the recount")
	}
	if len(x.res.Notes) != 1 || !strings.Contains(x.res.Notes[0], "ResourceQuota app/q counted 2 Services (limit 2) while app's Services used 1") ||
		!strings.Contains(x.res.Notes[0], "spec.hard") {
		t.Errorf("notes %q", x.res.Notes)
	}
	lists := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "resourcequotas" {
			lists++
		}
	}
	if watched && lists != 1 {
		t.Errorf("%d lists of ResourceQuotas with the watch up; want only the watch's own", lists)
	}
}

func testOtherQuotas(t *testing.T, quota func(corev1.ResourceName, int64, int64) *corev1.ResourceQuota, services func(int) []runtime.Object) {
	ctx := context.Background()
	clusterIP, lb := quotaTestService("b", corev1.ServiceTypeClusterIP), quotaTestService("b", corev1.ServiceTypeLoadBalancer)
	t.Run("full", func(t *testing.T) {
		x := &executor{c: &k8sops.Client{Kube: fake.NewClientset(append(services(2), quota(corev1.ResourceServices, 2, 2))...)}}
		if x.awaitQuotaRecount(ctx, quotaTestService("c", corev1.ServiceTypeClusterIP), "app/c") || len(x.res.Notes) > 0 {
			t.Errorf("waited for a quota its Services fill (notes %q)", x.res.Notes)
		}
	})
	t.Run("a count the Service does not take", func(t *testing.T) {
		x := &executor{c: &k8sops.Client{Kube: fake.NewClientset(append(services(1), quota(corev1.ResourceServicesLoadBalancers, 1, 1))...)}}
		if x.awaitQuotaRecount(ctx, clusterIP, "app/b") {
			t.Error("a ClusterIP Service waited on a services.loadbalancers quota")
		}
	})
	// A LoadBalancer Service takes a load balancer and its ports' node ports: a stale count of
	// either is waited for; one the namespace's LoadBalancer Services fill is not.
	for _, res := range []corev1.ResourceName{corev1.ResourceServicesLoadBalancers, corev1.ResourceServicesNodePorts} {
		t.Run("stale "+string(res), func(t *testing.T) {
			kube := fake.NewClientset(append(services(1), quota(res, 1, 1))...)
			x := &executor{c: &k8sops.Client{Kube: kube}}
			go func() {
				time.Sleep(50 * time.Millisecond)
				if _, err := kube.CoreV1().ResourceQuotas("app").UpdateStatus(ctx, quota(res, 1, 0), metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
			}()
			if !x.awaitQuotaRecount(ctx, lb, "app/b") {
				t.Fatalf("a stale %s count was not waited for", res)
			}
			if len(x.res.Notes) != 1 || !strings.Contains(x.res.Notes[0], "counted 1 "+quotaNoun(string(res))+" (limit 1) while app's Services used 0") {
				t.Errorf("notes %q", x.res.Notes)
			}
		})
		t.Run("full "+string(res), func(t *testing.T) {
			other := quotaTestService("a", corev1.ServiceTypeLoadBalancer)
			x := &executor{c: &k8sops.Client{Kube: fake.NewClientset(other, quota(res, 1, 1))}}
			if x.awaitQuotaRecount(ctx, lb, "app/b") {
				t.Errorf("waited for a %s quota another LoadBalancer Service fills", res)
			}
		})
	}
	t.Run("ended", func(t *testing.T) {
		x := &executor{c: &k8sops.Client{Kube: fake.NewClientset(append(services(1), quota(corev1.ResourceServices, 2, 2))...)}}
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if x.awaitQuotaRecount(cctx, clusterIP, "app/b") {
			t.Error("the wait outlived its context")
		}
	})
}

// quotaTestService is a Service of type typ in namespace app with one port.
func quotaTestService(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}}}
}

// TestReserveBridges: the room measured once is shared by the moves that keep a bridge, one
// slot each, all of a move's counts or none; a namespace without a quota has no limit.
func TestReserveBridges(t *testing.T) {
	bridge := func(ns, name string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-old"},
			Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	services := []runtime.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "b"}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "q"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("3"),
				corev1.ResourceServicesNodePorts: resource.MustParse("0")}}},
	}
	x := &executor{c: &k8sops.Client{Kube: fake.NewClientset(services...)}, oldIPBridges: map[string]*corev1.Service{
		"app/a": bridge("app", "a", corev1.ServiceTypeClusterIP), "app/b": bridge("app", "b", corev1.ServiceTypeClusterIP),
		"app/n": bridge("app", "n", corev1.ServiceTypeNodePort), "free/c": bridge("free", "c", corev1.ServiceTypeClusterIP),
	}}
	moves := []Move{{Key: "app/n"}, {Key: "app/a"}, {Key: "app/b"}, {Key: "free/c"}, {Key: "app/nobridge"}}
	if err := x.measureBridgeRoom(context.Background(), moves); err != nil {
		t.Fatal(err)
	}
	// app/n's bridge would take a node port the quota does not have: refused, and it takes
	// nothing, so that app/a still gets the one Service slot; app/b then finds none.
	for _, c := range []struct {
		key, want string
	}{
		{"app/n", "services.nodeports: hard 0, taken 0"},
		{"app/a", ""},
		{"app/b", "services: hard 3, taken 3"},
		{"free/c", ""},
		{"app/nobridge", ""},
	} {
		got := x.reserveBridges(c.key)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("reserveBridges(%s) = %q, want one with %q", c.key, got, c.want)
		}
	}
}
