// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// An escort serves the old and the new IPs as external IPs, on a ClusterIP of its own beside the
// new one that no move of the apply takes, labelled as a carrier of the journal group; there is
// none without the hand-over or for a Service with external IPs of its own.
func TestEscortOf(t *testing.T) {
	x := &executor{o: ExecOptions{Journal: Journal{Namespace: "k8scidr", Group: "g"}},
		targets: []netip.Prefix{netip.MustParsePrefix("172.24.0.0/24")},
		planned: map[netip.Addr]bool{netip.MustParseAddr("172.24.0.5"): true, netip.MustParseAddr("172.24.0.6"): true}}
	svc := rsvc("app/web", "NodePort", "100.64.1.5")
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}
	e := JournalEntry{Key: "app/web", OldIPs: []string{"100.64.1.5"}, Service: *movedCopy(&svc, []string{"172.24.0.5"})}
	esc := x.escortOf(&svc, e)
	if esc == nil {
		t.Fatal("no escort for a NodePort Service's move")
	}
	if !slicesEqual(esc.Spec.ClusterIPs, []string{"172.24.0.7"}) || esc.Spec.ClusterIP != "172.24.0.7" {
		t.Errorf("escort's ClusterIPs %v, want 172.24.0.7 (the next address no move takes)", esc.Spec.ClusterIPs)
	}
	if !slicesEqual(esc.Spec.ExternalIPs, []string{"100.64.1.5", "172.24.0.5"}) {
		t.Errorf("escort's external IPs %v, want the old and the new IP", esc.Spec.ExternalIPs)
	}
	if esc.Spec.Type != "ClusterIP" || esc.Labels[HandOverLabel] != "carrier" || esc.Labels[JournalGroupLabel] != "g" {
		t.Errorf("escort type %s, labels %v", esc.Spec.Type, esc.Labels)
	}
	if len(esc.Spec.Ports) != 1 || esc.Spec.Ports[0].Port != 80 || esc.Spec.Ports[0].NodePort != 0 {
		t.Errorf("escort ports %v, want the Service's port without its node port", esc.Spec.Ports)
	}
	// Another Service's move, whose new IP is the next of the block: its escort gets an address
	// of its own too, not the first one's.
	svc2 := rsvc("app/api", "NodePort", "100.64.1.6")
	e2 := JournalEntry{Key: "app/api", OldIPs: []string{"100.64.1.6"}, Service: *movedCopy(&svc2, []string{"172.24.0.6"})}
	if esc2 := x.escortOf(&svc2, e2); esc2 == nil || !slicesEqual(esc2.Spec.ClusterIPs, []string{"172.24.0.8"}) {
		t.Errorf("the second escort's ClusterIPs %v, want 172.24.0.8 (.7 is the first escort's)", esc2)
	}
	withOwn := svc.DeepCopy()
	withOwn.Spec.ExternalIPs = []string{"192.0.2.7"}
	if x.escortOf(withOwn, e) != nil {
		t.Error("an escort for a Service with external IPs of its own")
	}
	x.o.HandOver.Off = true
	if x.escortOf(&svc, e) != nil {
		t.Error("an escort with hand_over = false")
	}
}
