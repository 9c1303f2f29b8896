// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestKeepEndpoints: of the list of every Endpoints, the snapshot keeps the hand-made ones
// (Services without a selector) whole; an apply's seed for the run's Endpoints watch keeps every
// Endpoints, the endpoints controller's (Services with a selector) as their name alone and any
// other whole, as the watch's own transform would; a plan keeps no seed.
func TestKeepEndpoints(t *testing.T) {
	svc := func(name string, selector map[string]string, typ corev1.ServiceType) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.ServiceSpec{Selector: selector, Type: typ}}
	}
	ep := func(name string) corev1.Endpoints {
		return corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "someone"}}},
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}}}}
	}
	services := []corev1.Service{
		svc("web", map[string]string{"app": "web"}, corev1.ServiceTypeClusterIP),
		svc("db", nil, corev1.ServiceTypeClusterIP),
		svc("no-endpoints", nil, corev1.ServiceTypeClusterIP),
		svc("ext", nil, corev1.ServiceTypeExternalName),
	}
	list := func() *corev1.EndpointsList {
		return &corev1.EndpointsList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Endpoints{ep("web"), ep("db"), ep("orphan")}}
	}

	plan := Snapshot{Services: services}
	plan.keepEndpoints(list(), false)
	if len(plan.Endpoints) != 1 || len(plan.Endpoints["app/db"].Subsets) != 1 || plan.Endpoints["app/db"].ManagedFields == nil {
		t.Fatalf("plan: Endpoints %v, want app/db alone, whole", plan.Endpoints)
	}
	if plan.endpointsSeed != nil {
		t.Fatal("plan: a seed kept, want none (no run watches)")
	}

	apply := Snapshot{Services: services}
	apply.keepEndpoints(list(), true)
	if len(apply.Endpoints) != 1 || len(apply.Endpoints["app/db"].Subsets) != 1 {
		t.Fatalf("apply: Endpoints %v, want app/db alone, whole", apply.Endpoints)
	}
	seed := apply.endpointsSeed
	if seed == nil || seed.ResourceVersion != "42" || len(seed.Items) != 3 {
		t.Fatalf("apply: seed %+v, want the 3 Endpoints at the list's resourceVersion 42", seed)
	}
	for _, e := range seed.Items {
		whole := len(e.Subsets) == 1 && e.ManagedFields != nil
		if want := e.Name != "web"; whole != want || e.ResourceVersion != "7" || e.UID == "" {
			t.Errorf("seed %s: whole %v (want %v), resourceVersion %q, uid %q: the controller's kept as name, uid and version alone",
				e.Name, whole, want, e.ResourceVersion, e.UID)
		}
	}
}
