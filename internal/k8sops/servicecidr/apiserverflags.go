// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// CheckAPIServerFlags asks, before default/kubernetes is deleted, whether every kube-apiserver
// runs with a --service-cluster-ip-range that gives it the new IPs, where its flags can be read:
// the command lines of kube-system's kube-apiserver pods (kubeadm's and kOps' static pods,
// through their mirror pods). Each kube-apiserver's kubernetesservice controller makes
// default/kubernetes from its own flag whenever it is missing, so one still on the old range
// (a control-plane node not yet rolled) recreates it there within seconds of the delete. It
// returns the refusal naming each such pod, or a note when no flag could be read (managed
// control planes run none as pods; the apply then judges by the IP the Service comes back at).
func CheckAPIServerFlags(ctx context.Context, c *k8sops.Client, ranges []string) (note string, err error) {
	want, err := APIServerNewIPs(ranges)
	if err != nil {
		return "", err
	}
	var pods []corev1.Pod
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Pods("kube-system").List), func(p *corev1.Pod) error {
		if k8sops.IsControlPlanePod(p, "kube-apiserver") {
			pods = append(pods, *p)
		}
		return nil
	})
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("kube-apiserver's --service-cluster-ip-range was not read before default/kubernetes's delete: "+
			"these credentials cannot list kube-system's pods (%v).", err), nil
	}
	if err != nil {
		return "", fmt.Errorf("listing kube-apiserver's pods: %w", err)
	}
	var stale, unread []string
	for i := range pods {
		p := &pods[i]
		values := k8sops.FlagValues(p, "service-cluster-ip-range")
		if len(values) == 0 {
			unread = append(unread, "kube-system/"+p.Name)
			continue
		}
		flag := values[len(values)-1] // the last occurrence wins, as in kube-apiserver's flag parsing
		ips, err := APIServerNewIPs(strings.Split(flag, ","))
		if err != nil || !slices.Equal(ips, want) {
			stale = append(stale, fmt.Sprintf("kube-system/%s (--service-cluster-ip-range=%s)", p.Name, flag))
		}
	}
	if len(stale) > 0 {
		return "", fmt.Errorf("kube-apiserver runs with a Service range that does not give default/kubernetes its new IP %s "+
			"in %s: each kube-apiserver recreates default/kubernetes from its own --service-cluster-ip-range whenever it is "+
			"missing, so the move would be undone at the old IP, and it was not moved. Restart every kube-apiserver with "+
			"--service-cluster-ip-range=%s first, then apply again. kubeadm: set networking.serviceSubnet in the kubeadm-config "+
			"ConfigMap and the flag in /etc/kubernetes/manifests/kube-apiserver.yaml on each control-plane node. kOps: set "+
			"spec.networking.serviceClusterIPRange (provider::k8scidr::kops_networking), then `kops update cluster --yes` and "+
			"`kops rolling-update cluster --instance-group-roles=control-plane --yes`",
			strings.Join(want, ", "), strings.Join(stale, ", "), strings.Join(ranges, ","))
	}
	switch {
	case len(pods) == 0:
		return "No kube-apiserver pod runs in kube-system (a managed control plane, or one not run as static pods), so its " +
			"--service-cluster-ip-range was not read before default/kubernetes's delete; the apply judged the move by the IP " +
			"kube-apiserver gave it back.", nil
	case len(unread) > 0:
		return fmt.Sprintf("%s run without --service-cluster-ip-range on their command line, so their range was not read "+
			"before default/kubernetes's delete; the apply judged the move by the IP kube-apiserver gave it back.", strings.Join(unread, ", ")), nil
	}
	return "", nil
}
