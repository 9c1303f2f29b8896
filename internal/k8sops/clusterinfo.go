// A summary of the cluster: what it runs and serves, for the k8scidr_cluster_info data source.
package k8sops

import (
	"context"
	"fmt"

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
	// DefaultServiceCIDRs holds the cidrs of the "kubernetes" ServiceCIDR; nil when the cluster
	// serves no ServiceCIDR API or the object does not exist.
	DefaultServiceCIDRs []string
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
	if info.NodeCount, err = countNodes(ctx, c); err != nil {
		return info, err
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
	err := eachItem(ctx, listPages(c.Kube.CoreV1().Nodes().List), func(*corev1.Node) error { n++; return nil })
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
