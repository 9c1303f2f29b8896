// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The kubeadm case on Calico's own IPAM: the installer's pool (a /24 in blocks of /28) is full,
// so new pods wait without an address. The pool stage adds a new pool and disables the old one,
// which alone gives the waiting pods addresses (Calico's retries pick the new pool); the roll
// moves every pod with an old address; the old pool's destroy drains and deletes it. calicoctl
// then finds every pod in the new pool, nothing leaked, and no block left in the old range.
func TestAccCalicoIPPool_exhaustionRealIPAM(t *testing.T) {
	const full, fresh = "10.10.0.0/24", "10.20.0.0/16"
	e := newCalicoEnvPool(t, testcluster.Calico331, k8sops.CalicoCRDV1Group, 3, full, 28)
	ctx := context.Background()
	e.deployment("apps", 250)
	late := e.deploymentNoWait("late", 10)

	// 256 addresses: 6 of the late pods get one, 4 wait, and Calico says why.
	hasIP := func(p corev1.Pod) bool { return p.Status.PodIP != "" }
	waiting := func() (int, error) {
		list, err := e.c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + late})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, p := range list.Items {
			if !hasIP(p) {
				n++
			}
		}
		return n, nil
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		n, err := waiting()
		return n == 4 && len(e.ipam.Errors()) > 0, err
	})
	if err != nil {
		n, _ := waiting()
		t.Fatalf("want 4 late pods without an address and Calico's errors for them: %d waiting, errors %v (%v)", n, e.ipam.Errors(), err)
	}
	t.Logf("Calico IPAM on the full pool: %s", e.ipam.Errors()[0])
	usage, err := e.c.CalicoctlUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := usage[full]; u.InUse != 256 || len(u.Blocks) != 16 {
		t.Fatalf("calicoctl: pool %s has %d in use in %d blocks, want 256 in 16", full, u.InUse, len(u.Blocks))
	}

	config := e.provider() + fmt.Sprintf(`
resource "k8scidr_calico_ippool" "new" {
  name         = "new"
  cidr         = %[3]q
  ipip_mode    = "Always"
  nat_outgoing = true
}

import {
  to = k8scidr_calico_ippool.old
  id = %[1]q
}

resource "k8scidr_calico_ippool" "old" {
  name            = %[1]q
  cidr            = %[2]q
  disabled        = true
  deletion_policy = "wait_for_drain"
  depends_on      = [k8scidr_calico_ippool.new]
}

data "k8scidr_workload_restarts" "pods" {
  pod_cidrs = [%[2]q]
}

resource "k8scidr_workload_roll" "pods" {
  plan       = data.k8scidr_workload_restarts.pods
  depends_on = [k8scidr_calico_ippool.old]
}
`, oldPoolName, full, fresh)
	w := newCLIWorkspace(t, config)
	w.planFile()
	if got := w.planned("k8scidr_workload_roll.pods", "plan.workloads"); fmt.Sprint(got) != "[default/deployment/apps default/deployment/late]" {
		t.Errorf("planned roll of %v, want both Deployments", got)
	}
	w.applyFile()
	w.converged()
	for app, n := range map[string]int{"apps": 250, "late": 10} {
		pods, err := e.c.WaitPodIPs(ctx, "default", "app="+app, n)
		if err != nil {
			t.Fatalf("%v (calico-ipam: %v)", err, e.ipam.Errors())
		}
		podsIn(t, pods, fresh)
	}

	// Stage 5: the old pool goes once nothing holds an address in it.
	w.write(e.provider() + fmt.Sprintf(`
resource "k8scidr_calico_ippool" "new" {
  name         = "new"
  cidr         = %q
  ipip_mode    = "Always"
  nat_outgoing = true
}
`, fresh))
	w.planFile()
	w.applyFile()
	w.converged()
	if blocks, affs := e.blocksIn(full); len(blocks)+len(affs) > 0 {
		t.Errorf("the old pool left blocks %v and affinities %v", blocks, affs)
	}
	usage, err = e.c.CalicoctlUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := usage[full]; ok || usage[fresh].InUse != 260 {
		t.Errorf("calicoctl after the migration: %+v; want only %s, with 260 in use", usage, fresh)
	}
	if err := e.calicoctlClean(); err != nil {
		t.Error(err)
	}
	for ip := range e.podIPs() {
		if !netip.MustParsePrefix(fresh).Contains(ip) {
			t.Errorf("a pod still has %s", ip)
		}
	}
}

// deploymentNoWait creates a Deployment of replicas pods labelled app=name in default.
func (e *calicoEnv) deploymentNoWait(name string, replicas int32) string {
	e.t.Helper()
	if _, err := e.c.Kube.AppsV1().Deployments("default").Create(context.Background(), testDeployment(name, replicas), metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return name
}

// podIPs yields every pod's address.
func (e *calicoEnv) podIPs() func(func(netip.Addr) bool) {
	list, err := e.c.Kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return func(yield func(netip.Addr) bool) {
		for _, p := range list.Items {
			if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil && !p.Spec.HostNetwork && !yield(ip) {
				return
			}
		}
	}
}
