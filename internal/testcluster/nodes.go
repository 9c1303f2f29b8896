// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The cluster's kwok nodes: creating them with their pod ranges, replacing them (the pod-CIDR
// change of the write-ups), and reading their readiness; and waiting for the pods kwok runs on them.
package testcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

func (c *Cluster) createNodes(ctx context.Context) error {
	for _, n := range c.nodeTemplates {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: maps.Clone(n.Labels),
			Annotations: map[string]string{kwokAnnotation: "fake"}}, Spec: corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR,
			PodCIDRs: n.Spec.PodCIDRs, Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
			Status: corev1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Addresses: n.Status.Addresses}}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[NodeLabel] = "true"
		if len(node.Status.Capacity) == 0 {
			node.Status.Capacity, node.Status.Allocatable = nodeResources(), nodeResources()
		}
		if _, err := c.Kube.CoreV1().Nodes().Create(ctx, &node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	if c.nodeTemplates != nil {
		return nil
	}
	for i, cidrs := range c.NodePodCIDRs {
		if err := c.createNode(ctx, fmt.Sprintf("kwok-node-%d", i), strings.Split(cidrs, ",")); err != nil {
			return err
		}
	}
	return nil
}

// createNode registers a kwok node; podCIDRs may be empty (allocateNodeCIDRs: false).
func (c *Cluster) createNode(ctx context.Context, name string, podCIDRs []string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokAnnotation: "fake"},
			Labels:      map[string]string{NodeLabel: "true", "kubernetes.io/hostname": name, "type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Capacity:    nodeResources(),
			Allocatable: nodeResources(),
		},
	}
	if len(podCIDRs) > 0 {
		node.Spec.PodCIDR, node.Spec.PodCIDRs = podCIDRs[0], podCIDRs
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// ReplaceNodes does what a kOps rolling update does to every node: new nodes join (here without
// podCIDRs, as with allocateNodeCIDRs: false), each old node is cordoned and drained (its pods
// deleted; their controllers recreate them on the new nodes), then removed.
func (c *Cluster) ReplaceNodes(ctx context.Context) error {
	old, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabel})
	if err != nil {
		return err
	}
	for i := range old.Items {
		if err := c.createNode(ctx, fmt.Sprintf("kwok-node-r%d-%d", time.Now().Unix(), i), nil); err != nil {
			return err
		}
	}
	for _, n := range old.Items {
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	for _, n := range old.Items {
		if err := c.deletePodsOn(ctx, n.Name, nil); err != nil { // the drain
			return err
		}
		if err := c.Kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		// DaemonSet pods tolerate the cordon; with the node gone nothing runs them: remove them now
		// rather than wait for the pod garbage collector.
		if err := c.deletePodsOn(ctx, n.Name, ptr.To[int64](0)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) deletePodsOn(ctx context.Context, node string, grace *int64) error {
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		err := c.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

func notReady(n corev1.Node) bool {
	return !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// WaitPodIPs waits until exactly want pods match the selector in namespace, each Running with
// an IP.
func (c *Cluster) WaitPodIPs(ctx context.Context, namespace, selector string, want int) ([]corev1.Pod, error) {
	return c.WaitPods(ctx, namespace, selector, want, func(p corev1.Pod) bool {
		return p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning
	})
}

// WaitPods waits until exactly want pods (not terminating) match the selector in namespace and
// every one satisfies done: a minute, and a fifth of a second more per pod (kwok and Calico's
// IPAM start a few pods a second on a loaded 2-core machine).
func (c *Cluster) WaitPods(ctx context.Context, namespace, selector string, want int, done func(corev1.Pod) bool) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	timeout := time.Minute + time.Duration(want)*200*time.Millisecond
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		return len(pods) == want && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return !done(p) }), nil
	})
	if err != nil {
		return pods, fmt.Errorf("waiting for %d pods %q in %s: %w", want, selector, namespace, err)
	}
	return pods, nil
}

// SetKubeletClusterDNS writes kubeadm's kube-system/kubelet-config with clusterDNS ip: what a
// kubeadm cluster's kubelets are configured from (kwok nodes run no kubelet to read it).
func (c *Cluster) SetKubeletClusterDNS(ctx context.Context, ip string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-config", Namespace: "kube-system"},
		Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- " + ip + "\nclusterDomain: cluster.local\n"}}
	api := c.Kube.CoreV1().ConfigMaps("kube-system")
	if _, err := api.Update(ctx, cm, metav1.UpdateOptions{}); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	_, err := api.Create(ctx, cm, metav1.CreateOptions{})
	return err
}
