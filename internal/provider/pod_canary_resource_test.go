// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// canaryPods are the canary pods in namespace default.
func canaryPods(t *testing.T, e *calicoEnv) []string {
	t.Helper()
	list, err := e.c.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: k8sops.CanaryLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	return out
}

// TestAccPodCanary runs the canary on Calico's own IPAM. While the installer's pool is the only
// enabled one, the canary's address comes from it: the apply fails on expect_cidrs naming the
// address and the node (a roll now would move no pod), and leaves no pod. With the new pool
// created and the old one disabled, the canary gets an address in the new pool, recorded in
// pod_ips, and is deleted; a canary pod an interrupted run left is deleted by the next run,
// another canary's (another owner label) is not. A
// changed trigger runs the check again.
func TestAccPodCanary(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	const newCIDR = "10.20.0.0/16"
	canary := func(trigger, extra string) string {
		return fmt.Sprintf(`
resource "k8scidr_pod_canary" "new_pool" {
  expect_cidrs = [%q]
  image        = "c:1"
  triggers     = { run = %q }
%s}
`, newCIDR, trigger, extra)
	}
	w := newCLIWorkspace(t, e.provider()+canary("1", ""))
	out, err := w.run("apply", "-auto-approve")
	if err == nil || !diagRE("Canary Pod Outside the Expected Ranges", "on node kwok-", "got 10.10.", "outside 10.20.0.0/16").MatchString(out) {
		t.Fatalf("the canary with only the old pool enabled: apply %v\n%s", err, out)
	}
	if left := canaryPods(t, e); len(left) > 0 {
		t.Errorf("canary pods left after the failed check: %v", left)
	}

	// A canary pod a killed run left behind.
	leftover := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "k8scidr-canary-old", Labels: map[string]string{k8sops.CanaryLabel: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "canary", Image: "c:1"}}}}
	if _, err := e.c.Kube.CoreV1().Pods("default").Create(context.Background(), leftover, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// And another canary's, running beside this one (for_each over nodes): not this one's to delete.
	other := leftover.DeepCopy()
	other.Name, other.Labels[k8sops.CanaryOwnerLabel] = "k8scidr-canary-other", "another-canary"
	if other, err = e.c.Kube.CoreV1().Pods("default").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pools := fmt.Sprintf(`
resource "k8scidr_calico_ippool" "new" {
  name         = "new"
  cidr         = %q
  ipip_mode    = "Always"
  nat_outgoing = true
}

import {
  to = k8scidr_calico_ippool.old
  id = %q
}

resource "k8scidr_calico_ippool" "old" {
  name     = %q
  cidr     = %q
  disabled = true

  depends_on = [k8scidr_calico_ippool.new]
}
`, newCIDR, oldPoolName, oldPoolName, oldPoolCIDR)
	withPools := func(trigger string) string {
		return e.provider() + pools + canary(trigger, "  depends_on = [k8scidr_calico_ippool.old]\n")
	}
	w.write(withPools("1"))
	w.planFile()
	w.applyFile()
	if p, err := e.c.Kube.CoreV1().Pods("default").Get(context.Background(), other.Name, metav1.GetOptions{}); err != nil || p.UID != other.UID {
		t.Errorf("another canary's pod was deleted: %v", err)
	}
	if err := e.c.Kube.CoreV1().Pods("default").Delete(context.Background(), other.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.c.Kube.CoreV1().Pods("default").Get(ctx, other.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	check := func() string {
		t.Helper()
		ips, _ := w.stateValue("k8scidr_pod_canary.new_pool", "pod_ips").([]any)
		if len(ips) != 1 || !netip.MustParsePrefix(newCIDR).Contains(netip.MustParseAddr(fmt.Sprint(ips[0]))) {
			t.Errorf("the canary's pod_ips %v, want one address in %s", ips, newCIDR)
		}
		if node, _ := w.stateValue("k8scidr_pod_canary.new_pool", "node").(string); !strings.HasPrefix(node, "kwok-") {
			t.Errorf("the canary ran on node %q", node)
		}
		if left := canaryPods(t, e); len(left) > 0 {
			t.Errorf("canary pods left after the check: %v", left)
		}
		id, _ := w.stateValue("k8scidr_pod_canary.new_pool", "id").(string)
		return id
	}
	first := check()
	w.converged()

	w.write(withPools("2"))
	w.planFile()
	if got := w.plannedActions("k8scidr_pod_canary.new_pool"); fmt.Sprint(got) != "[delete create]" {
		t.Errorf("a changed trigger plans %v, want the canary replaced", got)
	}
	w.applyFile()
	if again := check(); again == first {
		t.Errorf("the trigger's change did not run a new canary (still %s)", first)
	}
	if errs := e.ipam.Errors(); len(errs) > 0 {
		t.Errorf("Calico's IPAM: %v", errs)
	}
}
