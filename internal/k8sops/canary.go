// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The pod canary: one short-lived pod that shows, before a whole cluster rolls, which range a
// new pod's address comes from now (after the old Calico pool is disabled: the new pool's).
package k8sops

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// CanaryLabel marks the canary pods k8scidr_pod_canary creates; CanaryOwnerLabel says whose
// (CanaryOptions.Owner). A later run of the same canary deletes those a killed run left, never
// another canary's: canaries for_each over nodes run side by side in one namespace.
const (
	CanaryLabel      = "k8scidr.io/canary"
	CanaryOwnerLabel = "k8scidr.io/canary-of"
)

// CanaryOptions say where the canary runs and which ranges its address must come from.
type CanaryOptions struct {
	Namespace string
	Image     string
	// NodeName pins the canary to one node; "" leaves it to the scheduler.
	NodeName string
	// Expect are the ranges an address must lie in; an address of a family none of them has is
	// not judged.
	Expect []netip.Prefix
	// Poll is how often the pod is read while it waits for its address (default 250 ms).
	Poll time.Duration
	// Owner tells this canary's pods from other canaries' (a label value): the same for every
	// run of one canary, so that a run deletes what its killed predecessor left and nothing else.
	Owner string
}

// CanaryResult is what the canary saw.
type CanaryResult struct {
	Pod  string // namespace/name
	Node string
	IPs  []string
	// Outside are the IPs of a family Expect has that lie outside every range of Expect.
	Outside []string
	// Left says why the canary pod may still exist (its delete failed), "" once it is gone.
	Left string
}

// RunCanary creates one pod, waits (until ctx ends) for its address, and deletes it again,
// whatever happened. The pod runs nothing but its image's default command, with no Service
// account token, no Service links and the restricted Pod Security profile, and tiny requests and
// limits (a namespace whose ResourceQuota counts compute admits it). Canary pods a killed run
// left in the namespace are deleted first.
func RunCanary(ctx context.Context, c *Client, o CanaryOptions) (res CanaryResult, err error) {
	api := c.Kube.CoreV1().Pods(o.Namespace)
	if o.Poll == 0 {
		o.Poll = 250 * time.Millisecond
	}
	if err := DeleteCanaries(ctx, c, o.Namespace, o.Owner); err != nil {
		return CanaryResult{}, err
	}
	// Named here, not by the apiserver: a create retried after a lost answer finds its pod.
	want := canaryPod(o, "k8scidr-canary-"+utilrand.String(5))
	var pod *corev1.Pod
	err = RetryWrite(ctx, func(again bool) error {
		var err error
		pod, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: c.FieldManager})
		if again && apierrors.IsAlreadyExists(err) {
			pod, err = api.Get(ctx, want.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return CanaryResult{}, fmt.Errorf("creating the canary pod in %s: %w", o.Namespace, err)
	}
	res = CanaryResult{Pod: o.Namespace + "/" + pod.Name}
	defer func() {
		// Deleted even when the run was cancelled: a canary must not stay.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := deletePodNow(dctx, c, pod); err != nil {
			res.Left = fmt.Sprintf("deleting it failed (%v): delete the pod %s by hand, or apply again, which deletes it", err, res.Pod)
		}
	}()
	var last *corev1.Pod
	err = wait.PollUntilContextCancel(ctx, o.Poll, true, func(ctx context.Context) (bool, error) {
		p, err := api.Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("the canary pod %s was deleted by another client before it got an address", res.Pod)
		case err != nil:
			return false, fmt.Errorf("reading the canary pod %s: %w", res.Pod, err) // client-go retried already
		}
		last = p
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the canary pod %s failed before it got an address: %s", res.Pod, podState(p))
		}
		return len(p.Status.PodIPs) > 0 || p.Status.PodIP != "", nil
	})
	if err != nil {
		if ctx.Err() != nil {
			state := "never read"
			if last != nil {
				state = podState(last)
			}
			return res, fmt.Errorf("the canary pod %s got no address in time (%s). Its node's CNI may not give addresses "+
				"from any enabled pool: check the pools' node selectors and the CNI's logs on that node", res.Pod, state)
		}
		return res, err
	}
	res.Node = last.Spec.NodeName
	for _, ip := range last.Status.PodIPs {
		res.IPs = append(res.IPs, ip.IP)
	}
	if len(res.IPs) == 0 {
		res.IPs = []string{last.Status.PodIP}
	}
	res.Outside = outsideExpected(res.IPs, o.Expect)
	return res, nil
}

// DeleteCanaries deletes the canary pods of owner in namespace: those an interrupted run left.
// Canary pods of no owner, made before canaries had one, go too.
func DeleteCanaries(ctx context.Context, c *Client, namespace, owner string) error {
	old, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: CanaryLabel + "=true"})
	if err != nil {
		return fmt.Errorf("listing canary pods in %s: %w", namespace, err)
	}
	for _, p := range old.Items {
		if of, ok := p.Labels[CanaryOwnerLabel]; ok && of != owner {
			continue // another canary's, maybe running now
		}
		if err := deletePodNow(ctx, c, &p); err != nil {
			return fmt.Errorf("deleting the canary pod %s/%s an earlier run left: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// outsideExpected are the ips of a family expect has that lie in none of its ranges.
func outsideExpected(ips []string, expect []netip.Prefix) []string {
	var out []string
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			out = append(out, s)
			continue
		}
		judged := slices.ContainsFunc(expect, func(p netip.Prefix) bool { return p.Addr().Is4() == ip.Is4() })
		if judged && !InAny(expect, ip) {
			out = append(out, s)
		}
	}
	return out
}

// canaryPod is the pod RunCanary creates.
func canaryPod(o CanaryOptions, name string) *corev1.Pod {
	tiny := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace,
			Labels: canaryLabels(o.Owner),
			Annotations: map[string]string{"k8scidr.io/description": "Shows which range a new pod's address comes from; " +
				"k8scidr_pod_canary deletes it once it has one."}},
		Spec: corev1.PodSpec{
			NodeName:                      o.NodeName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65535),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "canary", Image: o.Image,
				Resources: corev1.ResourceRequirements{Requests: tiny, Limits: tiny},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

func canaryLabels(owner string) map[string]string {
	l := map[string]string{CanaryLabel: "true"}
	if owner != "" {
		l[CanaryOwnerLabel] = owner
	}
	return l
}

// deletePodNow deletes pod without a grace period (UID precondition) and waits until it is gone.
func deletePodNow(ctx context.Context, c *Client, pod *corev1.Pod) error {
	api := c.Kube.CoreV1().Pods(pod.Namespace)
	err := RetryWrite(ctx, func(bool) error {
		return api.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := api.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID), nil
	})
}

// podState is a pod's phase with the reasons it gives: unschedulable, a sandbox not created.
func podState(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	if p.Spec.NodeName != "" {
		parts = append(parts, "node "+p.Spec.NodeName)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			parts = append(parts, fmt.Sprintf("container %s: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(parts, "; ")
}
