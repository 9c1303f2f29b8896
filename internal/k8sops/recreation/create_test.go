// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestFreeTakenNodePorts: the allocator's refusals of node ports in use, as kube-apiserver words
// them, clear exactly the ports they name, and each is noted; other refusals clear nothing.
func TestFreeTakenNodePorts(t *testing.T) {
	svc := func() *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, HealthCheckNodePort: 31000,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "https", Port: 443, NodePort: 30443}}}}
	}
	taken := func(i int, port int32) *field.Error {
		return field.Invalid(field.NewPath("spec", "ports").Index(i).Child("nodePort"), port, "provided port is already allocated")
	}
	invalid := func(errs ...*field.Error) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web", errs)
	}
	for _, tc := range []struct {
		name      string
		err       error
		ports     [2]int32
		health    int32
		cleared   bool
		noteNames []string
	}{
		{"the second port taken", invalid(taken(1, 30443)), [2]int32{30080, 0}, 31000, true, []string{"nodePort 30443 (port \"https\")"}},
		{"both taken", invalid(taken(0, 30080), taken(1, 30443)), [2]int32{0, 0}, 31000, true, []string{"nodePort 30080", "nodePort 30443"}},
		{"the health check port taken", apierrors.NewInternalError(errors.New("failed to allocate requested HealthCheck NodePort 31000: provided port is already allocated")),
			[2]int32{30080, 30443}, 0, true, []string{"healthCheckNodePort 31000"}},
		{"a port it does not have", invalid(taken(0, 30099)), [2]int32{30080, 30443}, 31000, false, nil},
		{"another field refused", invalid(field.Invalid(field.NewPath("spec", "clusterIPs"), "172.24.0.10", "failed to allocate IP 172.24.0.10: provided IP is already allocated")),
			[2]int32{30080, 30443}, 31000, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, s := &executor{}, svc()
			if got := x.freeTakenNodePorts(tc.err, s, "app/web"); got != tc.cleared {
				t.Errorf("cleared = %v, want %v", got, tc.cleared)
			}
			if got := [2]int32{s.Spec.Ports[0].NodePort, s.Spec.Ports[1].NodePort}; got != tc.ports || s.Spec.HealthCheckNodePort != tc.health {
				t.Errorf("ports %v, health check %d; want %v, %d", got, s.Spec.HealthCheckNodePort, tc.ports, tc.health)
			}
			if len(x.res.Notes) != len(tc.noteNames) {
				t.Fatalf("notes %q, want %d", x.res.Notes, len(tc.noteNames))
			}
			for i, n := range tc.noteNames {
				if !strings.Contains(x.res.Notes[i], n) || !strings.Contains(x.res.Notes[i], "app/web") {
					t.Errorf("note %q does not name %q", x.res.Notes[i], n)
				}
			}
		})
	}
}
