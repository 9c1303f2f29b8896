// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// TestStartWatches: the early watches hand a run the EndpointSlices and guards they hold; and
// Stop returns at once even when the EndpointSlices can never be listed (an apply that ends
// before its run must not wait for them), the run then failing on its own context.
func TestStartWatches(t *testing.T) {
	ctx := context.Background()
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-abc",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
	c := &k8sops.Client{Kube: fake.NewClientset(slice)}
	w := StartWatches(ctx, c, testLog(t))
	x := &executor{c: c, o: ExecOptions{Watches: w}}
	stop, err := x.startWatches(ctx, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop() // the caller's watches: not the run's to stop
	if got := x.watchedSlices("app/web"); len(got) != 1 || got[0].Name != "web-abc" {
		t.Fatalf("slices of app/web from the early watch: %v, want web-abc", got)
	}
	if x.guards.watched() == nil {
		t.Fatal("the run does not follow the early guard watches")
	}
	w.Stop()

	refused := fake.NewClientset()
	refused.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", nil)
	})
	c = &k8sops.Client{Kube: refused}
	w = StartWatches(ctx, c, testLog(t))
	runCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	x = &executor{c: c, o: ExecOptions{Watches: w}}
	if _, err := x.startWatches(runCtx, true, false, nil); err == nil {
		t.Fatal("a run on EndpointSlices that cannot be listed started")
	}
	start := time.Now()
	w.Stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Stop took %s on a watch that cannot sync", d)
	}
}

// TestWatchEndpoints_seeded: the run's Endpoints watch starts from the snapshot's list without
// listing again, and follows changes from there.
func TestWatchEndpoints_seeded(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	x := &executor{c: &k8sops.Client{Kube: kube}, services: map[string]*corev1.Service{}}
	seed := &corev1.EndpointsList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Endpoints{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", ResourceVersion: "40"},
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}}}}}}
	t.Cleanup(x.watchEndpoints(ctx, seed))
	if x.endpointsWatch == nil {
		t.Fatal("the watch did not start")
	}
	if ep, watched := x.watchedEndpoints("app/db"); !watched || ep == nil || ep.Subsets[0].Addresses[0].IP != "10.0.0.9" {
		t.Fatalf("app/db from the seed: %v (watched %v), want 10.0.0.9", ep, watched)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "list" {
			t.Fatalf("listed %s again: want the seed only", a.GetResource().Resource)
		}
	}
	made := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "cache"}}
	if _, err := kube.CoreV1().Endpoints("app").Create(ctx, made, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		ep, _ := x.watchedEndpoints("app/cache")
		return ep != nil, nil
	}); err != nil {
		t.Fatal("an Endpoints made after the seed never reached the watch")
	}
}
