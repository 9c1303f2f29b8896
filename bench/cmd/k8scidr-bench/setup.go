// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// benchLabel marks every namespace the harness creates, so cleanup finds them.
const benchLabel = "k8scidr.io/bench"

func createNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: "true"}}}
	_, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return err
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}}}}}
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	errs := make(chan error, n)
	idx := make(chan int)
	for range workers {
		go func() {
			for i := range idx {
				errs <- f(i)
			}
		}()
	}
	go func() {
		for i := range n {
			idx <- i
		}
		close(idx)
	}()
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// serviceSet creates n Services in namespaces of 100 at explicit IPs from base in old: one
// one-replica Deployment per 20 Services, every 20th+1 a NodePort, every 20th+2 selector-less
// with hand-made Endpoints; the rest ClusterIP selecting their Deployment's pod.
func serviceSet(ctx context.Context, kube kubernetes.Interface, prefix string, n int, old netip.Prefix, base int) ([]string, []string, error) {
	var nss, keys []string
	for j := 0; j*100 < n; j++ {
		ns := fmt.Sprintf("%s-%d", prefix, j)
		if err := createNamespace(ctx, kube, ns); err != nil {
			return nil, nil, err
		}
		nss = append(nss, ns)
	}
	err := parallel((n+19)/20, 20, func(d int) error {
		_, err := kube.AppsV1().Deployments(nss[d*20/100]).Create(ctx, deployment(nss[d*20/100], fmt.Sprintf("d%03d", d), 1), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range n {
		keys = append(keys, fmt.Sprintf("%s/s%04d", nss[i/100], i))
	}
	err = parallel(n, 20, func(i int) error {
		ns, name := nss[i/100], fmt.Sprintf("s%04d", i)
		ip := addrAt(old, base+i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip.String(), ClusterIPs: []string{ip.String()},
				Selector: map[string]string{"app": fmt.Sprintf("d%03d", i/20)},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(testcluster.WireHTTPPort), Protocol: corev1.ProtocolTCP}}}}
		switch i % 20 {
		case 1:
			svc.Spec.Type = corev1.ServiceTypeNodePort
		case 2:
			svc.Spec.Selector = nil
		}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s/%s at %s: %w", ns, name, ip, err)
		}
		if i%20 != 2 {
			return nil
		}
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, //nolint:staticcheck // selector-less Services are still served from Endpoints by the mirroring controller
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("192.0.2.%d", 1+i%250)}}, //nolint:staticcheck // as above
				Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}} //nolint:staticcheck // as above
		_, err := kube.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{}) //nolint:staticcheck // as above
		return err
	})
	return nss, keys, err
}

func addrAt(p netip.Prefix, off int) netip.Addr {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(off) //nolint:gosec // offsets are small and checked against the prefix by the apiserver
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// oldRange creates a Ready ServiceCIDR for the old Services.
func oldRange(ctx context.Context, kube kubernetes.Interface, name, cidr string) error {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{cidr}}}
	if _, err := kube.NetworkingV1().ServiceCIDRs().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := kube.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == networkingv1.ServiceCIDRConditionReady && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// deleteNamespaces deletes the namespaces. Their Services and EndpointSlices are deleted by
// the harness first (its client is not rate-limited like kube-controller-manager's namespace
// and garbage collectors, which at the default 20 QPS take half an hour for 10,000 Services).
func deleteNamespaces(ctx context.Context, kube kubernetes.Interface, names []string) {
	for _, ns := range names {
		if l, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err == nil {
			_ = parallel(len(l.Items), 50, func(i int) error {
				return kube.CoreV1().Services(ns).Delete(ctx, l.Items[i].Name, metav1.DeleteOptions{})
			})
		}
		_ = kube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
}

// waitNamespacesGone waits until no bench namespace is left (their Services hold IPs).
func waitNamespacesGone(ctx context.Context, kube kubernetes.Interface) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: benchLabel})
		return err == nil && len(l.Items) == 0, nil
	})
}
