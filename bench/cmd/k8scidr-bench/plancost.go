// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// planCost is scenario 2: `terraform plan` of a recreation and a roll over the sizes in
// o.planSizes. The sizes run in sequence, each state growing from the last (building 20k pods
// twice would dominate the run), with o.rounds plans at each size.
func (b *bench) planCost(ctx context.Context) error {
	// Leftovers of the other scenarios hold pods and IPs: start from a clean cluster.
	if err := waitNamespacesGone(ctx, b.kube); err != nil {
		return err
	}
	// Pods come from kube-controller-manager: give it room so building 20k takes minutes.
	if err := b.c.RestartControllerManager(ctx, "--kube-api-qps=1000", "--kube-api-burst=2000"); err != nil {
		return err
	}
	if err := oldRange(ctx, b.kube, "bench-plan-old", old); err != nil {
		return err
	}
	var nss []string
	// The next scenario waits for every bench namespace to go: left behind, these would hold
	// it for its 30-minute limit and fail it.
	defer func() { deleteNamespaces(context.WithoutCancel(ctx), b.kube, nss) }()
	haveSvc, havePods := 0, 0
	for _, size := range b.o.planSizes {
		svcs, pods := size[0], size[1]
		logf("2. plan cost: building %d Services and %d pods", svcs, pods)
		for haveSvc < svcs {
			// Blocks of 1000 Services (10 namespaces of 100), plain ClusterIP.
			more, _, err := serviceSet(ctx, b.kube, fmt.Sprintf("p%d", haveSvc), min(1000, svcs-haveSvc),
				netip.MustParsePrefix(old), 60000+haveSvc)
			if err != nil {
				return err
			}
			nss = append(nss, more...)
			haveSvc += min(1000, svcs-haveSvc)
		}
		// The Services' one-replica Deployments count; the rest are 20-replica Deployments.
		ns := fmt.Sprintf("pods%d", pods)
		if err := createNamespace(ctx, b.kube, ns); err != nil {
			return err
		}
		nss = append(nss, ns)
		want := pods - svcs/20
		err := parallel((want-havePods+19)/20, 20, func(i int) error {
			_, err := b.kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, fmt.Sprintf("big%04d", i), 20), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		havePods = want
		if err := b.waitPodsRunning(ctx, pods); err != nil {
			return err
		}
		scenario := "2. plan (recreation + roll)"
		who := fmt.Sprintf("%d Services, %d pods", svcs, pods)
		for round := range b.o.rounds {
			logf("%s, %s, round %d", scenario, who, round+1)
			w, err := newWorkspace(b.bin, b.self, b.kubeconfig, fmt.Sprintf(planConfig, target, quoted(nss), quoted(nss)))
			if err != nil {
				return err
			}
			before := b.proxy.requests.Load()
			var m measure
			m.wall, m.rss, err = w.run("plan", "-input=false", "-no-color", "-lock=false")
			m.requests = b.proxy.requests.Load() - before
			w.close()
			if err != nil {
				return err
			}
			m.planSize = svcs
			b.table.add(scenario, "", who, m)
		}
		if err := b.exportCost(ctx, who); err != nil {
			return err
		}
	}
	return nil
}

// exportCost is scenario 7: `k8scidr-rehearse export` of the cluster as scenario 2 left it,
// read-only, through the proxy that counts its requests: its wall time, peak RSS, requests and
// the snapshot's size.
func (b *bench) exportCost(ctx context.Context, who string) error {
	dir, err := os.MkdirTemp("", "k8scidr-bench-snapshot-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for round := range b.o.rounds {
		logf("7. rehearsal export, %s, round %d", who, round+1)
		before, start := b.proxy.requests.Load(), time.Now()
		cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "k8scidr-rehearse"), "export", "-kubeconfig", b.kubeconfig, "-out", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("k8scidr-rehearse export (make rehearse-tool builds it): %w\n%s", err, out)
		}
		m := measure{wall: time.Since(start), requests: b.proxy.requests.Load() - before}
		if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.rss = float64(u.Maxrss) / 1024 // KiB on Linux
		}
		var size int64
		files, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, f := range files {
			if info, err := f.Info(); err == nil {
				size += info.Size()
			}
		}
		b.table.add("7. rehearsal export", "", fmt.Sprintf("%s; snapshot %.1f MiB", who, float64(size)/(1<<20)), m)
	}
	return nil
}

var planConfig = providerBlock + `
data "k8scidr_service_moves" "bench" {
  target_cidrs = [%[1]q]
  namespaces   = [%[2]s]
}

resource "k8scidr_service_recreation" "bench" {
  plan = data.k8scidr_service_moves.bench
}

data "k8scidr_workload_restarts" "bench" {
  pod_cidrs  = ["100.96.0.0/11"]
  namespaces = [%[3]s]
}

resource "k8scidr_workload_roll" "bench" {
  plan = data.k8scidr_workload_restarts.bench
}
`

// waitPodsRunning waits until at least n bench pods run with an IP.
func (b *bench) waitPodsRunning(ctx context.Context, n int) error {
	running := 0
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		running = 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.Namespace != "kube-system" {
				running++
			}
		}
		return running >= n, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods running: %w", running, n, err)
	}
	logf("%d pods running", running)
	return nil
}
