// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Creating a moved Service at its planned IPs, and what the allocator's refusals mean: an IP
// another client took mid-apply (the next free address of the range instead), or a range the
// allocator has not loaded yet.
package recreation

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// create creates svc under field manager manager; when another client took a planned IP
// mid-apply it takes the next free address of the same target range and says so, since the old
// Service is already gone. A full quota is waited for (quotaExceeded), and a stale one until
// it is recounted (awaitQuotaRecount).
func (x *executor) create(ctx context.Context, svc *corev1.Service, key, manager string) (*corev1.Service, error) {
	api := x.c.Kube.CoreV1().Services(svc.Namespace)
	planned := slices.Clone(svc.Spec.ClusterIPs)
	for attempt := 0; ; attempt++ {
		var created *corev1.Service
		try := func() error {
			return k8sops.RetryWrite(ctx, func(again bool) error {
				var err error
				created, err = api.Create(ctx, svc, metav1.CreateOptions{FieldManager: manager})
				if again && (apierrors.IsAlreadyExists(err) || takenIP(err, svc.Spec.ClusterIPs) >= 0) {
					// The earlier attempt may have created it: then it has this name and these IPs.
					cur, getErr := api.Get(ctx, svc.Name, metav1.GetOptions{})
					switch {
					case getErr == nil && slices.Equal(cur.Spec.ClusterIPs, svc.Spec.ClusterIPs):
						created, err = cur, nil
					case getErr != nil && !apierrors.IsNotFound(getErr):
						err = getErr
					}
				}
				return err
			}, rangeNotLoaded, quotaExceeded, quotaConflict)
		}
		err := try()
		for err != nil && quotaExceeded(err) && x.awaitQuotaRecount(ctx, svc, key) {
			err = try()
		}
		if err == nil {
			if !slices.Equal(created.Spec.ClusterIPs, planned) {
				x.note("%s got %v instead of the planned %v: another client took a planned IP during the apply.",
					key, created.Spec.ClusterIPs, planned)
			}
			return created, nil
		}
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%s: another client (a controller?) created it again between our delete and create; "+
				"its journaled copy is kept: compare, then delete the journal entry's Service or let the next apply settle it", key)
		}
		if attempt < 16 && x.freeTakenNodePorts(err, svc, key) {
			continue
		}
		taken := takenIP(err, svc.Spec.ClusterIPs)
		if taken < 0 || attempt >= 16 {
			return nil, fmt.Errorf("%s: creating at %v: %w", key, svc.Spec.ClusterIPs, err)
		}
		ip, _ := netip.ParseAddr(svc.Spec.ClusterIPs[taken])
		next, ok := x.nextFree(ip)
		if !ok {
			return nil, fmt.Errorf("%s: creating at %v: %w; no further address of the target is free of planned IPs", key, planned, err)
		}
		svc.Spec.ClusterIPs[taken] = next.String()
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
}

// createTakingOver creates svc as create does, after deleting the bridges standing in for it
// whose IPs it goes back to (a way back: ip_assignment = "previous"). The Service it replaces
// is deleted already, so a bridge's IP is without a Service only from the bridge's delete to
// this create; a create the allocator still refuses for that IP is tried again for 10 seconds
// (asked by a dry run) before create's replacement by the next free address applies.
func (x *executor) createTakingOver(ctx context.Context, svc *corev1.Service, key, manager string) (*corev1.Service, error) {
	bridges := x.takeOver[key]
	if len(bridges) == 0 {
		return x.create(ctx, svc, key, manager)
	}
	var freed []string
	for _, b := range bridges {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			return x.c.Kube.CoreV1().Services(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &b.UID}})
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("%s: deleting its bridge %s/%s, whose IPs %v it goes back to: %w", key, b.Namespace, b.Name, b.Spec.ClusterIPs, err)
		}
		if err == nil {
			x.log("deleted a bridge whose IPs its Service goes back to", map[string]any{"service": key, "bridge": k8sops.SvcKey(b)})
		}
		freed = append(freed, b.Spec.ClusterIPs...)
	}
	// Asked by a dry run, so that the create itself (and its retries) stays create's.
	api := x.c.Kube.CoreV1().Services(svc.Namespace)
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := api.Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: x.c.FieldManager})
		i := takenIP(err, svc.Spec.ClusterIPs)
		return i < 0 || !slices.Contains(freed, svc.Spec.ClusterIPs[i]), nil // else: not released yet
	})
	return x.create(ctx, svc, key, manager)
}

// nextFree is the next address after ip inside ip's target range, wrapping at its end, that a
// Service can have, no move or restore of this apply is planned to take, and no earlier call
// gave out: it claims it. Without the claim every escort of a run whose new IPs are one block
// would be planned on the same address after it, and each create would walk past the escorts
// made before it (their own IPs, kept until the cluster DNS's answers expire with
// old_ip_bridges = "dns") until it gave up, and the Service moved without one.
func (x *executor) nextFree(ip netip.Addr) (netip.Addr, bool) {
	t, ok := k8sops.TargetFor(x.targets, ip)
	if !ok || !t.Contains(ip) {
		return netip.Addr{}, false
	}
	x.claimedMu.Lock()
	defer x.claimedMu.Unlock()
	for n := ip; ; {
		if n = n.Next(); !n.IsValid() || !t.Contains(n) {
			n = t.Addr() // wrap; the network address itself is unusable and skipped below
		}
		if n == ip {
			return netip.Addr{}, false
		}
		if _, bad := unusableTargetIP(x.targets, n); !bad && !x.planned[n] && !x.claimed[n] {
			if x.claimed == nil {
				x.claimed = map[netip.Addr]bool{}
			}
			x.claimed[n] = true
			return n, true
		}
	}
}

// rangeNotLoaded is the allocator's answer for an IP of a range it does not know (yet): right
// after kube-apiserver starts, until it has read the ServiceCIDRs, a Ready range is refused
// like this for a moment (found by TestAccRestart_midApply). The plan checked that a Ready
// ServiceCIDR serves the target, so the create is retried.
func rangeNotLoaded(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "does not match the current range")
}

// quotaExceeded is a ResourceQuota's refusal. Right after a move's delete the namespace's quota
// may still count the deleted Service: its usage is recalculated by the quota controller, not
// by the delete, so a namespace at its services quota refuses the copy for a moment. The
// create is retried (retryWrite's attempts); a quota another client filled meanwhile fails it,
// and the journal keeps the Service for the next apply.
func quotaExceeded(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// quotaConflict is a create refused because the ResourceQuota admission's own update of the
// namespace's quota usage lost a race with another create's (kube-apiserver gives up after a
// few tries of its own): nothing was written, and the create is tried again.
func quotaConflict(err error) bool {
	return apierrors.IsConflict(err) && strings.Contains(err.Error(), "resourcequotas")
}

// takenIP finds which of ips an "already allocated" error names, or -1. The apiserver names the
// IP in the message ("failed to allocate IP 172.24.0.10: provided IP is already allocated") on
// the field spec.clusterIPs as a whole, so the IP is parsed from there and compared as an
// address: a substring test would take 172.24.0.1 for 172.24.0.10.
func takenIP(err error, ips []string) int {
	if !apierrors.IsInvalid(err) {
		return -1
	}
	for _, m := range allocFailedRE.FindAllStringSubmatch(err.Error(), -1) {
		if !strings.Contains(m[2], "already allocated") {
			continue
		}
		named, perr := netip.ParseAddr(m[1])
		if perr != nil {
			continue
		}
		if i := slices.IndexFunc(ips, func(s string) bool { ip, err := netip.ParseAddr(s); return err == nil && ip == named }); i >= 0 {
			return i
		}
	}
	return -1
}

// freeTakenNodePorts clears each node port of svc that err says another Service holds, so that
// the allocator gives it a free one, says so, and reports whether it cleared any. The old
// Service's ports were released by its delete; another Service that asked for one meanwhile
// (in a move's instant, or in the hours an interrupted apply's restore waited) keeps it, and a
// create with the port would be refused at every apply.
func (x *executor) freeTakenNodePorts(err error, svc *corev1.Service, key string) bool {
	if err == nil {
		return false
	}
	cleared := false
	if apierrors.IsInvalid(err) {
		for _, m := range nodePortTakenRE.FindAllStringSubmatch(err.Error(), -1) {
			i, _ := strconv.Atoi(m[1])
			port, _ := strconv.Atoi(m[2])
			if i >= len(svc.Spec.Ports) || svc.Spec.Ports[i].NodePort != int32(port) {
				continue
			}
			svc.Spec.Ports[i].NodePort = 0
			cleared = true
			x.note("%s: its nodePort %d (port %q) was taken by another Service while it was deleted; it gets a new one "+
				"(kubectl get svc): update whatever reaches it by node port (external load balancers, firewall rules).",
				key, port, svc.Spec.Ports[i].Name)
		}
	}
	// Not a field error: the allocator's plain error, which kube-apiserver answers as an internal one.
	if m := healthCheckTakenRE.FindStringSubmatch(err.Error()); m != nil && m[1] == strconv.Itoa(int(svc.Spec.HealthCheckNodePort)) {
		svc.Spec.HealthCheckNodePort = 0
		cleared = true
		x.note("%s: its healthCheckNodePort %s was taken by another Service while it was deleted; it gets a new one: "+
			"update the load balancer's health check where it is set by hand.", key, m[1])
	}
	return cleared
}

// nodePortTakenRE and healthCheckTakenRE match the allocator's refusals of a node port in use
// (kube-apiserver's pkg/registry/core/service/storage/alloc.go).
var (
	nodePortTakenRE    = regexp.MustCompile(`spec\.ports\[(\d+)\]\.nodePort: Invalid value: (\d+): provided port is already allocated`)
	healthCheckTakenRE = regexp.MustCompile(`failed to allocate requested HealthCheck NodePort (\d+): provided port is already allocated`)
)

var allocFailedRE = regexp.MustCompile(`failed to allocate IP ([0-9A-Fa-f:.]+): ([^;\]]*)`)
