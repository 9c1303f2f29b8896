// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// rollNodes does to the cluster what the guide's node roll after the DNS move does, as far as
// the provider can see it, and says what it did. Where kubeadm's kube-system/kubelet-config
// exists, its clusterDNS is pointed at the cluster DNS Service's IPs now (kubeadm's step before
// the kubelets restart). Where it does not (kOps, EKS, GKE), the nodes are replaced by the roll
// and register anew: each Node is removed and made again under its name, labels, taints and pod
// ranges, so that it is registered after the DNS move, as the replacement would be (its pods
// stay bound: made again at once, the name never reaches the pod garbage collector's check).
// Either way the kubelets restart their static pods, which no controller restarts: their mirror
// pods are made again.
func rollNodes(ctx context.Context, kube kubernetes.Interface) (string, error) {
	mirrors, err := mirrorPods(ctx, kube) // before the nodes go: their owner references name them
	if err != nil {
		return "", err
	}
	var did string
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, recreation.KubeletConfigMap, metav1.GetOptions{})
	switch {
	case err == nil:
		ips, err := pointKubeletConfig(ctx, kube, cm)
		if err != nil {
			return "", err
		}
		did = "kube-system/kubelet-config's clusterDNS set to " + strings.Join(ips, ",")
	case apierrors.IsNotFound(err):
		uids, err := registerNodesAgain(ctx, kube)
		if err != nil {
			return "", err
		}
		for i := range mirrors {
			for j, o := range mirrors[i].OwnerReferences {
				if o.Kind == "Node" && uids[o.Name] != "" {
					mirrors[i].OwnerReferences[j].UID = uids[o.Name]
				}
			}
		}
		did = fmt.Sprintf("the %d nodes registered again, as their replacements would", len(uids))
	default:
		return "", fmt.Errorf("reading kube-system/%s: %w", recreation.KubeletConfigMap, err)
	}
	n, err := restartStaticPods(ctx, kube, mirrors)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("the nodes rolled: their kubelets restarted %d static pod(s) (the mirror pods made again); %s", n, did), nil
}

// pointKubeletConfig sets clusterDNS in kubelet-config cm to the cluster DNS Service's
// ClusterIPs, one of each family clusterDNS names, and returns them.
func pointKubeletConfig(ctx context.Context, kube kubernetes.Interface, cm *corev1.ConfigMap) ([]string, error) {
	old, err := recreation.KubeletClusterDNS(cm)
	if err != nil {
		return nil, fmt.Errorf("kube-system/%s: %w", recreation.KubeletConfigMap, err)
	}
	svcs, err := kube.CoreV1().Services("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	found := recreation.FindClusterDNS(svcs.Items, nil, recreation.ClusterDNSHints{KubeletClusterDNS: old})
	if found.Key == "" {
		return nil, fmt.Errorf("no cluster DNS Service to point kube-system/%s at", recreation.KubeletConfigMap)
	}
	var dns *corev1.Service
	for i := range svcs.Items {
		if "kube-system/"+svcs.Items[i].Name == found.Key {
			dns = &svcs.Items[i]
		}
	}
	if dns == nil {
		return nil, fmt.Errorf("the cluster DNS Service %s is gone", found.Key)
	}
	var ips []string
	for _, o := range old {
		a, err := netip.ParseAddr(o)
		if err != nil {
			return nil, fmt.Errorf("kube-system/%s names clusterDNS %q", recreation.KubeletConfigMap, o)
		}
		for _, ip := range dns.Spec.ClusterIPs {
			if n, err := netip.ParseAddr(ip); err == nil && n.Is4() == a.Is4() {
				ips = append(ips, ip)
				break
			}
		}
	}
	var kc map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["kubelet"]), &kc); err != nil {
		return nil, err
	}
	kc["clusterDNS"] = ips
	b, err := yaml.Marshal(kc)
	if err != nil {
		return nil, err
	}
	cm.Data["kubelet"] = string(b)
	_, err = kube.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
	return ips, err
}

// registerNodesAgain removes each Node and makes it again with what a replacement registers
// with: its name, labels, annotations, pod ranges, taints (the node controllers' own aside),
// addresses and resources. It returns the new UIDs by name.
func registerNodesAgain(ctx context.Context, kube kubernetes.Interface) (map[string]types.UID, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	api := kube.CoreV1().Nodes()
	uids := map[string]types.UID{}
	for _, n := range nodes.Items {
		again := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations},
			Spec: corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR, PodCIDRs: n.Spec.PodCIDRs, ProviderID: n.Spec.ProviderID,
				Unschedulable: n.Spec.Unschedulable},
			Status: corev1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Addresses: n.Status.Addresses}}
		for _, t := range n.Spec.Taints {
			if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				again.Spec.Taints = append(again.Spec.Taints, t)
			}
		}
		err := api.Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("removing node %s: %w", n.Name, err)
		}
		var made *corev1.Node
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			made, err = api.Create(ctx, &again, metav1.CreateOptions{})
			return err == nil, nil // AlreadyExists until the old one is gone
		})
		if err != nil {
			return nil, fmt.Errorf("registering node %s again: %w", n.Name, err)
		}
		uids[n.Name] = made.UID
	}
	return uids, nil
}

// mirrorPods are the static pods' mirror pods.
func mirrorPods(ctx context.Context, kube kubernetes.Interface) ([]corev1.Pod, error) {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Annotations[corev1.MirrorPodAnnotationKey] != "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// restartStaticPods does to the static pods what their kubelets do when the nodes roll: each
// mirror pod is deleted and made again with the same spec, and runs anew (a new start time,
// the current Service environment). It returns how many. A pod that does not start within
// 30 s is made again, as a kubelet would: the node agent of a loaded cluster (kwok on a twin)
// has been seen to miss a pod made again under the name it had just seen deleted.
//
// Then, as a kubelet keeps its mirror pods, a mirror pod that is gone within mirrorSettle after it
// was made again is made again: after a node roll the garbage collector deletes the old Node's
// pods (gracefully), and kwok finishes such a delete by name, which can take the new pod made
// under that name.
func restartStaticPods(ctx context.Context, kube kubernetes.Interface, mirrors []corev1.Pod) (int, error) {
	for _, p := range mirrors {
		if err := makeStaticPodAgain(ctx, kube, &p); err != nil {
			return 0, err
		}
	}
	for round := 0; round < 4; round++ {
		if err := sleepCtx(ctx, mirrorSettle); err != nil {
			return 0, err
		}
		gone := 0
		for _, p := range mirrors {
			_, err := kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				gone++
				if err := makeStaticPodAgain(ctx, kube, &p); err != nil {
					return 0, err
				}
			case err != nil:
				return 0, err
			}
		}
		if gone == 0 {
			return len(mirrors), nil
		}
	}
	return 0, fmt.Errorf("the mirror pods of %d static pod(s) kept disappearing after they were made again", len(mirrors))
}

// mirrorSettle is how long a mirror pod made again must stay before it counts as back.
const mirrorSettle = 3 * time.Second

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// makeStaticPodAgain restarts one static pod: its mirror pod made again until it starts, up to
// 4 tries of 30 s.
func makeStaticPodAgain(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) error {
	for try := 0; try < 4; try++ {
		started, err := restartStaticPod(ctx, kube, p)
		if err != nil || started {
			return err
		}
	}
	return fmt.Errorf("the static pod %s/%s did not start again in 4 tries of 30 s", p.Namespace, p.Name)
}

// restartStaticPod deletes mirror pod p, makes it again, and reports whether it started within
// 30 s.
func restartStaticPod(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) (bool, error) {
	api := kube.CoreV1().Pods(p.Namespace)
	if err := api.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	again := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, Annotations: p.Annotations,
		OwnerReferences: p.OwnerReferences}, Spec: p.Spec}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := api.Create(ctx, &again, metav1.CreateOptions{})
		return err == nil, nil // AlreadyExists until the old one is gone
	})
	if err != nil {
		return false, fmt.Errorf("making the mirror pod %s/%s again: %w", p.Namespace, p.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := api.Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && got.Status.StartTime != nil, nil
	})
	if err != nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	return err == nil, nil
}

// flagAPIServerPods does to the mirror pods of kube-apiserver what the guide's restart of it on
// new ranges does on kubeadm and kOps: the static pod's manifest changes and its kubelet makes the
// mirror pod again, its command line now saying --service-cluster-ip-range=ranges (the flag
// k8scidr_apiserver_service reads before it moves default/kubernetes). It says what it did, ""
// when there is no such pod.
func flagAPIServerPods(ctx context.Context, kube kubernetes.Interface, ranges []string) (string, error) {
	mirrors, err := mirrorPods(ctx, kube)
	if err != nil {
		return "", err
	}
	mirrors = slices.DeleteFunc(mirrors, func(p corev1.Pod) bool { return !k8sops.IsControlPlanePod(&p, "kube-apiserver") })
	if len(mirrors) == 0 {
		return "", nil
	}
	for i := range mirrors {
		for j := range mirrors[i].Spec.Containers {
			c := &mirrors[i].Spec.Containers[j]
			c.Command, c.Args = withServiceRange(c.Command, ranges), withServiceRange(c.Args, ranges)
		}
	}
	n, err := restartStaticPods(ctx, kube, mirrors)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("its %d mirror pod(s) made again with the new flag", n), nil
}

// serviceRangeFlag is kube-apiserver's --service-cluster-ip-range with its value, as one word or
// inside a shell's command line.
var serviceRangeFlag = regexp.MustCompile(`--service-cluster-ip-range=\S+`)

// withServiceRange is words with each --service-cluster-ip-range's value set to ranges.
func withServiceRange(words, ranges []string) []string {
	flag := "--service-cluster-ip-range"
	out := slices.Clone(words)
	for i, w := range out {
		switch {
		case w == flag && i+1 < len(out):
			out[i+1] = strings.Join(ranges, ",")
		default:
			out[i] = serviceRangeFlag.ReplaceAllLiteralString(w, flag+"="+strings.Join(ranges, ","))
		}
	}
	return out
}
