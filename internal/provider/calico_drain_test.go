// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccCalicoIPPool_drainWatches: a pool's destroy waits for its pods by watching the IPAM
// blocks and the pods, not by listing them again and again: over a drain of drainFor the
// provider reads the IPAM block collection a fixed few times (a list each 2 s would be at least
// drainFor/2), and the destroy ends soon after the last pod has left. The pods then hold addresses
// of the other pool, and calicoctl finds nothing leaked.
func TestAccCalicoIPPool_drainWatches(t *testing.T) {
	const drainFor, drained, other = 12 * time.Second, "10.20.0.0/16", "10.30.0.0/16"
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	pool := poolBlock("drained", drained, "  timeouts { delete = \"3m\" }\n")
	w := newCLIWorkspace(t, e.provider()+pool)
	w.planFile()
	w.applyFile()
	e.setPool(oldPoolName, true)
	podsIn(t, e.deployment("drain-app", 6), drained)
	if err := e.c.CreateCalicoPool(ctx, e.group, "other", map[string]any{"cidr": other, "ipipMode": "Always", "natOutgoing": true}); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(t.TempDir(), "debug.log")
	w.write(e.provider())
	cmd, out := w.start([]string{"TF_LOG=DEBUG", "TF_LOG_PATH=" + logPath}, "apply", "-auto-approve")
	start := time.Now()
	applied := make(chan error, 1)
	go func() { applied <- cmd.Wait() }()
	// The pods still hold addresses in the pool: the destroy must still be waiting.
	select {
	case err := <-applied:
		t.Fatalf("the destroy returned (%v) while six pods held addresses in the pool:\n%s", err, out)
	case <-time.After(drainFor):
	}
	e.restart("drain-app")
	podsGone := time.Now()
	otherPool := netip.MustParsePrefix(other)
	_, err := e.c.WaitPods(ctx, "default", "app=drain-app", 6, func(p corev1.Pod) bool {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		return err == nil && p.Status.Phase == corev1.PodRunning && otherPool.Contains(ip)
	})
	if err != nil {
		t.Fatalf("the pods did not move to the other pool: %v (calico-ipam: %v)", err, e.ipam.Errors())
	}
	left := time.Now()
	if err := <-applied; err != nil {
		t.Fatalf("the destroy of the drained pool failed: %v\n%s", err, out)
	}
	done := time.Now()
	t.Logf("destroy: %s in all, %s after the restart, %s after every pod held an address of the other pool",
		done.Sub(start).Round(time.Millisecond), done.Sub(podsGone).Round(time.Millisecond), done.Sub(left).Round(time.Millisecond))
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, "Kubernetes API request") && strings.Contains(line, " verb=GET") &&
			strings.Contains(line, " path=/apis/crd.projectcalico.org/v1/ipamblocks ") {
			reads++
		}
	}
	// The check before the disable, the watch probe, the informer's list and its watch; a
	// restarted watch may add one.
	if reads == 0 || reads > 6 {
		t.Errorf("the destroy read the IPAM block collection %d times over a %s drain; want a fixed few (no polling)", reads, drainFor)
	}
	t.Logf("IPAM block collection reads during the destroy: %d", reads)
	if err := e.calicoctlClean(); err != nil {
		t.Error(err)
	}
}
