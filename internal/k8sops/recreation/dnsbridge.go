// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The DNS bridge and EndpointSlice copies: the old cluster DNS IP kept answering while pods
// still use it, and the copies a run makes swept once the controllers serve their Services.
package recreation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// ensureBridge creates the DNS bridge on kube-dns's old IPs, once per run, and when kube-dns's
// EndpointSlices are given, a copy of their endpoints for it: kube-proxy then routes the old IP
// as soon as the bridge exists, not only once kube-controller-manager has written its slice.
func (x *executor) ensureBridge(ctx context.Context, dnsSlices []discoveryv1.EndpointSlice) error {
	b := x.bridge
	if b == nil || x.bridgeUID != "" {
		return nil
	}
	created, found, err := x.createOnFreedIPs(ctx, b)
	if err != nil {
		return fmt.Errorf("kube-dns moved, but the DNS bridge %s/%s on its old IP %v was not created: %w. Pods and kubelets "+
			"still using the old IP cannot resolve: run terraform apply again, or create it by hand", b.Namespace, b.Name, b.Spec.ClusterIPs, err)
	}
	x.bridgeUID = created.UID
	x.mu.Lock()
	x.res.BridgeCreated = b.Namespace + "/" + b.Name
	x.mu.Unlock()
	if found {
		return nil // made by an interrupted apply, and served since
	}
	// Only the families the bridge has: of a dual-stack DNS Service whose other family stays, one.
	dnsSlices = slices.DeleteFunc(slices.Clone(dnsSlices), func(s discoveryv1.EndpointSlice) bool {
		return !slices.Contains(created.Spec.IPFamilies, corev1.IPFamily(s.AddressType))
	})
	x.bridgeMirror, err = x.copySlices(ctx, dnsSlices, created)
	if err != nil {
		x.note("The DNS bridge %s/%s was created, but copying kube-dns's endpoints to it failed (%v): it answers once "+
			"kube-controller-manager writes its EndpointSlice.", b.Namespace, b.Name, err)
	}
	return nil
}

// createOnFreedIPs creates a bridge on the IPs a delete has just freed, or reads it when it
// exists on them (found): the delete releases the IPs, and the allocator may lag behind it for a
// moment. A bridge that exists already (an interrupted apply made it) holds the IPs itself,
// and the apiserver checks the IPs before the name: its create is refused as "provided IP is
// already allocated", never as AlreadyExists, so a taken IP is first checked against it. A
// full quota is waited for as create waits for it (quotaExceeded, awaitQuotaRecount).
func (x *executor) createOnFreedIPs(ctx context.Context, b *corev1.Service) (svc *corev1.Service, found bool, err error) {
	api := x.c.Kube.CoreV1().Services(b.Namespace)
	looked := false // for the bridge itself, once: while the allocator lags, every create is refused
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			var err error
			svc, err = api.Create(ctx, b, metav1.CreateOptions{FieldManager: x.c.FieldManager})
			if apierrors.IsAlreadyExists(err) || (!looked && err != nil && takenIP(err, b.Spec.ClusterIPs) >= 0) {
				cur, getErr := api.Get(ctx, b.Name, metav1.GetOptions{})
				looked = getErr == nil || apierrors.IsNotFound(getErr)
				switch {
				case getErr == nil && holdsAll(cur, b.Spec.ClusterIPs):
					svc, found, err = cur, true, nil
				case getErr == nil && apierrors.IsAlreadyExists(err):
					// Never taken for this bridge: a bridge of an earlier migration keeps other IPs.
					err = fmt.Errorf("%s/%s exists on %v, not on %v: %w", b.Namespace, b.Name, cur.Spec.ClusterIPs, b.Spec.ClusterIPs, err)
				case getErr != nil && !apierrors.IsNotFound(getErr):
					err = getErr
				}
			}
			return err
		}, quotaExceeded, quotaConflict)
		if err != nil && takenIP(err, b.Spec.ClusterIPs) >= 0 {
			return false, nil // still held by the deleted Service: the allocator lags
		}
		return err == nil, err
	})
	if err != nil && quotaExceeded(err) && x.awaitQuotaRecount(ctx, b, k8sops.SvcKey(b)) {
		return x.createOnFreedIPs(ctx, b) // a stale quota, recounted
	}
	return svc, found, err
}

// holdsAll reports whether svc holds every one of ips.
func holdsAll(svc *corev1.Service, ips []string) bool {
	return !slices.ContainsFunc(ips, func(ip string) bool { return !slices.Contains(svc.Spec.ClusterIPs, ip) })
}

// copyManager is the managed-by value of EndpointSlices copied for a new Service until its
// controller writes its own; the EndpointSlice controllers leave slices managed by others
// alone, and kube-proxy merges all slices of a Service.
const copyManager = "k8scidr.io"

// sliceCopy is the i-th copy of s for owner. A copy of a slice the EndpointSlice controller
// wrote, for an owner with a selector, is written as that controller writes its own (its
// managed-by label, the owner's labels, a controller reference to the owner): the controller
// lists it as one of the owner's slices, finds it up to date and keeps it in step with the pods
// from then on, so the copy is never deleted and the controller writes none of its own
// (k8s.io/endpointslice reconciler.go: existing slices owned by the Service, compared by
// endpoints and labels). Other copies are managed by copyManager until a controller serves
// the owner; adopted says which.
func sliceCopy(s *discoveryv1.EndpointSlice, owner *corev1.Service, i int) (cp *discoveryv1.EndpointSlice, adopted bool) {
	cp = &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-k8scidr-%d", owner.Name, i), Namespace: owner.Namespace,
			Labels:          map[string]string{discoveryv1.LabelServiceName: owner.Name, discoveryv1.LabelManagedBy: copyManager},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: owner.Name, UID: owner.UID}},
		},
		AddressType: s.AddressType,
		Endpoints:   slices.Clone(s.Endpoints),
		Ports:       slices.Clone(s.Ports),
	}
	if len(owner.Spec.Selector) == 0 || s.Labels[discoveryv1.LabelManagedBy] != sliceControllerName || owner.Spec.ClusterIP == corev1.ClusterIPNone {
		return cp, false
	}
	for k, v := range owner.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != corev1.IsHeadlessService {
			cp.Labels[k] = v
		}
	}
	cp.Labels[discoveryv1.LabelManagedBy] = sliceControllerName
	cp.OwnerReferences[0].Controller = ptr.To(true)
	return cp, true
}

// copySlices gives svc copies of its previous incarnation's EndpointSlices, so kube-proxy can
// route it before a controller has written its own; it returns the names of the copies to
// delete once a controller serves svc (those it does not adopt, sliceCopy).
func (x *executor) copySlices(ctx context.Context, from []discoveryv1.EndpointSlice, svc *corev1.Service) ([]string, error) {
	var names []string
	for i := range from {
		c, adopted := sliceCopy(&from[i], svc, i)
		err := k8sops.RetryWrite(ctx, func(bool) error {
			_, err := x.c.Kube.DiscoveryV1().EndpointSlices(c.Namespace).Create(ctx, c, metav1.CreateOptions{FieldManager: x.c.FieldManager})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return names, err
		}
		if !adopted {
			names = append(names, c.Name)
		}
	}
	return names, nil
}

// deleteSlices deletes copied EndpointSlices once they are no longer needed.
func (x *executor) deleteSlices(ctx context.Context, namespace string, names []string) {
	for _, name := range names {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			return x.c.Kube.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			x.note("Deleting the copied EndpointSlice %s/%s failed (%v): delete it by hand.", namespace, name, err)
		}
	}
}

// currentSlices are the EndpointSlices the watch holds for a Service now.
func (x *executor) currentSlices(key string) []discoveryv1.EndpointSlice {
	return slices.DeleteFunc(x.watchedSlices(key), func(s discoveryv1.EndpointSlice) bool {
		return readyEndpoints([]discoveryv1.EndpointSlice{s}) == 0
	})
}

// sweepWait bounds how long a successful run waits, in all, for the EndpointSlice controllers
// to serve the Services that still have copies, so that it can delete them.
const sweepWait = 30 * time.Second

// sweepCopies deletes the EndpointSlice copies this run or an earlier one (failed, or killed,
// before retiring them) made, once they are stale: their Service is gone or was replaced, or
// the EndpointSlice controllers serve it themselves. It waits up to patience, in all, for the
// controllers to serve the Services whose copies are still needed; those left stay, with a note,
// and the next apply sweeps them.
func (x *executor) sweepCopies(ctx context.Context, patience time.Duration) {
	api := x.c.Kube.DiscoveryV1().EndpointSlices("")
	var copies []discoveryv1.EndpointSlice
	err := k8sops.EachItem(ctx, k8sops.ListPages(func(ctx context.Context, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
		o.LabelSelector = discoveryv1.LabelManagedBy + "=" + copyManager
		return api.List(ctx, o)
	}), func(s *discoveryv1.EndpointSlice) error {
		copies = append(copies, *s)
		return nil
	})
	if err != nil {
		x.note("Listing EndpointSlice copies left by an earlier run failed (%v): they are swept by the next apply.", err)
		return
	}
	deadline := time.Now().Add(patience)
	var kept []string
	for _, cp := range copies {
		name := cp.Labels[discoveryv1.LabelServiceName]
		stale, err := x.copyStale(ctx, &cp, name)
		if left := time.Until(deadline); !stale && err == nil && left > 0 {
			err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, left, false, func(ctx context.Context) (bool, error) {
				var checkErr error
				stale, checkErr = x.copyStale(ctx, &cp, name)
				return stale, checkErr
			})
		}
		if !stale {
			if err != nil && !wait.Interrupted(err) {
				x.note("Checking the EndpointSlice copy %s/%s failed (%v): the next apply sweeps it.", cp.Namespace, cp.Name, err)
			}
			kept = append(kept, cp.Namespace+"/"+cp.Name)
			continue
		}
		x.deleteSlices(ctx, cp.Namespace, []string{cp.Name})
		x.log("swept an EndpointSlice copy", map[string]any{"slice": cp.Namespace + "/" + cp.Name})
	}
	if len(kept) > 0 && patience > 0 {
		x.note("EndpointSlice copies %s are kept: kube-controller-manager does not serve their Services yet, and they "+
			"do until it does. The next apply removes them.", strings.Join(kept, ", "))
	}
}

// copyStale reports whether the EndpointSlice copy cp of Service name is no longer needed.
// What the run's EndpointSlice watch shows answers without a request when a controller serves
// the Service the copy was made for; the API is read otherwise.
func (x *executor) copyStale(ctx context.Context, cp *discoveryv1.EndpointSlice, name string) (bool, error) {
	if x.sliceIndex != nil && slices.ContainsFunc(x.currentSlices(cp.Namespace+"/"+name), func(s discoveryv1.EndpointSlice) bool {
		return servesFor(&s, cp.OwnerReferences)
	}) {
		return true, nil
	}
	svc, err := x.c.Kube.CoreV1().Services(cp.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	case !ownedBy(cp.OwnerReferences, svc.UID):
		return true, nil
	}
	own, err := x.c.Kube.DiscoveryV1().EndpointSlices(cp.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return false, err
	}
	owner := []metav1.OwnerReference{{UID: svc.UID}}
	return slices.ContainsFunc(own.Items, func(s discoveryv1.EndpointSlice) bool { return servesFor(&s, owner) }), nil
}

// servesFor reports whether s is a controller's slice with a ready endpoint for the Service
// that owns a copy with owners: the EndpointSlice controller's slices are owned by the Service,
// mirrored ones by its Endpoints object.
func servesFor(s *discoveryv1.EndpointSlice, owners []metav1.OwnerReference) bool {
	switch s.Labels[discoveryv1.LabelManagedBy] {
	case sliceControllerName:
		return slices.ContainsFunc(owners, func(r metav1.OwnerReference) bool { return ownedBy(s.OwnerReferences, r.UID) }) &&
			readyEndpoints([]discoveryv1.EndpointSlice{*s}) > 0
	case mirrorControllerName:
		return readyEndpoints([]discoveryv1.EndpointSlice{*s}) > 0
	}
	return false
}

// retireBridgeMirror deletes the copied endpoints once the EndpointSlice controller serves the
// bridge itself: a copy would go stale as CoreDNS pods are replaced.
func (x *executor) retireBridgeMirror(ctx context.Context) {
	if len(x.bridgeMirror) == 0 {
		return
	}
	b := x.bridge
	if !x.waitSlice(ctx, b.Namespace+"/"+b.Name, x.bridgeUID, sliceControllerName) {
		x.note("The DNS bridge keeps a copy of kube-dns's endpoints (EndpointSlices %s in %s) because kube-controller-manager "+
			"wrote none for it: delete them once it does, since they do not follow CoreDNS pods.", strings.Join(x.bridgeMirror, ", "), b.Namespace)
		return
	}
	x.deleteSlices(ctx, b.Namespace, x.bridgeMirror)
}
