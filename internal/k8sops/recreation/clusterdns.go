// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Finding the cluster DNS Service as it is, not by one name: clusters call it kube-dns (kubeadm,
// kOps) or coredns (Helm chart, k3s, many managed offerings), always in kube-system with the
// label k8s-app=kube-dns; kubeadm clusters also say in kube-system/kubelet-config which IP the
// kubelets hand to pods.
package recreation

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// DNSServiceKey is the conventional name of the cluster DNS Service: where it exists it is the
// cluster DNS unless the kubelets' clusterDNS names another Service.
const DNSServiceKey = "kube-system/kube-dns"

// DNSServiceLabel is the label every cluster DNS Service carries, whatever its name.
const DNSServiceLabel = "k8s-app"

const dnsServiceLabelValue = "kube-dns"

// KubeletConfigMap is kubeadm's record of the kubelet configuration of every node.
const KubeletConfigMap = "kubelet-config"

// ClusterDNSHints are what identifies the cluster DNS Service besides its label.
type ClusterDNSHints struct {
	// Named is the Service the user named (dns_service), "" to find it.
	Named string
	// KubeletClusterDNS is clusterDNS of kubeadm's kubelet-config; nil where it does not exist.
	KubeletClusterDNS []string
	// KubeletConfigUnread says why kubelet-config could not be read ("" when it was, or does not exist).
	KubeletConfigUnread string
}

// ClusterDNS is the cluster DNS Service found, or why none could be chosen.
type ClusterDNS struct {
	Key string // "" when the cluster has none
	// Notes say how it was found when that is worth knowing (NodeLocal DNSCache, no match).
	Notes []string
	// Errors: named but missing, or ambiguous.
	Errors []k8sops.Finding
}

// FindClusterDNS picks the cluster DNS Service among services (and Services an interrupted
// apply left only in the journal): the one the user named; else the one whose ClusterIP the
// kubelets' clusterDNS names (through a DNS bridge, the Service it stands in for); else
// kube-system/kube-dns; else the only kube-system Service labelled k8s-app=kube-dns. Several
// such Services and nothing to tell them apart is an error: the user names one.
func FindClusterDNS(services []corev1.Service, journal []JournalEntry, h ClusterDNSHints) ClusterDNS {
	var out ClusterDNS
	byKey := map[string]*corev1.Service{}
	for i := range services {
		byKey[k8sops.SvcKey(&services[i])] = &services[i]
	}
	for i := range journal {
		if _, ok := byKey[journal[i].Key]; !ok {
			byKey[journal[i].Key] = &journal[i].Service
		}
	}
	if h.Named != "" {
		if _, ok := byKey[h.Named]; !ok {
			out.Errors = append(out.Errors, k8sops.Finding{Path: k8sops.At("dns_service"), Summary: "Cluster DNS Service Does Not Exist",
				Detail: fmt.Sprintf("%q is not a Service in the cluster. Name the cluster DNS Service as namespace/name "+
					"(kubectl get svc -n kube-system -l k8s-app=kube-dns), or leave dns_service unset to find it.", h.Named)})
			return out
		}
		out.Key = h.Named
		return out
	}
	var labelled []string
	for key, svc := range byKey {
		if svc.Namespace == "kube-system" && svc.Labels[DNSServiceLabel] == dnsServiceLabelValue && svc.Labels[k8sops.DNSBridgeLabel] != "true" {
			labelled = append(labelled, key)
		}
	}
	slices.Sort(labelled)
	identified := labelled
	if byKey[DNSServiceKey] != nil {
		identified = append(identified, DNSServiceKey)
	}
	if key, note := byKubeletDNS(byKey, h, identified); key != "" {
		out.Key = key
		return out
	} else if note != "" {
		out.Notes = append(out.Notes, note)
	}
	switch {
	case byKey[DNSServiceKey] != nil:
		out.Key = DNSServiceKey
	case len(labelled) == 1:
		out.Key = labelled[0]
	case len(labelled) > 1:
		out.Errors = append(out.Errors, k8sops.Finding{Path: k8sops.At("dns_service"), Summary: "Cluster DNS Service Is Ambiguous",
			Detail: fmt.Sprintf("kube-system has several Services labelled k8s-app=kube-dns (%s) and nothing tells which one pods "+
				"resolve through%s. Set dns_service to the one the kubelets' clusterDNS names.",
				strings.Join(labelled, ", "), unreadSuffix(h))})
	}
	return out
}

// byKubeletDNS is the Service whose ClusterIP the kubelets' clusterDNS names, or a note why
// clusterDNS does not decide. identified are the Services the label or the name make the
// cluster DNS: where there are any, a Service that is neither they nor a bridge to one does
// not become the cluster DNS by holding the IP clusterDNS names. That is the IP a move planned
// for the DNS Service when another client took it during the apply (the DNS Service got
// another), and the kubelets were set to the planned one.
func byKubeletDNS(byKey map[string]*corev1.Service, h ClusterDNSHints, identified []string) (string, string) {
	for _, s := range h.KubeletClusterDNS {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if ip.IsLinkLocalUnicast() {
			return "", fmt.Sprintf("The kubelets' clusterDNS is %s, a link-local address (NodeLocal DNSCache): pods resolve "+
				"through the node-local cache, which forwards to the cluster DNS Service found by its label.", ip)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			svc := byKey[k]
			if !slices.Contains(k8sops.ClusterIPs(svc), ip) {
				continue
			}
			if svc.Labels[k8sops.DNSBridgeLabel] == "true" {
				if target := svc.Annotations[k8sops.BridgeForAnnotation]; byKey[target] != nil {
					return target, ""
				}
				continue
			}
			if len(identified) > 0 && !slices.Contains(identified, k) {
				return "", fmt.Sprintf("The kubelets' clusterDNS (kube-system/%s) is %s, the IP of %s, which is not labelled "+
					"%s=%s as the cluster DNS Service %s is: pods starting now send their DNS queries to %s. The cluster DNS "+
					"Service was found by its label; set clusterDNS to its IP (dns_service_ips), or set dns_service if %s "+
					"really is the cluster DNS.", KubeletConfigMap, ip, k, DNSServiceLabel, dnsServiceLabelValue,
					strings.Join(identified, ", "), k, k)
			}
			return k, ""
		}
		return "", fmt.Sprintf("The kubelets' clusterDNS (kube-system/%s) is %s, which no Service has: pods cannot resolve "+
			"through it. The cluster DNS Service was found by its label instead.", KubeletConfigMap, ip)
	}
	return "", ""
}

func unreadSuffix(h ClusterDNSHints) string {
	if h.KubeletConfigUnread != "" {
		return " (kube-system/" + KubeletConfigMap + " could not be read: " + h.KubeletConfigUnread + ")"
	}
	return ""
}

// ReadKubeletClusterDNS reads clusterDNS from kubeadm's kube-system/kubelet-config. A cluster
// without it (not kubeadm) gives nil; one the credentials may not read gives the reason.
func ReadKubeletClusterDNS(ctx context.Context, c *k8sops.Client) ([]string, string, error) {
	dns, _, unread, err := readKubeletConfig(ctx, c)
	return dns, unread, err
}

// readKubeletConfig is ReadKubeletClusterDNS with the last time the ConfigMap was written (the
// newest of its managedFields times, else its creation).
func readKubeletConfig(ctx context.Context, c *k8sops.Client) (dns []string, written time.Time, unread string, err error) {
	cm, err := c.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, KubeletConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, written, "", nil
	case apierrors.IsForbidden(err):
		return nil, written, "forbidden: grant get on configmaps in kube-system (examples/rbac)", nil
	case err != nil:
		return nil, written, "", fmt.Errorf("reading kube-system/%s: %w", KubeletConfigMap, err)
	}
	written = cm.CreationTimestamp.Time
	for _, e := range cm.ManagedFields {
		if e.Time != nil && e.Time.After(written) {
			written = e.Time.Time
		}
	}
	dns, err = KubeletClusterDNS(cm)
	if err != nil {
		return nil, written, fmt.Sprintf("its kubelet key is not a KubeletConfiguration: %v", err), nil
	}
	return dns, written, "", nil
}

// KubeletClusterDNS is clusterDNS of kubeadm's kubelet-config ConfigMap.
func KubeletClusterDNS(cm *corev1.ConfigMap) ([]string, error) {
	var kc struct {
		ClusterDNS []string `json:"clusterDNS"`
	}
	err := yaml.Unmarshal([]byte(cm.Data["kubelet"]), &kc)
	return kc.ClusterDNS, err
}
