// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The conflicted cluster of write-ups 000/001, for the migration test and the demo: kOps'
// default ranges (Services 100.64.0.0/13, pods in the Calico pool 100.96.0.0/11), kube-dns at
// 100.64.0.10, and Services and workloads of every kind.
package testcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// MigrationVars are examples/migration's per-cluster variables for a seeded cluster, as the
// TF_VAR_ settings its runs take: kOps' ranges out of Tailscale's 100.64.0.0/10, and stage 5's
// canary image (kwok's pods run no image).
var MigrationVars = []string{
	`TF_VAR_reserved={ tailscale = "100.64.0.0/10" }`,
	`TF_VAR_service_cidrs={ old = "100.64.0.0/13", new = "172.24.0.0/15" }`,
	`TF_VAR_pod_cidrs={ old = "100.96.0.0/11", new = "172.16.0.0/13" }`,
	`TF_VAR_kops={ non_masquerade_cidr = "172.16.0.0/12", network_cidr = "10.20.0.0/16" }`,
	"TF_VAR_canary_image=pause:canary",
}

// Seeded is what Seed made.
type Seeded struct {
	// ServiceIPs maps "namespace/name" to the ClusterIP of every Service with one (headless and
	// ExternalName Services excluded), default/kubernetes excluded.
	ServiceIPs map[string]string
	// LoadBalancers lists the LoadBalancer Services among them.
	LoadBalancers []string
	// Workloads maps "namespace/kind/name" to its pod count.
	Workloads map[string]int
	// Pods is the number of pods the workloads run.
	Pods int
}

// WebServices are the Services of the web pods (ClusterIP, NodePort and LoadBalancer, port 80):
// what the wire's clients reach (StartClients), sorted.
func (s *Seeded) WebServices() []string {
	var keys []string
	for key := range s.ServiceIPs {
		ns, name, _ := strings.Cut(key, "/")
		if strings.HasPrefix(ns, "app-") && (strings.HasPrefix(name, "web-") || name == "front" || name == "api") {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// Seed creates the installer's Calico pool (default-ipv4-ippool, 100.96.0.0/11, IPIP Always, NAT
// on) where the cluster serves Calico's CRDs (without them pods take their node's podCIDR, as with
// kubenet), kube-system/coredns (with its PodDisruptionBudget) behind kube-dns at 100.64.0.10, and in namespaces app-0 … app-k: per
// group of ten Services a Deployment with its ClusterIP Services, a NodePort, a headless Service
// with a StatefulSet, an ExternalName, a selector-less Service, and every fourth group a
// LoadBalancer, plus two Deployments without Services; and a DaemonSet. It waits until every pod has an address. With Calico,
// Calico's IPAM must be running (StartCalicoIPAM).
func (c *Cluster) Seed(ctx context.Context, groups int) (*Seeded, error) {
	s := &Seeded{ServiceIPs: map[string]string{}, Workloads: map[string]int{}}
	// The pool where Calico's CRDs are served (Options.Calico, InstallCalicoCRDs).
	if _, err := c.Kube.Discovery().ServerResourcesForGroupVersion("crd.projectcalico.org/v1"); err == nil {
		pool := map[string]any{"cidr": "100.96.0.0/11", "blockSize": int64(26), "ipipMode": "Always", "vxlanMode": "Never",
			"natOutgoing": true, "nodeSelector": "all()", "allowedUses": []any{"Workload", "Tunnel"}}
		if err := c.CreateCalicoPool(ctx, "crd.projectcalico.org/v1", "default-ipv4-ippool", pool); err != nil {
			return nil, err
		}
	}
	kube := c.Kube
	svc := func(ns, name string, typ corev1.ServiceType, ip, app string, ports ...corev1.ServicePort) error {
		if ports == nil {
			ports = []corev1.ServicePort{{Name: "p", Port: 80}}
		}
		sv := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ip, Ports: ports}}
		if app != "" {
			sv.Spec.Selector = map[string]string{"app": app}
		}
		if typ == corev1.ServiceTypeExternalName {
			sv.Spec.ExternalName, sv.Spec.ClusterIP, sv.Spec.Ports = "db.example.com", "", nil
		}
		got, err := kube.CoreV1().Services(ns).Create(ctx, sv, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Service %s/%s: %w", ns, name, err)
		}
		if got.Spec.ClusterIP != "" && got.Spec.ClusterIP != corev1.ClusterIPNone {
			s.ServiceIPs[ns+"/"+name] = got.Spec.ClusterIP
		}
		if typ == corev1.ServiceTypeLoadBalancer {
			s.LoadBalancers = append(s.LoadBalancers, ns+"/"+name)
		}
		return nil
	}
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}}}
	}
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	deployment := func(ns, name string, replicas int32) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: selector(name), Template: template(name)}}
		s.Workloads[ns+"/deployment/"+name] = int(replicas)
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		return err
	}
	if err := deployment("kube-system", "coredns", 2); err != nil {
		return nil, err
	}
	// kOps' CoreDNS addon ships a PodDisruptionBudget beside it, so that a node roll's drain
	// keeps one replica running (the preflight's roll_availability warns of CoreDNS without one).
	dnsBudget := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: selector("coredns")}}
	if _, err := kube.PolicyV1().PodDisruptionBudgets("kube-system").Create(ctx, dnsBudget, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// With CoreDNS's ports: on the wire (StartWire) kube-dns answers queries.
	if err := svc("kube-system", "kube-dns", corev1.ServiceTypeClusterIP, "100.64.0.10", "coredns", coreDNSPorts()...); err != nil {
		return nil, err
	}
	for g := range groups {
		ns := fmt.Sprintf("app-%d", g)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		for name, replicas := range map[string]int32{"web": 2, "worker": 1, "cache": 1} {
			if err := deployment(ns, name, replicas); err != nil {
				return nil, err
			}
		}
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), Selector: selector("db"), Template: template("db"), ServiceName: "db",
			PodManagementPolicy: appsv1.ParallelPodManagement}}
		if _, err := kube.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		s.Workloads[ns+"/statefulset/db"] = 1
		for i := range 5 {
			if err := svc(ns, fmt.Sprintf("web-%d", i), corev1.ServiceTypeClusterIP, fmt.Sprintf("100.64.%d.%d", 10+g, 20+i), "web"); err != nil {
				return nil, err
			}
		}
		typ := corev1.ServiceTypeNodePort
		if g%4 == 0 {
			typ = corev1.ServiceTypeLoadBalancer
		}
		steps := []struct {
			name string
			typ  corev1.ServiceType
			ip   string
			app  string
		}{
			{"front", typ, fmt.Sprintf("100.64.%d.7", 10+g), "web"},
			{"api", corev1.ServiceTypeNodePort, "", "web"},
			{"db", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, "db"},
			{"ext", corev1.ServiceTypeExternalName, "", ""},
			{"legacy", corev1.ServiceTypeClusterIP, "", ""},
		}
		for _, st := range steps {
			if err := svc(ns, st.name, st.typ, st.ip, st.app); err != nil {
				return nil, err
			}
		}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-agent"},
		Spec: appsv1.DaemonSetSpec{Selector: selector("node-agent"), Template: template("node-agent")}}
	if _, err := kube.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	s.Workloads["kube-system/daemonset/node-agent"] = len(c.NodePodCIDRs)
	for _, n := range s.Workloads {
		s.Pods += n
	}
	_, err := c.WaitPods(ctx, "", "app", s.Pods, func(p corev1.Pod) bool { return p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return nil, fmt.Errorf("seeded pods: %w", err)
	}
	return s, nil
}
