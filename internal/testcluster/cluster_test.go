// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// requireBinaries skips when the test binaries have not been built (plain `go test` without
// `make testbin`); `make test` always builds them, so there this never skips.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(DefaultBinDir() + "/kube-apiserver"); err != nil {
		if os.Getenv("K8SCIDR_REQUIRE_CLUSTER") != "" {
			t.Fatalf("test binaries missing in %s: %v", DefaultBinDir(), err)
		}
		t.Skipf("test binaries missing in %s (run make testbin): %v", DefaultBinDir(), err)
	}
}

func TestCluster_deploymentGetsRunningPodsWithIPs(t *testing.T) {
	requireBinaries(t)
	ctx := context.Background()
	start := time.Now()
	c, err := Start(ctx, Options{Nodes: 3, ServiceCIDRs: []string{"100.64.0.0/13"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster ready in %s", time.Since(start).Round(time.Millisecond))
	pids := c.pids()

	v, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major+"."+v.Minor != NewestRelease {
		t.Errorf("server version %s, want v%s.x", v.GitVersion, NewestRelease)
	}
	if got := c.NodePodCIDRs; len(got) != 3 || got[0] != "100.96.0.0/24" || got[2] != "100.96.2.0/24" {
		t.Errorf("node pod CIDRs %v, want 100.96.0.0/24 … 100.96.2.0/24", got)
	}

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			},
		},
	}
	if _, err := c.Kube.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		pods = list.Items
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running++
			}
		}
		return running == 4, nil
	})
	if err != nil {
		t.Fatalf("deployment pods not Running with IPs: %v (pods: %d)", err, len(pods))
	}
	nodeRanges := map[string]netip.Prefix{}
	for i, cidr := range c.NodePodCIDRs {
		nodeRanges[fmt.Sprintf("kwok-node-%d", i)] = netip.MustParsePrefix(cidr)
	}
	for _, p := range pods {
		ip := netip.MustParseAddr(p.Status.PodIP)
		if r, ok := nodeRanges[p.Spec.NodeName]; !ok || !r.Contains(ip) {
			t.Errorf("pod %s on node %q has IP %s outside the node's podCIDR %v", p.Name, p.Spec.NodeName, ip, r)
		}
	}

	c.Stop()
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil && !isZombie(pid) {
			t.Errorf("%s (pid %d) still running after Stop", name, pid)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s not removed: %v", c.Dir, err)
	}
}

func (c *Cluster) pids() map[string]int {
	m := map[string]int{}
	for _, p := range c.procs {
		m[p.Name] = p.PID
	}
	return m
}

// TestCluster_calicoCRDs installs each Calico release's CRDs and shows the schema difference the
// IPPool resource must read: 3.31 keeps spec.assignmentMode, 3.28 prunes it.
func TestCluster_calicoCRDs(t *testing.T) {
	requireBinaries(t)
	ctx := context.Background()
	pool := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"}
	for release, keeps := range map[string]bool{Calico331: true, Calico328: false} {
		t.Run(release, func(t *testing.T) {
			c, err := Start(ctx, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			if err := c.InstallCalicoCRDs(ctx, release); err != nil {
				t.Fatal(err)
			}
			dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "metadata": map[string]any{"name": "p"},
				"spec": map[string]any{"cidr": "10.10.0.0/18", "blockSize": int64(26), "assignmentMode": "Automatic"},
			}}
			got, err := dyn.Resource(pool).Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, has, _ := unstructured.NestedString(got.Object, "spec", "assignmentMode")
			if has != keeps {
				t.Errorf("Calico %s CRD: spec.assignmentMode kept = %v, want %v", release, has, keeps)
			}
			for _, r := range []string{"ipamblocks", "blockaffinities", "ipamhandles"} {
				if _, err := dyn.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: r}).
					List(ctx, metav1.ListOptions{}); err != nil {
					t.Errorf("%s not served: %v", r, err)
				}
			}
		})
	}
}
