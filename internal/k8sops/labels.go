// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The labels and annotations the provider puts on the objects it makes, and how every reader recognizes them.
package k8sops

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSBridgeLabel marks the Service that keeps kube-dns's old IP answering during a move.
const DNSBridgeLabel = "k8scidr.io/dns-bridge"

// BridgeForAnnotation on a DNS bridge names the cluster DNS Service it stands in for.
const BridgeForAnnotation = "k8scidr.io/bridge-for"

// Labels of an old-IP bridge: OldIPBridgeLabel marks it, OldIPBridgeForLabel names its
// Service (in the same namespace; the annotation bridgeForAnnotation says namespace/name), and
// JournalGroupLabel the k8scidr_service_recreation that made it.
const (
	OldIPBridgeLabel    = "k8scidr.io/old-ip-bridge"
	OldIPBridgeForLabel = "k8scidr.io/bridge-for-name"
)

// APIServerBridgeLabel marks the Service that keeps default/kubernetes's old IPs answering with
// the apiserver's endpoints, and the keep-range ServiceCIDR that holds those IPs.
const APIServerBridgeLabel = "k8scidr.io/apiserver-bridge"

// PreviousClusterIPsAnnotation on a Service k8scidr_service_recreation recreated lists the
// ClusterIPs it had before (comma-separated, in spec.clusterIPs order): what ip_assignment =
// "previous" moves it back to.
const PreviousClusterIPsAnnotation = "k8scidr.io/previous-cluster-ips"

// MovedAtAnnotation on the cluster DNS Service that k8scidr_service_recreation handed over to
// new IPs (which keeps the object, and so its creationTimestamp) is when it took them, in the
// apiserver's time (RFC 3339): the time pods' resolvers started to lag behind it.
const MovedAtAnnotation = "k8scidr.io/moved-at"

// MovedAt is when svc got its current ClusterIPs: its creation, or its last hand-over if later.
func MovedAt(svc *corev1.Service) time.Time {
	at := svc.CreationTimestamp.UTC()
	if t, err := time.Parse(time.RFC3339, svc.Annotations[MovedAtAnnotation]); err == nil && t.After(at) {
		at = t.UTC()
	}
	return at
}

// StandsInFor reports whether b is a DNS or old-IP bridge of the Service key (namespace/name):
// the Service may take b's IPs back, deleting b. The apiserver's bridge is never one.
func StandsInFor(b *corev1.Service, key string) bool {
	if b.Labels[DNSBridgeLabel] != "true" && b.Labels[OldIPBridgeLabel] != "true" {
		return false
	}
	if f := b.Annotations[BridgeForAnnotation]; f != "" {
		return f == key
	}
	return b.Labels[OldIPBridgeLabel] == "true" && b.Namespace+"/"+b.Labels[OldIPBridgeForLabel] == key
}

// IsBridge reports whether svc is a bridge of any kind (or the apiserver move's carrier, label
// value "carrier"): never moved, and its IPs stay.
func IsBridge(svc *corev1.Service) bool {
	return svc.Labels[DNSBridgeLabel] == "true" || svc.Labels[OldIPBridgeLabel] == "true" || svc.Labels[APIServerBridgeLabel] != ""
}

// EachLabeledService calls each for every Service, in all namespaces, with label set to "true"
// (one paged list).
func EachLabeledService(ctx context.Context, c *Client, label string, each func(*corev1.Service) error) error {
	list := c.Kube.CoreV1().Services("").List
	return EachItem(ctx, ListPages(func(ctx context.Context, o metav1.ListOptions) (*corev1.ServiceList, error) {
		o.LabelSelector = label + "=true"
		return list(ctx, o)
	}), each)
}
