// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// clusterChurn changes a cluster the way other teams do between a plan and its apply, in its
// own namespace: every round creates a namespace, a headless Service and a ClusterIP Service
// at a given IP, relabels the previous round's Service and deletes the one before it, scales
// the Deployment "busy" up by one and deletes one of its pods.
type clusterChurn struct {
	t    *testing.T
	kube kubernetes.Interface
	n    int
}

const churnNS = "churn"

func newClusterChurn(t *testing.T, kube kubernetes.Interface) *clusterChurn {
	t.Helper()
	f := fixture{t, kube}
	f.namespace(churnNS)
	f.deployment(churnNS, "busy", map[string]string{"app": "busy"})
	return &clusterChurn{t: t, kube: kube}
}

// round churns once; ip is the new ClusterIP Service's address ("" lets the apiserver choose).
func (c *clusterChurn) round(ip string) {
	c.t.Helper()
	ctx := context.Background()
	c.n++
	f := fixture{c.t, c.kube}
	f.namespace(fmt.Sprintf("churn-%d", c.n))
	headless := clusterIPService(fmt.Sprintf("headless-%d", c.n), corev1.ClusterIPNone)
	f.service(churnNS, headless)
	svc := clusterIPService(fmt.Sprintf("svc-%d", c.n), ip)
	if ip == "" {
		svc.Spec.ClusterIPs = nil
	}
	f.service(churnNS, svc)
	svcs := c.kube.CoreV1().Services(churnNS)
	if c.n > 1 {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"churned":"%d"}}}`, c.n))
		if _, err := svcs.Patch(ctx, fmt.Sprintf("svc-%d", c.n-1), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	if c.n > 2 {
		for _, name := range []string{fmt.Sprintf("svc-%d", c.n-2), fmt.Sprintf("headless-%d", c.n-2)} {
			if err := svcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				c.t.Fatal(err)
			}
		}
	}
	// The scale subresource's patch carries no resourceVersion: no conflict with the controllers.
	scale := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, c.busyReplicas()))
	if _, err := c.kube.AppsV1().Deployments(churnNS).Patch(ctx, "busy", types.MergePatchType, scale, metav1.PatchOptions{}, "scale"); err != nil {
		c.t.Fatal(err)
	}
	pods, err := c.kube.CoreV1().Pods(churnNS).List(ctx, metav1.ListOptions{LabelSelector: "app=busy"})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		if err := c.kube.CoreV1().Pods(churnNS).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.t.Fatal(err)
		}
	}
}

// busyReplicas is how many pods "busy" runs by now.
func (c *clusterChurn) busyReplicas() int { return 1 + c.n }
