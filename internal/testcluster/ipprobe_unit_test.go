// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestServesService: a slice serves the Service object that owns it (or, mirrored, none does),
// never the object a move replaced nor a Service of the same name in another namespace.
func TestServesService(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "new"}}
	slice := func(ns string, owner metav1.OwnerReference) *discoveryv1.EndpointSlice {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
		if owner.Kind != "" {
			es.OwnerReferences = []metav1.OwnerReference{owner}
		}
		return es
	}
	for _, c := range []struct {
		name  string
		es    *discoveryv1.EndpointSlice
		serve bool
	}{
		{"owned by the Service", slice("app", metav1.OwnerReference{Kind: "Service", Name: "web", UID: "new"}), true},
		{"left by the object a move replaced", slice("app", metav1.OwnerReference{Kind: "Service", Name: "web", UID: "old"}), false},
		{"mirrored from Endpoints", slice("app", metav1.OwnerReference{Kind: "Endpoints", Name: "web", UID: "ep"}), true},
		{"another namespace", slice("other", metav1.OwnerReference{Kind: "Service", Name: "web", UID: "new"}), false},
	} {
		if got := servesService(c.es, svc); got != c.serve {
			t.Errorf("%s: serves %t, want %t", c.name, got, c.serve)
		}
	}
}
