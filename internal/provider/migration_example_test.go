package provider

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// migrationFixture is the conflicted cluster of write-ups 000/001: Services in 100.64.0.0/13 (kube-dns
// at 100.64.0.10, a LoadBalancer, NodePort, headless, ExternalName and selector-less ones) and
// pods in the Calico pool 100.96.0.0/11.
func migrationFixture(t *testing.T) (*calicoEnv, map[string]string) {
	t.Helper()
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 2, Calico: testcluster.Calico331})
	spec := map[string]any{"cidr": "100.96.0.0/11", "blockSize": int64(26), "ipipMode": "Always", "vxlanMode": "Never",
		"natOutgoing": true, "nodeSelector": "all()", "allowedUses": []any{"Workload", "Tunnel"}}
	if err := c.CreateCalicoPool(ctx, k8sops.CalicoCRDV1Group, oldPoolName, spec); err != nil {
		t.Fatal(err)
	}
	ipam, err := c.StartCalicoIPAM(ctx, k8sops.CalicoCRDV1Group)
	if err != nil {
		t.Fatal(err)
	}
	client := clientFor(c)
	api, err := k8sops.Calico(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	e := &calicoEnv{t: t, c: c, ipam: ipam, api: api, group: k8sops.CalicoCRDV1Group}
	kube := c.Kube
	dep := func(ns, name string, replicas int32) {
		d := deploymentOf(name, replicas)
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dep("kube-system", "coredns", 2)
	dep("default", "web", 3)
	e.statefulSet("db", 2, appsv1.RollingUpdateStatefulSetStrategyType)
	e.daemonSet("agent")
	svc := func(ns, name string, typ corev1.ServiceType, ip, app string) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "p", Port: 80}}}}
		if app != "" {
			s.Spec.Selector = map[string]string{"app": app}
		}
		if typ == corev1.ServiceTypeExternalName {
			s.Spec.ExternalName, s.Spec.ClusterIP, s.Spec.Ports = "db.example.com", "", nil
		}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Service %s/%s: %v", ns, name, err)
		}
	}
	svc("kube-system", "kube-dns", corev1.ServiceTypeClusterIP, "100.64.0.10", "coredns")
	svc("default", "web", corev1.ServiceTypeClusterIP, "100.64.7.200", "web")
	svc("default", "api", corev1.ServiceTypeNodePort, "100.64.7.201", "web")
	svc("default", "db", corev1.ServiceTypeClusterIP, "None", "db")
	svc("default", "lb", corev1.ServiceTypeLoadBalancer, "100.64.12.7", "web")
	svc("default", "ext", corev1.ServiceTypeExternalName, "", "")
	svc("default", "legacy", corev1.ServiceTypeClusterIP, "100.64.9.9", "")
	if _, err := c.WaitPodIPs(ctx, "kube-system", "app=coredns", 2); err != nil {
		t.Fatal(err)
	}
	e.waitPods("web", 3)
	return e, map[string]string{"kube-system/kube-dns": "100.64.0.10", "default/web": "100.64.7.200", "default/api": "100.64.7.201",
		"default/lb": "100.64.12.7", "default/legacy": "100.64.9.9"}
}

// TestAccMigrationExample runs examples/migration/main.tf itself (linked, not copied) stage by
// stage under the real terraform CLI and the built provider, with the steps outside the
// Kubernetes API done between the stages as an operator does them, and checks the end state.
func TestAccMigrationExample(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	e, oldIPs := migrationFixture(t)
	ctx := context.Background()
	kube := e.c.Kube
	w := newCLIWorkspace(t, "")
	example, err := filepath.Abs("../../examples/migration/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w.dir, "main.tf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(example, filepath.Join(w.dir, "main.tf")); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "KUBE_CONFIG_PATH="+e.c.Kubeconfig)
	stage := func(n int) string {
		t.Helper()
		out, err := w.run("apply", "-auto-approve", "-input=false", fmt.Sprintf("-var=stage=%d", n))
		if err != nil {
			t.Fatalf("stage %d: %v\n%s", n, err, out)
		}
		t.Logf("stage %d applied", n)
		return out
	}

	out := stage(1)
	for key, ip := range oldIPs {
		ns, name, _ := strings.Cut(key, "/")
		s, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		in := netip.MustParsePrefix("172.24.0.0/15").Contains(netip.MustParseAddr(s.Spec.ClusterIP))
		if key == "default/lb" {
			if s.Spec.ClusterIP != ip {
				t.Errorf("the LoadBalancer moved to %s", s.Spec.ClusterIP)
			}
		} else if !in {
			t.Errorf("%s at %s after stage 1, want 172.24.0.0/15", key, s.Spec.ClusterIP)
		}
	}
	if !strings.Contains(out, "kubelet_cluster_dns = tolist([\n  \"172.24.0.10\",") {
		t.Errorf("stage 1 outputs lack kubelet_cluster_dns 172.24.0.10:\n%s", out)
	}
	// Outside the API: kubelet clusterDNS now points at 172.24.0.10 (kwok has no kubelet).
	stage(2)
	stage(3)
	if _, err := kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns-legacy", metav1.GetOptions{}); err == nil {
		t.Error("the DNS bridge is still there after stage 3")
	}
	// Outside the API: KEP-1880 steps 5-7. kube-apiserver restarts on the new range; the old
	// default ServiceCIDR and default/kubernetes are deleted and come back in the new range.
	if err := e.c.RestartAPIServer(ctx, []string{"172.24.0.0/15"}); err != nil {
		t.Fatal(err)
	}
	scs := clientFor(e.c)
	if err := k8sops.DeleteServiceCIDR(ctx, scs, k8sops.DefaultServiceCIDRName, false); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil || s.Spec.ClusterIP != "172.24.0.1" {
			return false, nil //nolint:nilerr // not recreated yet
		}
		sc, err := k8sops.GetServiceCIDR(ctx, scs, k8sops.DefaultServiceCIDRName)
		return err == nil && sc.Ready && slices.Equal(sc.CIDRs, []string{"172.24.0.0/15"}), nil
	})
	if err != nil {
		t.Fatalf("default/kubernetes and the default ServiceCIDR not recreated in 172.24.0.0/15: %v", err)
	}
	stage(4)
	stage(5)
	// Outside the API: the nodes are replaced (kOps rolling update with allocateNodeCIDRs:
	// false), so no node keeps a podCIDR in the old range; the pods come back on the new nodes.
	if err := e.c.ReplaceNodes(ctx); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"web", "db", "agent"} {
		e.waitPods(app, map[string]int{"web": 3, "db": 2, "agent": 2}[app])
	}
	if _, err := e.c.WaitPodIPs(ctx, "kube-system", "app=coredns", 2); err != nil {
		t.Fatal(err)
	}

	// The end state.
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newPods := netip.MustParsePrefix("172.16.0.0/13")
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.DeletionTimestamp != nil {
			continue
		}
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !newPods.Contains(ip) {
			t.Errorf("pod %s/%s at %q, want 172.16.0.0/13", p.Namespace, p.Name, p.Status.PodIP)
		}
	}
	if pool, err := e.api.GetIPPool(ctx, oldPoolName); err != nil || pool != nil {
		t.Errorf("old pool still there (%v)", err)
	}
	if blocks, affs := e.blocksIn("100.96.0.0/11"); len(blocks)+len(affs) > 0 {
		t.Errorf("old pool left blocks %v and affinities %v", blocks, affs)
	}
	lbRange, err := k8sops.GetServiceCIDR(ctx, scs, "keep-100-64-12-0-28")
	if err != nil || !lbRange.Ready {
		t.Errorf("the LoadBalancer's keep-range: %+v (%v)", lbRange, err)
	}
	if out, err := w.run("apply", "-auto-approve", "-input=false", "-refresh-only", "-var=stage=5"); err != nil {
		t.Fatalf("refresh after the node replacement: %v\n%s", err, out)
	}
	if out, err := w.run("output"); err == nil {
		t.Logf("outputs:\n%s", out)
	}
	outputs, err := w.run("output", "-json", "conflicts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.Trim(strings.TrimSpace(outputs), "[]"), ",") {
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(line, "keep-100-64-12-0-28") {
			t.Errorf("unexpected conflict after the migration: %s", line)
		}
	}
	if out, err := w.run("plan", "-detailed-exitcode", "-input=false", "-var=stage=5"); err != nil {
		t.Errorf("the re-plan is not empty (%v):\n%s", err, out)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	t.Logf("pods after: %v", names)
}
