// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// ServiceCIDR objects through whichever API version the cluster serves: find, create, wait, delete.
package servicecidr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// CreateServiceCIDR creates the ServiceCIDR and waits until it is Ready.
func CreateServiceCIDR(ctx context.Context, c *k8sops.Client, name string, cidrs []string) (*k8sops.ServiceCIDR, error) {
	api, caps, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return nil, err
	}
	obj := serviceCIDRObject(caps, name, cidrs)
	if _, err := api.Create(ctx, obj, metav1.CreateOptions{FieldManager: c.FieldManager}); err != nil {
		return nil, fmt.Errorf("creating ServiceCIDR %q: %w", name, err)
	}
	return WaitServiceCIDRReady(ctx, c, name)
}

// serviceCIDRObject is a ServiceCIDR in the served API version.
func serviceCIDRObject(caps k8sops.Capabilities, name string, cidrs []string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": caps.ServiceCIDRVersion,
		"kind":       "ServiceCIDR",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"cidrs": k8sops.ToAny(cidrs)},
	}}
}

// AppendServiceCIDRFamily adds the second IP family's range in place (Kubernetes 1.33+).
func AppendServiceCIDRFamily(ctx context.Context, c *k8sops.Client, name string, cidrs []string) (*k8sops.ServiceCIDR, error) {
	api, _, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return nil, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedStringSlice(obj.Object, cidrs, "spec", "cidrs"); err != nil {
			return err
		}
		_, err = api.Update(ctx, obj, metav1.UpdateOptions{FieldManager: c.FieldManager})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("adding a range to ServiceCIDR %q: %w", name, err)
	}
	return WaitServiceCIDRReady(ctx, c, name)
}

// WaitServiceCIDRReady waits for Ready=True; the controller-manager sets it.
func WaitServiceCIDRReady(ctx context.Context, c *k8sops.Client, name string) (*k8sops.ServiceCIDR, error) {
	api, _, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return nil, err
	}
	var last *k8sops.ServiceCIDR
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		obj, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last, err = k8sops.ServiceCIDRFrom(obj)
		return err == nil && last.Ready, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for ServiceCIDR %q to become Ready (conditions: %s): %w", name, describeConditions(last), err)
	}
	return k8sops.GetServiceCIDR(ctx, c, name)
}

func describeConditions(sc *k8sops.ServiceCIDR) string {
	if sc == nil || len(sc.Conditions) == 0 {
		return "none yet; is kube-controller-manager running?"
	}
	var parts []string
	for _, c := range sc.Conditions {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)))
	}
	return strings.Join(parts, "; ")
}

// DefaultRangeDeletionRisk explains what deleting the default "kubernetes" range does on this
// server that an operator would not expect, or returns "".
func DefaultRangeDeletionRisk(caps k8sops.Capabilities) string {
	if caps.ServerMinor == 33 {
		return "On Kubernetes 1.33 the allocator writes to the --service-cluster-ip-range range first (DisableAllocatorDualWrite " +
			"is off by default): while the default ServiceCIDR is Terminating, every dynamic ClusterIP allocation in the " +
			"cluster fails (\"the provided network does not match the current range\"). Move the apiserver flags first."
	}
	return ""
}

// ErrServiceCIDRHeld means a deleted ServiceCIDR is still held by its finalizer because
// IPAddresses depend on it.
var ErrServiceCIDRHeld = errors.New("ServiceCIDR still held by IP addresses")

// DeleteServiceCIDR deletes the ServiceCIDR as it is now (UID precondition). With waitGone it
// waits until that object is gone — or replaced by a new object of the same name, as the
// apiserver recreates the default range — else only until it is Terminating. A missing object
// is not an error. When the context ends first, the error wraps ErrServiceCIDRHeld and lists
// the IPAddresses still inside.
func DeleteServiceCIDR(ctx context.Context, c *k8sops.Client, name string, waitGone bool) error {
	api, caps, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return err
	}
	obj, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ServiceCIDR %q: %w", name, err)
	}
	uid := obj.GetUID()
	cidrs, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "cidrs")
	err = api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(uid)}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) { // Conflict: the UID precondition failed, ours is gone.
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting ServiceCIDR %q: %w", name, err)
	}
	if !waitGone {
		return nil // The finalizer keeps it Terminating; deletionTimestamp is set once Delete returns.
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		obj, err := api.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && obj.GetUID() != uid, err
	})
	if err == nil || ctx.Err() == nil {
		return err
	}
	// The caller's deadline passed: report what holds the range, with a fresh context.
	listCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ips, listErr := k8sops.IPAddressesIn(listCtx, c, caps, cidrs)
	if listErr != nil {
		return fmt.Errorf("%w: ServiceCIDR %q is Terminating (listing its IP addresses failed: %v)", ErrServiceCIDRHeld, name, listErr)
	}
	return fmt.Errorf("%w: ServiceCIDR %q (%s) is Terminating and cannot be removed while %d IP address(es) depend on it only: %s",
		ErrServiceCIDRHeld, name, strings.Join(cidrs, ", "), len(ips), describeIPs(ips, 20))
}

func describeIPs(ips []k8sops.IPAddressRef, limit int) string {
	var parts []string
	for i, ip := range ips {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(ips)-limit))
			break
		}
		parts = append(parts, ip.IP.String()+" ("+ip.Parent+")")
	}
	return strings.Join(parts, ", ")
}
