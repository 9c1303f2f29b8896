// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// BenchmarkServiceRecreation moves N Services (selecting one ready pod, so each waits for
// kube-controller-manager's new EndpointSlice) from 100.64.0.0/13 to 172.24.0.0/15 at the
// provider's default settings (client QPS 50/burst 100, parallelism 10), on a real loopback
// cluster. Each iteration moves them all one way; the next moves them back.
func BenchmarkServiceRecreation(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchRecreation(b, n) })
	}
}

func benchRecreation(b *testing.B, n int) {
	if _, err := os.Stat(testcluster.DefaultBinDir()); err != nil {
		b.Skip("no test cluster binaries: run make testbin")
	}
	ctx := context.Background()
	c, err := testcluster.Start(ctx, testcluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	cfg := *c.RESTConfig
	cfg.QPS, cfg.Burst = 50, 100 // the provider's defaults
	client, err := k8sops.NewClient(&cfg, "", "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := servicecidr.CreateServiceCIDR(ctx, client, "new", []string{"172.24.0.0/15"}); err != nil {
		b.Fatal(err)
	}
	if _, err := servicecidr.WaitServiceCIDRReady(ctx, client, "new"); err != nil {
		b.Fatal(err)
	}
	setupServices(b, c, n)
	ranges := [][]string{{"172.24.0.0/15"}, {"100.64.0.0/13"}}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		o := recreation.RecreationOptions{TargetCIDRs: ranges[i%2], IPAssignment: k8sops.PreserveOffset, Namespaces: []string{"bench"}}
		snap, err := recreation.TakeSnapshot(ctx, client, recreation.Journal{Namespace: recreation.DefaultJournalNamespace}, true)
		if err != nil {
			b.Fatal(err)
		}
		p := recreation.PlanRecreation(snap, o)
		if len(p.Errors) > 0 || len(p.Moves) != n {
			b.Fatalf("plan: %v, %d moves", p.Errors, len(p.Moves))
		}
		steps, errs := recreation.PrepareRecreation(snap, recreation.PlannedRecreation{TargetCIDRs: o.TargetCIDRs, Moves: p.Moves}, recreation.BridgeOptions{})
		if len(errs) > 0 || len(steps.Moves) != n {
			b.Fatalf("prepare: %v, %d moves", errs, len(steps.Moves))
		}
		start := time.Now()
		res, err := recreation.ExecuteRecreation(ctx, client, snap, steps, recreation.ExecOptions{Parallelism: recreation.DefaultParallelism, Journal: recreation.Journal{Namespace: recreation.DefaultJournalNamespace}})
		if err != nil || len(res.Recreated) != n || len(res.Notes) > 0 {
			b.Fatalf("execute: %v, %d recreated, notes %v", err, len(res.Recreated), res.Notes)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "services/s")
	}
}

// setupServices runs one ready pod and n ClusterIP Services selecting it, and waits until
// every Service has its EndpointSlice.
func setupServices(b *testing.B, c *testcluster.Cluster, n int) {
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	labels := map[string]string{"app": "bench"}
	_, err := c.Kube.AppsV1().Deployments("bench").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		ip := fmt.Sprintf("100.64.%d.%d", 1+i/250, 2+i%250)
		_, err := c.Kube.CoreV1().Services("bench").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%04d", i)},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Selector: labels,
				Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.DiscoveryV1().EndpointSlices("bench").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, s := range list.Items {
			if len(s.Endpoints) > 0 {
				ready++
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		b.Fatalf("waiting for %d EndpointSlices: %v", n, err)
	}
}
