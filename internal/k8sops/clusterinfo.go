// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// A summary of the cluster: what it runs and serves, for the k8scidr_cluster_info data source.
package k8sops

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultServiceCIDRName is the ServiceCIDR the apiserver creates from --service-cluster-ip-range.
const DefaultServiceCIDRName = "kubernetes"

// ClusterInfo is what k8scidr_cluster_info reports.
type ClusterInfo struct {
	Capabilities
	// CalicoAPIGroup is the group the provider will use for Calico, "" when none.
	CalicoAPIGroup string
	// CalicoWarning explains why a configured Calico group cannot be used.
	CalicoWarning string
	NodeCount     int
	// ID is the cluster's identity: the UID of its kube-system namespace, which lives as long as
	// the cluster. Server is the API server address the provider reached.
	ID, Server string
	// DefaultServiceCIDRs holds the cidrs of the "kubernetes" ServiceCIDR; nil when the cluster
	// serves no ServiceCIDR API or the object does not exist.
	DefaultServiceCIDRs []string
	// APIServerServiceIPs are default/kubernetes's ClusterIPs, and APIServerServiceCreated its
	// creation: pods started before it have those IPs (or older ones) in KUBERNETES_SERVICE_HOST.
	APIServerServiceIPs     []string
	APIServerServiceCreated time.Time
}

// ReadClusterInfo probes the cluster and counts its nodes.
func ReadClusterInfo(ctx context.Context, c *Client) (ClusterInfo, error) {
	caps, err := c.Capabilities()
	if err != nil {
		return ClusterInfo{}, err
	}
	info := ClusterInfo{Capabilities: caps}
	if info.CalicoAPIGroup, err = caps.CalicoAPIGroup(c.CalicoAPIGroup); err != nil {
		info.CalicoWarning = err.Error()
	}
	info.Server = c.Host
	if info.ID, err = ClusterID(ctx, c); err != nil {
		return info, err
	}
	if info.NodeCount, err = countNodes(ctx, c); err != nil {
		return info, err
	}
	switch svc, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return info, fmt.Errorf("reading default/kubernetes: %w", err)
	default:
		info.APIServerServiceIPs, info.APIServerServiceCreated = svc.Spec.ClusterIPs, svc.CreationTimestamp.UTC()
	}
	if caps.ServiceCIDRVersion != "" {
		if info.DefaultServiceCIDRs, err = serviceCIDRRanges(ctx, c, caps, DefaultServiceCIDRName); err != nil {
			return info, err
		}
	}
	return info, nil
}

func countNodes(ctx context.Context, c *Client) (int, error) {
	n := 0
	err := EachItem(ctx, ListPages(c.Kube.CoreV1().Nodes().List), func(*corev1.Node) error { n++; return nil })
	if err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	return n, nil
}

// serviceCIDRRanges returns spec.cidrs of the named ServiceCIDR, or nil when it does not exist.
func serviceCIDRRanges(ctx context.Context, c *Client, caps Capabilities, name string) ([]string, error) {
	gvr, err := caps.ServiceCIDRResource()
	if err != nil {
		return nil, err
	}
	obj, err := c.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ServiceCIDR %q: %w", name, err)
	}
	cidrs, _, err := unstructured.NestedStringSlice(obj.Object, "spec", "cidrs")
	if err != nil {
		return nil, fmt.Errorf("reading spec.cidrs of ServiceCIDR %q: %w", name, err)
	}
	return cidrs, nil
}

// ClusterID is the UID of the cluster's kube-system namespace: it identifies the cluster
// whatever address or credentials reach it.
func ClusterID(ctx context.Context, c *Client) (string, error) {
	ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading namespace kube-system (the cluster's identity): %w", err)
	}
	return string(ns.UID), nil
}

// WrongClusterError reports a cluster other than the one the configuration names.
type WrongClusterError struct{ Want, Got, Server string }

func (e WrongClusterError) Error() string {
	return fmt.Sprintf("the provider reached the cluster at %s, whose cluster_id (the kube-system namespace's UID) is %s, "+
		"not the configured %s: it reads and writes nothing there. Check the kubeconfig context or host, or correct cluster_id",
		e.Server, e.Got, e.Want)
}

// CheckClusterID confirms that the client reaches the cluster with the given identity.
func CheckClusterID(ctx context.Context, c *Client, want string) error {
	got, err := ClusterID(ctx, c)
	if err != nil {
		return err
	}
	if got != want {
		return WrongClusterError{Want: want, Got: got, Server: c.Host}
	}
	return nil
}
