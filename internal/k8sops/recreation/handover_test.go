// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// A Service goes to ExternalName without the fields only a ClusterIP Service may have, and
// back with the journaled ones at its new IPs; its own labels and annotations stay.
func TestExternalNameAndBack(t *testing.T) {
	svc := rsvc("app/web", "ClusterIP", "100.64.1.5")
	svc.Labels = map[string]string{"team": "a"}
	svc.Annotations = map[string]string{"note": "x"}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	journaled := movedCopy(&svc, []string{"172.24.1.5"})

	en := externalNameOf(&svc, "web-new-x.app.svc.cluster.local", journaled.Spec.ClusterIPs)
	switch {
	case en.Spec.Type != corev1.ServiceTypeExternalName || en.Spec.ExternalName != "web-new-x.app.svc.cluster.local":
		t.Errorf("type %s for %q", en.Spec.Type, en.Spec.ExternalName)
	case en.Spec.ClusterIP != "" || en.Spec.ClusterIPs != nil || en.Spec.IPFamilies != nil || en.Spec.IPFamilyPolicy != nil ||
		en.Spec.InternalTrafficPolicy != nil || en.Spec.SessionAffinity != corev1.ServiceAffinityNone || en.Spec.SessionAffinityConfig != nil:
		t.Errorf("ExternalName form keeps ClusterIP fields: %+v", en.Spec)
	case !handingOver(en) || en.Annotations[handOverToAnnotation] != "172.24.1.5":
		t.Errorf("not marked as mid-hand-over to 172.24.1.5: %v", en.Annotations)
	case svc.Spec.Type != corev1.ServiceTypeClusterIP || handingOver(&svc):
		t.Error("externalNameOf changed the Service it was given")
	}

	back := en.DeepCopy()
	takeBack(back, journaled)
	want := svc.DeepCopy()
	want.Spec.ClusterIP, want.Spec.ClusterIPs = "172.24.1.5", []string{"172.24.1.5"}
	want.Annotations[k8sops.PreviousClusterIPsAnnotation] = "100.64.1.5"
	if !equality.Semantic.DeepEqual(back.Spec, want.Spec) {
		t.Errorf("taken back:\n%+v\nwant\n%+v", back.Spec, want.Spec)
	}
	if !equality.Semantic.DeepEqual(back.Annotations, want.Annotations) || !equality.Semantic.DeepEqual(back.Labels, want.Labels) {
		t.Errorf("labels %v annotations %v, want %v %v", back.Labels, back.Annotations, want.Labels, want.Annotations)
	}
	if handingOver(back) {
		t.Error("still marked as mid-hand-over")
	}
}

// A hand-over goes on from the step the Service's state shows: a cut-off apply's is resumed
// there, and one whose ExternalName names neither helper is not resumed at all.
func TestNewHandOverStep(t *testing.T) {
	x := &executor{o: ExecOptions{HandOver: HandOverOptions{ClusterDomain: "cluster.local"}, Journal: Journal{Namespace: "k8scidr", Group: "g"}}}
	svc := rsvc("app/web", "ClusterIP", "100.64.1.5")
	e := JournalEntry{Key: "app/web", OldIPs: []string{"100.64.1.5"}, Service: *movedCopy(&svc, []string{"172.24.1.5"})}
	h := x.newHandOver(e, &svc)
	carrier, bridge := x.fqdn(h.carrier), x.fqdn(h.bridge)
	if h.kind != bridgeTransient || h.bridge.Labels[HandOverLabel] != "bridge" || h.carrier.Labels[HandOverLabel] != "carrier" {
		t.Errorf("kind %d, labels %v %v", h.kind, h.bridge.Labels, h.carrier.Labels)
	}
	if !slicesEqual(h.carrier.Spec.ClusterIPs, []string{"172.24.1.5"}) || !slicesEqual(h.carrier.Spec.ExternalIPs, []string{"100.64.1.5"}) ||
		!slicesEqual(h.bridge.Spec.ClusterIPs, []string{"100.64.1.5"}) {
		t.Errorf("carrier %v+%v, bridge %v", h.carrier.Spec.ClusterIPs, h.carrier.Spec.ExternalIPs, h.bridge.Spec.ClusterIPs)
	}
	if !strings.HasSuffix(carrier, ".app.svc.cluster.local") || carrier == bridge {
		t.Errorf("carrier %s, bridge %s", carrier, bridge)
	}
	took := svc.DeepCopy()
	takeBack(took, &e.Service)
	cases := map[string]struct {
		svc  *corev1.Service
		step string
	}{
		"not started":        {&svc, "carry"},
		"released":           {externalNameOf(&svc, carrier, e.Service.Spec.ClusterIPs), "bridge"},
		"repointed":          {externalNameOf(&svc, bridge, e.Service.Spec.ClusterIPs), "drop carrier"},
		"took its IPs":       {took, "settle"},
		"ExternalName other": {externalNameOf(&svc, "elsewhere.example.com", e.Service.Spec.ClusterIPs), "carry"},
	}
	for name, c := range cases {
		if got := x.newHandOver(e, c.svc).next; handOverSteps[got].name != c.step {
			t.Errorf("%s: goes on at %q, want %q", name, handOverSteps[got].name, c.step)
		}
	}
	// The DNS Service's bridge is the DNS bridge.
	x.dnsKey, x.bridge = "app/web", bridgeService(&svc, "kube-dns-legacy", []string{"100.64.1.5"})
	if h := x.newHandOver(e, &svc); h.kind != bridgeDNS || h.bridge.Name != "kube-dns-legacy" {
		t.Errorf("DNS Service's bridge: kind %d %s", h.kind, h.bridge.Name)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// A Service mid-hand-over is not moved again: the restore of its journal entry finishes it, at
// the journaled IPs; the hand-over's helpers are never moved.
func TestPlanMidHandOver(t *testing.T) {
	svc := rsvc("app/web", "ClusterIP", "100.64.1.5")
	e := JournalEntry{Key: "app/web", Object: "j1", OldIPs: []string{"100.64.1.5"}, Service: *movedCopy(&svc, []string{"172.24.1.5"})}
	mid := externalNameOf(&svc, "web-new-x.app.svc.cluster.local", e.Service.Spec.ClusterIPs)
	carrier := rsvc("app/web-new-x", "ClusterIP", "172.24.1.5")
	carrier.Labels = map[string]string{HandOverLabel: "carrier"}
	carrier.Spec.ExternalIPs = []string{"100.64.1.5"}
	bridge := rsvc("app/web-was-x", "ClusterIP", "100.64.1.5")
	bridge.Labels = map[string]string{HandOverLabel: "bridge"}
	snap := Snapshot{Services: []corev1.Service{*mid, carrier, bridge}, Journal: []JournalEntry{e},
		Ranges: []k8sops.ServiceCIDR{readyRange("old", "100.64.0.0/16"), readyRange("new", "172.24.0.0/15")}}
	p := PlanRecreation(snap, defaultOpts())
	if len(p.Errors) > 0 {
		t.Fatalf("plan errors: %+v", p.Errors)
	}
	if len(p.Moves) != 0 {
		t.Errorf("moves %+v: want none", p.Moves)
	}
	if len(p.Restore) != 1 || p.Restore[0].Key != "app/web" || !slicesEqual(p.Restore[0].NewIPs, []string{"172.24.1.5"}) {
		t.Errorf("restore %+v: want app/web at 172.24.1.5", p.Restore)
	}
	for _, key := range []string{"app/web", "app/web-new-x", "app/web-was-x"} {
		if p.Skipped[key] == "" {
			t.Errorf("%s not skipped with a reason: %v", key, p.Skipped)
		}
	}
}

// In a namespace with a services quota, hand-overs take only the room the moves in flight and
// the restores left to after the moves do not hold (found by TestAccKill_underQuota: hand-overs
// took the room a stale quota's recount freed, and the restores after the moves found none).
func TestHandOverRoom(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name             string
		hard, used, held int64
		want             int
	}{
		{"no quota room beside the moves", 10, 7, 0, 0},
		{"room for one beside the moves", 10, 6, 0, 1},
		{"room held by restores", 10, 3, 3, 1},
		{"room for all", 10, 1, 0, 3},
		{"a roomy quota", 1000, 1, 0, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "q"},
				Status: corev1.ResourceQuotaStatus{
					Hard: corev1.ResourceList{corev1.ResourceServices: *resource.NewQuantity(c.hard, resource.DecimalSI)},
					Used: corev1.ResourceList{corev1.ResourceServices: *resource.NewQuantity(c.used, resource.DecimalSI)}}}
			x := &executor{c: &k8sops.Client{Kube: fake.NewClientset(q)}, services: map[string]*corev1.Service{},
				ranges: []k8sops.ServiceCIDR{readyRange("old", "100.64.0.0/16")},
				o:      ExecOptions{HandOver: HandOverOptions{ClusterDomain: "cluster.local"}}}
			x.holdQuota(map[string]int{"app": int(c.held), "other": 5}, 1)
			var entries []JournalEntry
			for i := range 3 {
				key, ip := fmt.Sprintf("app/s%d", i), fmt.Sprintf("100.64.1.%d", i+1)
				svc := rsvc(key, "ClusterIP", ip)
				x.services[key] = &svc
				entries = append(entries, JournalEntry{Key: key, OldIPs: []string{ip}, Service: *movedCopy(&svc, []string{fmt.Sprintf("172.24.1.%d", i+1)})})
			}
			hs, release, err := x.handOvers(ctx, entries)
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != c.want {
				t.Errorf("%d hand-overs, want %d", len(hs), c.want)
			}
			// The chunk holds one per move and one more per hand-over until it is done.
			if got, want := x.heldQuota()["app"], int(c.held)+3+c.want; got != want {
				t.Errorf("held %d while the chunk runs, want %d", got, want)
			}
			release()
			if got := x.heldQuota(); got["app"] != int(c.held) || got["other"] != 5 {
				t.Errorf("held %v after the chunk, want app %d, other 5", got, c.held)
			}
		})
	}
}
