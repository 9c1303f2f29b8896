// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

func crashTestConfig(kubeconfig string) string {
	return providerBlock(kubeconfig) + recreationHCL("", `  target_cidrs = ["172.24.0.0/15"]`, "  parallelism = 10")
}

// TestAccServiceRecreation_crashSafety kills terraform and the provider with SIGKILL in the
// middle of moving 240 Services, while some are deleted and not yet recreated. The next plan
// shows exactly those under restore; the next apply restores them and finishes the move: the
// same Services afterwards, equal but for their IPs, hand-made Endpoints included. Then a plan
// whose IP is taken before apply is refused without touching anything.
func TestAccServiceRecreation_crashSafety(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	client := clientFor(c)
	if _, err := servicecidr.CreateServiceCIDR(ctx, client, "new", []string{"172.24.0.0/15"}); err != nil {
		t.Fatal(err)
	}
	if _, err := servicecidr.WaitServiceCIDRReady(ctx, client, "new"); err != nil {
		t.Fatal(err)
	}
	f := fixture{t, c.Kube}
	f.namespace("crash")
	const n = 240
	for i := range n {
		s := ipService(fmt.Sprintf("s%03d", i), "ClusterIP", fmt.Sprintf("100.64.%d.%d", 1+i/200, 2+i%200))
		s.Labels = map[string]string{"tier": fmt.Sprint(i % 3)}
		if i%10 == 0 { // selector-less, with hand-made Endpoints the move must carry over
			s.Spec.Selector = nil
		}
		f.service("crash", s)
		if i%10 == 0 {
			_, err := c.Kube.CoreV1().Endpoints("crash").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: s.Name},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.9.0.%d", 1+i/10)}},
					Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	before := servicesIn(t, c.Kube, "crash")
	target := netip.MustParsePrefix("172.24.0.0/15")
	w := newCLIWorkspace(t, crashTestConfig(c.Kubeconfig))

	// Apply with every move held 300 ms between delete and create (a hand-over: between the
	// Service's turn to ExternalName and the rest); kill it once 40 moved.
	cmd := w.command([]string{"K8SCIDR_FAULT_DELAY_AFTER_DELETE=300ms"}, "apply", "-auto-approve", "-no-color")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		moved, now := 0, servicesIn(t, c.Kube, "crash")
		for _, s := range now {
			if clusterIPIn(target, &s) {
				moved++
			}
		}
		return moved >= 40 && len(interrupted(before, now)) > 0, nil // mid-batch: some deleted or mid-hand-over
	})
	if killErr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); killErr != nil {
		t.Fatal(killErr)
	}
	_ = cmd.Wait()
	if err != nil {
		t.Fatalf("the apply did not get going: %v\n%s", err, out.String())
	}
	now := servicesIn(t, c.Kube, "crash")
	missing := interrupted(before, now)
	if len(missing) == 0 {
		t.Fatalf("the kill left no Service deleted or mid-hand-over (%d exist): the test proves nothing", len(now))
	}
	t.Logf("killed with %d Services deleted and not yet recreated or mid-hand-over (ExternalName)", len(missing))

	// A selector-less Service recreated just before the kill may lack its hand-made Endpoints
	// (not yet written back, or deleted late by the endpoints controller): its move is not
	// finished either, and the plan must restore it too. Nothing writes Endpoints once the
	// provider is dead, so the set read before the plan is within what the plan sees, and the
	// set read after it contains it.
	// A Service whose hand-over left its carrier or its bridge (the kill came before the run
	// removed them) is restored too: its restore is what removes them.
	lacking := func() map[string]bool {
		out := maps.Clone(missing)
		helpers, err := c.Kube.CoreV1().Services("crash").List(ctx, metav1.ListOptions{LabelSelector: recreation.HandOverLabel})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range helpers.Items {
			if owner := h.Annotations[k8sops.BridgeForAnnotation]; owner != "" {
				out[owner] = true
			}
		}
		for key, s := range servicesIn(t, c.Kube, "crash") {
			if before[key].Spec.Selector != nil {
				continue
			}
			if _, err := c.Kube.CoreV1().Endpoints("crash").Get(ctx, s.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				out[key] = true
			} else if err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	least := lacking()
	w.planFile()
	most := lacking()
	restore, _ := w.planned(recreationAddr, "plan.restore").(map[string]any)
	for key := range least {
		if _, ok := restore[key]; !ok {
			t.Errorf("plan restore lacks %s, deleted or without its Endpoints: restore = %v", key, slices.Sorted(maps.Keys(restore)))
		}
	}
	for key := range restore {
		if !most[key] {
			t.Errorf("plan restore has %s, which exists with all it had: want %v", key, slices.Sorted(maps.Keys(most)))
		}
	}
	t.Logf("restore: %d Services deleted or mid-hand-over, %d without their Endpoints or with a helper left", len(missing), len(restore)-len(missing))
	finished := w.applyFile()
	if !strings.Contains(finished, "Restored Services From an Interrupted Apply") {
		t.Fatalf("apply after the crash:\n%s", finished)
	}
	if err := checkNothingLostIn(c.Kube, "crash", before, target); err != nil {
		// A hand-over the apply could not finish is a note of its own: say why it stopped.
		why := regexp.MustCompile(`(?s)\S+\s+could\s+not\s+be\s+finished.{0,600}`).FindAllString(finished, 3)
		t.Fatalf("after the apply that finished the interrupted one: %v\nwhat the apply said of it: %q", err, why)
	}
	// A planned IP taken between plan and apply: the saved plan still applies; that move is
	// not made but reported, and the next plan moves it to a free IP.
	late := f.service("crash", ipService("late", "ClusterIP", "100.64.30.30"))
	w.planFile()
	newIP := plannedMove(t, w, "crash/late").NewIPs[0]
	if newIP != "172.24.30.30" {
		t.Fatalf("late planned to %s, want 172.24.30.30", newIP)
	}
	f.service("crash", ipService("squatter", "ClusterIP", newIP))
	if out := w.applyFile(); !diagRE("Planned Moves That No Longer Hold Were Not Made", "crash/late: its planned IP 172.24.30.30 is taken now").MatchString(out) {
		t.Errorf("apply of a plan whose IP was taken:\n%s", out)
	}
	if s := servicesIn(t, c.Kube, "crash")["crash/late"]; s.UID != late.UID {
		t.Error("the apply touched crash/late, whose planned IP was taken")
	}
	w.planFile()
	if ip := plannedMove(t, w, "crash/late").NewIPs[0]; ip != "172.24.30.31" {
		t.Errorf("the next plan moves crash/late to %s, want the next free 172.24.30.31", ip)
	}
	w.applyFile()
	w.converged()
}

// interrupted are the Services of before that a killed apply left mid-move: deleted and not
// yet created again, or mid-hand-over (ExternalName, which none of them was).
func interrupted(before, now map[string]corev1.Service) map[string]bool {
	out := map[string]bool{}
	for key := range before {
		if s, ok := now[key]; !ok || s.Spec.Type == corev1.ServiceTypeExternalName {
			out[key] = true
		}
	}
	return out
}
