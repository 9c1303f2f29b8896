// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// What the wire's tests move: a cluster DNS with CoreDNS's ports, and Services of one workload.
package testcluster

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// WireSeed is what Seed made.
type WireSeed struct {
	// Services are "namespace/name" of the ClusterIP Services of the workload.
	Services []string
	// DNS is the cluster DNS Service, "kube-system/kube-dns".
	DNS string
	// NodePorts are the NodePort Services among Services.
	NodePorts []string
}

// Seed creates kube-system/coredns (two pods, labelled k8s-app=kube-dns) behind kube-dns at
// dnsIP with CoreDNS's ports (53/UDP, 53/TCP, 9153), as kubeadm and kOps make it, and in
// namespace ns a Deployment web (two pods) behind n Services web-0 … web-<n-1> on port 80, at IPs
// the apiserver chooses: ClusterIP, every fifth (web-4, web-9, …) NodePort. It waits until
// every pod is an address on the wire.
func (w *Wire) Seed(ctx context.Context, ns string, n int, dnsIP string) (*WireSeed, error) {
	kube := w.c.Kube
	dnsLabels := map[string]string{"k8s-app": "kube-dns"}
	if err := w.deployment(ctx, "kube-system", "coredns", dnsLabels); err != nil {
		return nil, err
	}
	dns := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{
		"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{ClusterIP: dnsIP, Selector: dnsLabels, Ports: coreDNSPorts()}}
	if _, err := kube.CoreV1().Services("kube-system").Create(ctx, dns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating kube-system/kube-dns: %w", err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	webLabels := map[string]string{"app": "web"}
	if err := w.deployment(ctx, ns, "web", webLabels); err != nil {
		return nil, err
	}
	s := &WireSeed{DNS: "kube-system/kube-dns"}
	for i := range n {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: webLabels, Ports: []corev1.ServicePort{{Name: "http", Port: WireHTTPPort}}}}
		if i%5 == 4 {
			svc.Spec.Type = corev1.ServiceTypeNodePort // moved by delete and create
		}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating Service %s/%s: %w", ns, svc.Name, err)
		}
		s.Services = append(s.Services, ns+"/"+svc.Name)
		if svc.Spec.Type == corev1.ServiceTypeNodePort {
			s.NodePorts = append(s.NodePorts, ns+"/"+svc.Name)
		}
	}
	for _, at := range []struct{ ns, selector string }{{"kube-system", "k8s-app=kube-dns"}, {ns, "app=web"}} {
		if err := w.waitAddresses(ctx, at.ns, at.selector, 2); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// coreDNSPorts are kube-dns's ports as kubeadm and kOps make them.
func coreDNSPorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)}}
}

func (w *Wire) deployment(ctx context.Context, ns, name string, labels map[string]string) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}}}}}
	if _, err := w.c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// waitAddresses waits until want Running pods of selector in ns are addresses on the wire.
func (w *Wire) waitAddresses(ctx context.Context, ns, selector string, want int) error {
	pods, err := w.c.WaitPodIPs(ctx, ns, selector, want)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if err := w.Err(); err != nil {
			return false, err
		}
		for _, p := range pods {
			if !w.Has(p.Status.PodIP) {
				return false, nil
			}
		}
		return true, nil
	})
}
