// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
)

// TestAccServiceRecreation_wayBack is stage 1 and its way back. Services at IPs whose offsets a
// /15 cannot hold (100.66.0.20, 100.70.3.4, 100.65.255.9) move into 172.24.0.0/15 with the DNS
// bridge and old_ip_bridges = "all", then back with ip_assignment = "previous": the plan shows
// each Service on the IP it had (preserve_offset would put app/far on 100.64.0.20); after the
// apply each is there with its spec and endpoints (a selector-less Service's hand-made Endpoints
// included), kube-dns has 100.64.0.10 back from its bridge, the bridges that held the old IPs
// are gone and new ones keep the 172.24 IPs, so clients of either side keep working. An
// independent watcher sees every IP of both sides served after the apply, each gone at most once.
func TestAccServiceRecreation_wayBack(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := targetCluster(t)
	f := dnsAndWeb(t, c)
	ctx := context.Background()
	web := map[string]string{"app": "web"}
	for _, s := range []struct{ name, typ, ip string }{
		{"far", "ClusterIP", "100.66.0.20"}, {"np", "NodePort", "100.70.3.4"}, {"bare", "ClusterIP", "100.65.255.9"},
		{"near", "ClusterIP", "100.64.5.5"},
	} {
		svc := ipService(s.name, s.typ, s.ip)
		svc.Spec.Selector = web
		if s.name == "bare" {
			svc.Spec.Selector = nil
		}
		f.service("app", svc)
	}
	_, err := c.Kube.CoreV1().Endpoints("app").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "bare"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.9.0.7"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"far", "np", "bare", "near"} {
		f.waitReadySlice("app", name)
	}
	before := servicesIn(t, c.Kube, "app")
	dnsBefore := servicesIn(t, c.Kube, "kube-system")["kube-system/kube-dns"]
	original := map[string][]string{"kube-system/kube-dns": {"100.64.0.10"}}
	for k, s := range before {
		original[k] = s.Spec.ClusterIPs
	}

	w := newCLIWorkspace(t, moveTo(c, faultTarget, "", `  old_ip_bridges = "all"`))
	w.planFile()
	w.applyFile()
	there := map[string][]string{}
	for k, s := range servicesIn(t, c.Kube, "") {
		if _, ok := original[k]; ok {
			there[k] = s.Spec.ClusterIPs
			if !clusterIPIn(faultTarget, &s) {
				t.Fatalf("%s not moved into %s: %v", k, faultTarget, s.Spec.ClusterIPs)
			}
		}
	}

	// The way back. The old range never went away: 100.64.0.0/13 is still the default ServiceCIDR.
	w.write(moveTo(c, netip.MustParsePrefix("100.64.0.0/13"), `  ip_assignment = "previous"`, `  old_ip_bridges = "all"`))
	out := w.planFile()
	moves, _ := w.planned(recreationAddr, "plan.moves").(map[string]any)
	for k, ips := range original {
		s, _ := moves[k].(string)
		if m, err := movetext.Parse(s); err != nil || !slices.Equal(m.NewIPs, ips) {
			t.Errorf("the plan moves %s back to %v (%q, %v), want %v", k, m.NewIPs, s, err, ips)
		}
	}
	if len(moves) != len(original) {
		t.Errorf("the plan has %d moves, want %d:\n%s", len(moves), len(original), out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "The Way Back") ||
		!slices.ContainsFunc(w.planDiagnostics(), func(d planDiagnostic) bool {
			return strings.Contains(d.Detail, "kube-system/kube-dns on 100.64.0.10 (bridge kube-system/kube-dns-legacy)")
		}) {
		t.Errorf("the plan does not say kube-dns takes its IP back from its bridge:\n%s", out)
	}
	var watched []string
	for k, ips := range original {
		if strings.HasPrefix(k, "app/") {
			watched = append(watched, ips...)
			watched = append(watched, there[k]...)
		}
	}
	watch := watchIPs(t, c.Kube, "app", watched)
	w.applyFile()

	now := servicesIn(t, c.Kube, "")
	for k, ips := range original {
		if got := now[k].Spec.ClusterIPs; !slices.Equal(got, ips) {
			t.Errorf("%s is on %v after the way back, want %v", k, got, ips)
		}
	}
	for k, s := range before {
		if !reflect.DeepEqual(specWithoutIPs(s), specWithoutIPs(now[k])) {
			t.Errorf("%s changed beyond its IPs:\n%+v\n%+v", k, specWithoutIPs(s), specWithoutIPs(now[k]))
		}
	}
	if !reflect.DeepEqual(specWithoutIPs(dnsBefore), specWithoutIPs(now["kube-system/kube-dns"])) {
		t.Errorf("kube-dns changed beyond its IPs")
	}
	if ep, err := c.Kube.CoreV1().Endpoints("app").Get(ctx, "bare", metav1.GetOptions{}); err != nil || ep.Subsets[0].Addresses[0].IP != "10.9.0.7" {
		t.Errorf("app/bare's hand-made Endpoints after the way back: %v (%v)", ep, err)
	}
	bridges := dnsBridgesByIP(t, c.Kube)
	if _, ok := bridges["172.24.0.10"]; !ok || len(bridges) != 1 {
		t.Errorf("DNS bridges on %v; want one, on 172.24.0.10 (the one on 100.64.0.10 goes: kube-dns holds it again)", slices.Sorted(maps.Keys(bridges)))
	}
	for k := range before {
		got := oldIPBridgesFor(t, c.Kube, k)
		if _, ok := got[strings.Join(there[k], ",")]; !ok || len(got) != 1 {
			t.Errorf("%s's old-IP bridges are on %v; want one, on %v", k, slices.Sorted(maps.Keys(got)), there[k])
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, _, down := watch.worst()
		return len(down) == 0, nil
	})
	most, at, down := watch.worst()
	t.Logf("the longest any IP of either side went unserved: %s (%s)", most.Round(time.Millisecond), at)
	if err != nil {
		t.Errorf("IPs unserved after the way back: %v", down)
	}
	watch.atMostOneGap(t, "the way back leaves one gap per IP")
	if n := journalObjects(t, c); n > 0 {
		t.Errorf("%d journal ConfigMaps left behind", n)
	}
	w.converged()
}
