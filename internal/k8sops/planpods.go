// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// One pod list for the readers of a plan: the data sources and the preflights of one
// terraform plan read the cluster's pods moments apart, and at 20,000 pods each list is tens of
// pages and most of a second.
package k8sops

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlanPodsFresh is how long after its list began a plan-time pod list serves the next
// plan-time reader of the same Client. A terraform plan reads its data sources and then plans
// its resources within seconds, in one provider process; an apply starts another process and
// never reads pods from here.
const PlanPodsFresh = time.Minute

// planPods is the Client's plan-time pod list (PlanPods).
type planPods struct {
	listed time.Time
	pods   []corev1.Pod
}

// PlanPods lists every pod for plan-time readers (data sources, plan-time preflight checks),
// keeping of each only what they read (PlanPod), and gives the same list to every such reader
// of this Client for PlanPodsFresh after it began. Readers must not change the pods. An apply's
// own reads (what it re-checks live) never come from here.
func (c *Client) PlanPods(ctx context.Context) ([]corev1.Pod, error) {
	c.podsMu.Lock() // held while listing: a second reader waits for the list instead of making its own
	defer c.podsMu.Unlock()
	if c.pods != nil && time.Since(c.pods.listed) < PlanPodsFresh {
		return c.pods.pods, nil
	}
	began := time.Now()
	pods := []corev1.Pod{}
	err := EachItem(ctx, ListPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error {
		pods = append(pods, PlanPod(p))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	c.pods = &planPods{listed: began, pods: pods}
	return pods, nil
}

// calicoAnnotationPrefix starts Calico's pod annotations: the pools and addresses a pod is
// pinned to, and the addresses Calico gave it.
const calicoAnnotationPrefix = "cni.projectcalico.org/"

// PlanPod is the part of a pod any plan-time reader reads: identity, labels, owners, creation
// and deletion, Calico's annotations, host networking, DNS policy, phase, addresses and start
// time; the whole spec only of kube-system's pods (the control plane's flags). Each reader
// trims further to what it keeps.
func PlanPod(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, OwnerReferences: p.OwnerReferences,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{HostNetwork: p.Spec.HostNetwork, DNSPolicy: p.Spec.DNSPolicy},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs, StartTime: p.Status.StartTime},
	}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, calicoAnnotationPrefix) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	if p.Namespace == "kube-system" {
		out.Spec = p.Spec
	}
	return out
}
