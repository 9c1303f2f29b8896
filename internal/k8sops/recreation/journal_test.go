// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// TestUnrestoredJournal: of the journal's entries a plan does not restore, those that need a
// restore are named (a deleted Service, one whose hand-made Endpoints are gone) and those that
// do not are not (settled, or in a namespace that is gone or being deleted).
func TestUnrestoredJournal(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
	)
	c := &k8sops.Client{Kube: client}
	selectorless := func(key string, ips ...string) corev1.Service {
		s := rsvc(key, "ClusterIP", ips...)
		s.Spec.Selector = nil
		return s
	}
	for _, s := range []corev1.Service{rsvc("app/settled", "ClusterIP", "172.24.0.11"), selectorless("app/bare", "172.24.0.12")} {
		if _, err := client.CoreV1().Services("app").Create(ctx, &s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eps := &corev1.Endpoints{}
	j := Journal{Namespace: DefaultJournalNamespace, Group: DefaultJournalGroup}
	entries := []JournalEntry{
		{Key: "app/lost", OldIPs: []string{"100.64.0.10"}, Service: rsvc("app/lost", "ClusterIP", "172.24.0.10")},
		{Key: "app/settled", OldIPs: []string{"100.64.0.11"}, Service: rsvc("app/settled", "ClusterIP", "172.24.0.11")},
		{Key: "app/bare", OldIPs: []string{"100.64.0.12"}, Service: selectorless("app/bare", "172.24.0.12"), Endpoints: eps},
		{Key: "app/planned", OldIPs: []string{"100.64.0.13"}, Service: rsvc("app/planned", "ClusterIP", "172.24.0.13")},
		{Key: "going/web", OldIPs: []string{"100.64.0.14"}, Service: rsvc("going/web", "ClusterIP", "172.24.0.14")},
		{Key: "gone/web", OldIPs: []string{"100.64.0.15"}, Service: rsvc("gone/web", "ClusterIP", "172.24.0.15")},
	}
	if _, err := writeJournal(ctx, c, j, entries); err != nil {
		t.Fatal(err)
	}
	p := PlannedRecreation{TargetCIDRs: []string{"172.24.0.0/15"}, Restore: []Restore{{Key: "app/planned", NewIPs: []string{"172.24.0.13"}}}}
	journal, err := ReadJournal(ctx, c, j)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnrestoredJournal(ctx, c, journal, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"app/bare", "app/lost"}; !slices.Equal(got, want) {
		t.Errorf("unrestored %v, want %v", got, want)
	}
	// A plan that restores them all leaves nothing, and reads nothing.
	p.Restore = append(p.Restore, Restore{Key: "app/bare"}, Restore{Key: "app/lost"}, Restore{Key: "app/settled"},
		Restore{Key: "going/web"}, Restore{Key: "gone/web"})
	client.ClearActions()
	if got, err := UnrestoredJournal(ctx, c, journal, p); err != nil || len(got) > 0 {
		t.Errorf("with every entry planned: %v, %v", got, err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("with every entry planned it made %d requests, want none: %v", n, client.Actions())
	}
}
