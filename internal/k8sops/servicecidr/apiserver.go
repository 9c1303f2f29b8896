// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The apiserver's own Service, default/kubernetes, moved into the range kube-apiserver now
// serves, with a bridge on its old IPs for the pods that still use them.
//
// kube-apiserver never moves default/kubernetes itself: it creates the Service on the first
// address of its primary --service-cluster-ip-range only when it is missing, and leaves an
// existing one alone (research/apiserver-service-move.md). Every pod started before the move
// has KUBERNETES_SERVICE_HOST = the old IP, and its in-cluster client goes there; so the old IPs
// keep a selector-less bridge Service whose EndpointSlice copies the apiserver's endpoints, until
// no such pod runs. The old IPs stay allocatable in a keep-range ServiceCIDR made before the
// delete; its annotation records them, so an apply that dies between the delete and the bridge
// is finished by the next one.
package servicecidr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// The apiserver's Service and the names of what the move makes.
const (
	APIServerNamespace   = "default"
	APIServerServiceName = "kubernetes"
	apiServerBridgeBase  = "kubernetes-old-"
	// apiServerCarrierName is the Service that serves default/kubernetes's old and new IPs, as
	// external IPs, while it moves (label APIServerBridgeLabel=carrier).
	apiServerCarrierName = "kubernetes-moving"
	// APIServerOldIPsAnnotation on a keep-range records default/kubernetes's old IPs.
	APIServerOldIPsAnnotation = "k8scidr.io/apiserver-old-ips"
	// apiServerSliceManager keeps the bridge's EndpointSlice apart from the recreation's copies,
	// which are swept once a controller serves their Service.
	apiServerSliceManager = "k8scidr.io-apiserver-bridge"
)

// APIServerMove is what k8scidr_apiserver_service asks for.
type APIServerMove struct {
	// ServiceCIDRs is kube-apiserver's --service-cluster-ip-range now (one per family).
	ServiceCIDRs []string
	// Bridge keeps the old IPs answering; false removes the bridge.
	Bridge bool
	// ForceBridgeRemoval removes the bridge even while pods started before the move run.
	ForceBridgeRemoval bool
	// RetireDefaultRange deletes the default "kubernetes" ServiceCIDR while it still has the old
	// ranges, so the apiserver recreates it from its flags.
	RetireDefaultRange bool
	// OldIPs are the old IPs known from an earlier apply; nil: read from the cluster.
	OldIPs []string
	// ProxySync is how long after a Service change kube-proxy has it programmed on every node
	// (its --min-sync-period and a sync); 0: k8sops.DefaultProxySync. The carrier waits it.
	ProxySync time.Duration
}

// APIServerState is where the move stands in the cluster.
type APIServerState struct {
	NewIPs     []string // the first address of each range: where the apiserver puts its Service
	OldIPs     []string // where default/kubernetes was before the move (none: never elsewhere)
	ServiceIPs []string // default/kubernetes's IPs now (none: missing)
	// MovedAt is default/kubernetes's creation, once it is at NewIPs.
	MovedAt time.Time
	// Bridge is the bridge Service ("" when there is none), its IPs, creation and endpoints.
	Bridge          string
	BridgeIPs       []string
	BridgeCreated   time.Time
	BridgeEndpoints []string
	// Endpoints are the apiserver's endpoints now ("ip:port", sorted).
	Endpoints []string
	// KeepCIDRs are the keep-range ServiceCIDRs the move made ("name=cidr").
	KeepCIDRs []string
	// DefaultRange is the default ServiceCIDR's ranges now; RetireBlocked says why the old ones
	// cannot be retired yet. DefaultTerminating: it is deleted, held by its finalizer;
	// BridgedIPs: how many of its IPs only old-IP bridges hold, which keep it Terminating (no
	// new allocations, their IPs kept) until they go, and kube-apiserver recreates it then.
	DefaultRange       []string
	RetireBlocked      string
	DefaultTerminating bool
	BridgedIPs         int

	ports []corev1.ServicePort // default/kubernetes's, for the bridge
}

// Moved reports whether default/kubernetes is at the new IPs.
func (s APIServerState) Moved() bool {
	return len(s.ServiceIPs) > 0 && slices.Equal(s.ServiceIPs, s.NewIPs)
}

// InSync reports whether the cluster is as m asks: the Service moved; the bridge there, with
// the apiserver's endpoints as they are now, or gone with its keep-ranges; and the default range
// retired, unless something still holds it.
func (s APIServerState) InSync(m APIServerMove) bool {
	if !s.Moved() {
		return false
	}
	bridged := s.Bridge == "" && len(s.KeepCIDRs) == 0
	if m.Bridge && len(s.OldIPs) > 0 {
		bridged = s.Bridge != "" && slices.Equal(s.BridgeEndpoints, s.Endpoints)
	}
	return bridged && s.retired(m)
}

// retired reports whether the default range is as m asks: recreated on m's ranges, or deleted
// and held only by old-IP bridges, or not to be retired (not asked, or blocked: said at plan).
func (s APIServerState) retired(m APIServerMove) bool {
	return !m.RetireDefaultRange || s.RetireBlocked != "" || len(s.DefaultRange) == 0 || sameSet(s.DefaultRange, m.ServiceCIDRs) ||
		s.DefaultTerminating && s.BridgedIPs > 0
}

// APIServerNewIPs are the IPs kube-apiserver gives default/kubernetes on ranges: the first
// address after the network address of the first (primary) range, single-stack, as its
// kubernetesservice controller creates it whatever the number of families
// (pkg/controlplane/controller/kubernetesservice): a dual-stack Service there would be one
// kube-apiserver never makes. Every range must hold such an address; errors name the range.
func APIServerNewIPs(ranges []string) ([]string, error) {
	var out []string
	for i, r := range ranges {
		p, err := k8sops.ParseCIDR(r)
		if err != nil {
			return nil, err
		}
		first := p.Masked().Addr().Next()
		if !k8sops.Allocatable(p, first) {
			return nil, fmt.Errorf("%s holds no address for the apiserver's Service", p)
		}
		if i == 0 {
			out = append(out, first.String())
		}
	}
	return out, nil
}

// ReadAPIServerMove reads where the move stands.
func ReadAPIServerMove(ctx context.Context, c *k8sops.Client, m APIServerMove) (APIServerState, error) {
	var s APIServerState
	var err error
	if s.NewIPs, err = APIServerNewIPs(m.ServiceCIDRs); err != nil {
		return s, err
	}
	svc, err := c.Kube.CoreV1().Services(APIServerNamespace).Get(ctx, APIServerServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return s, fmt.Errorf("reading default/kubernetes: %w", err)
	default:
		s.ServiceIPs, s.ports = svc.Spec.ClusterIPs, svc.Spec.Ports
		if s.Moved() {
			s.MovedAt = svc.CreationTimestamp.UTC()
		}
	}
	keeps, err := apiServerKeepRanges(ctx, c)
	if err != nil {
		return s, err
	}
	s.OldIPs = m.OldIPs
	for _, k := range keeps {
		s.KeepCIDRs = append(s.KeepCIDRs, k.name+"="+k.cidr)
		if s.OldIPs == nil {
			s.OldIPs = k.oldIPs
		}
	}
	if s.OldIPs == nil && !s.Moved() {
		s.OldIPs = s.ServiceIPs
	}
	if s.Endpoints, _, err = apiServerEndpoints(ctx, c); err != nil {
		return s, err
	}
	bridges, err := c.Kube.CoreV1().Services(APIServerNamespace).List(ctx, metav1.ListOptions{LabelSelector: k8sops.APIServerBridgeLabel + "=true"})
	if err != nil {
		return s, fmt.Errorf("listing the apiserver bridge: %w", err)
	}
	for _, b := range bridges.Items {
		s.Bridge, s.BridgeIPs, s.BridgeCreated = b.Name, b.Spec.ClusterIPs, b.CreationTimestamp.UTC()
		if s.BridgeEndpoints, err = bridgeEndpoints(ctx, c, b.Name); err != nil {
			return s, err
		}
	}
	def, err := k8sops.GetServiceCIDR(ctx, c, k8sops.DefaultServiceCIDRName)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return s, err
	default:
		s.DefaultRange, s.DefaultTerminating = def.CIDRs, def.Terminating
	}
	if m.RetireDefaultRange && len(s.DefaultRange) > 0 && !sameSet(s.DefaultRange, m.ServiceCIDRs) {
		if s.RetireBlocked, s.BridgedIPs, err = retireBlocked(ctx, c, s.DefaultRange); err != nil {
			return s, err
		}
	}
	return s, nil
}

// MoveAPIServerService brings the cluster to m, step by step, each step safe to repeat:
// keep-ranges for the old IPs, default/kubernetes deleted and recreated at the new IPs with the
// bridge taking the old ones in between, the bridge's endpoints copied from the apiserver's,
// the bridge removed when m says so, and the old default range retired. It returns notes for
// what it left and why.
func MoveAPIServerService(ctx context.Context, c *k8sops.Client, m APIServerMove) (APIServerState, []string, error) {
	s, err := ReadAPIServerMove(ctx, c, m)
	if err != nil {
		return s, nil, err
	}
	var notes []string
	if !s.Moved() {
		if err := checkNewIPsServed(ctx, c, s.NewIPs); err != nil {
			return s, nil, err
		}
		if len(s.ServiceIPs) == 0 {
			// Deleted by an apply that stopped before recreating it (kube-apiserver would, within
			// about 10 s): the bridge first, if this move made one, then the Service, made
			// whatever became of the bridge.
			var bridgeErr error
			if m.Bridge && len(s.OldIPs) > 0 {
				bridgeErr = ensureBridgeAndRange(ctx, c, &s)
			}
			if err := errors.Join(createAPIServerService(ctx, c, m, &s, nil), bridgeErr); err != nil {
				return s, nil, err
			}
		} else {
			for _, check := range []func() (string, error){
				func() (string, error) { return CheckAPIServerFlags(ctx, c, m.ServiceCIDRs) },
				func() (string, error) { return CheckServingCertificate(ctx, c, s.ServiceIPs, s.NewIPs) },
			} {
				note, err := check()
				if err != nil {
					return s, nil, err
				}
				if note != "" {
					notes = append(notes, note)
				}
			}
			note, err := moveAPIServerService(ctx, c, m, &s)
			if note != "" {
				notes = append(notes, note)
			}
			if err != nil {
				return s, notes, err
			}
		}
	}
	switch {
	case m.Bridge && len(s.OldIPs) > 0:
		if err := ensureBridgeAndRange(ctx, c, &s); err != nil {
			return s, nil, err
		}
		if err := dropAPIServerCarrier(ctx, c, m.proxySync()); err != nil {
			return s, nil, err
		}
	case !m.Bridge && (s.Bridge != "" || len(s.KeepCIDRs) > 0):
		if !m.ForceBridgeRemoval && s.Bridge != "" {
			findings, _, err := CheckAPIServerBridgeRemoval(ctx, c, s)
			if err != nil {
				return s, nil, err
			}
			if len(findings) > 0 {
				return s, nil, findings[0]
			}
		}
		if err := removeAPIServerBridge(ctx, c, &s); err != nil {
			return s, nil, err
		}
	}
	if m.RetireDefaultRange {
		note, err := retireDefaultRange(ctx, c, m, &s)
		if err != nil {
			return s, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	return s, notes, nil
}

// checkNewIPsServed refuses the move unless a Ready ServiceCIDR can allocate each new IP.
func checkNewIPsServed(ctx context.Context, c *k8sops.Client, ips []string) error {
	ranges, err := k8sops.ListServiceCIDRs(ctx, c)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if !k8sops.ReadyHolds(ranges, netip.MustParseAddr(ip)) {
			return fmt.Errorf("no Ready ServiceCIDR holds %s, default/kubernetes's new IP: create the new Service range "+
				"(k8scidr_service_cidr) first, and restart kube-apiserver with --service-cluster-ip-range on it", ip)
		}
	}
	return nil
}

// moveAPIServerService deletes default/kubernetes and recreates it at the new IPs; with the
// bridge, the old IPs are held first by a keep-range and taken by the bridge right after the delete.
func moveAPIServerService(ctx context.Context, c *k8sops.Client, m APIServerMove, s *APIServerState) (note string, err error) {
	api := c.Kube.CoreV1().Services(APIServerNamespace)
	old, err := api.Get(ctx, APIServerServiceName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading default/kubernetes: %w", err)
	}
	s.OldIPs, s.ports = slices.Clone(old.Spec.ClusterIPs), old.Spec.Ports
	if m.Bridge {
		if err := admitBridge(ctx, c, apiServerBridgeName(s.OldIPs), s.OldIPs, s.ports); err != nil {
			return "", err
		}
		if err := ensureKeepRanges(ctx, c, s); err != nil {
			return "", err
		}
		if note, err = carryAPIServerIPs(ctx, c, m, s); err != nil {
			return "", err
		}
	}
	err = k8sops.RetryWrite(ctx, func(bool) error {
		err := api.Delete(ctx, APIServerServiceName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(old.UID)}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) { // gone, or already replaced
			return nil
		}
		return err
	})
	if err != nil {
		return note, fmt.Errorf("deleting default/kubernetes: %w", err)
	}
	// default/kubernetes is recreated whatever became of the bridge: pods that use the new IP or
	// the name must not wait for the bridge's fix. A bridge the dry run admitted but the create
	// refused (a policy that lets dry runs through, a quota filled meanwhile) is said after it,
	// and the next apply makes it (ensureBridgeAndRange).
	var bridgeErr error
	if m.Bridge {
		if bridgeErr = ensureAPIServerBridge(ctx, c, s); bridgeErr != nil {
			bridgeErr = fmt.Errorf("default/kubernetes was moved, but its old IPs have no bridge: %w; apply again once the "+
				"apiserver admits it (pods started before the move reach the API through it)", bridgeErr)
		}
	}
	if err := errors.Join(createAPIServerService(ctx, c, m, s, old), bridgeErr); err != nil {
		return note, err
	}
	return note, dropAPIServerCarrier(ctx, c, m.proxySync())
}

func (m APIServerMove) proxySync() time.Duration {
	if m.ProxySync > 0 {
		return m.ProxySync
	}
	return k8sops.DefaultProxySync
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// carryAPIServerIPs makes the carrier, before default/kubernetes is deleted: a selector-less
// Service (its ClusterIP any free one) with default/kubernetes's old and new IPs as external
// IPs and a copy of the apiserver's endpoints, and waits for kube-proxy to program it. So the
// old IPs stay served from the delete until kube-proxy has the bridge on them, and the new IPs
// are served before any client learns them (the API shows default/kubernetes there, kubelets
// put them in new pods' KUBERNETES_SERVICE_HOST): kube-proxy rewrites its rules at most once
// per --min-sync-period, so without it both are refused for up to a sync. A cluster whose
// admission refuses external IPs (DenyServiceExternalIPs, a policy) gets the move without it,
// and a note ("" when carried).
func carryAPIServerIPs(ctx context.Context, c *k8sops.Client, m APIServerMove, s *APIServerState) (string, error) {
	api := c.Kube.CoreV1().Services(APIServerNamespace)
	// The bridge's shape, on a ClusterIP the allocator picks: the old and new IPs are external.
	want := bridgeService(apiServerCarrierName, s.OldIPs, s.ports)
	want.Labels[k8sops.APIServerBridgeLabel] = "carrier"
	want.Annotations["k8scidr.io/description"] = "Serves default/kubernetes's old and new IPs while it moves; removed by the move."
	want.Spec.ClusterIP, want.Spec.ClusterIPs, want.Spec.IPFamilyPolicy = "", nil, nil
	want.Spec.ExternalIPs = append(slices.Clone(s.OldIPs), s.NewIPs...)
	carrier, err := api.Create(ctx, want, metav1.CreateOptions{FieldManager: c.FieldManager})
	switch {
	case apierrors.IsAlreadyExists(err): // an apply cut off after making it
		carrier, err = api.Get(ctx, apiServerCarrierName, metav1.GetOptions{})
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return "default/kubernetes moved without a carrier on its old and new IPs (" + err.Error() + "): clients may have " +
			"been refused for up to a kube-proxy sync around the move.", nil
	}
	if err != nil {
		return "", fmt.Errorf("creating the carrier default/%s: %w", apiServerCarrierName, err)
	}
	if err := copyAPIServerSlices(ctx, c, carrier); err != nil {
		return "", err
	}
	return "", sleepCtx(ctx, m.proxySync())
}

// dropAPIServerCarrier deletes the carrier, also one a cut-off apply left, once kube-proxy has
// had sync to program the bridge on the old IPs and default/kubernetes on the new ones; and its
// slices.
func dropAPIServerCarrier(ctx context.Context, c *k8sops.Client, sync time.Duration) error {
	api := c.Kube.CoreV1().Services(APIServerNamespace)
	carrier, err := api.Get(ctx, apiServerCarrierName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the carrier default/%s: %w", apiServerCarrierName, err)
	}
	if err := sleepCtx(ctx, sync); err != nil {
		return err
	}
	err = api.Delete(ctx, apiServerCarrierName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(carrier.UID)}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the carrier default/%s: %w", apiServerCarrierName, err)
	}
	if err := deleteSlicesOf(ctx, c, apiServerCarrierName); err != nil {
		return fmt.Errorf("deleting the carrier's EndpointSlices: %w", err)
	}
	return nil
}

// deleteSlicesOf deletes the EndpointSlices of Service default/name, found by listing (the apply
// role may list and delete them, not delete a collection).
func deleteSlicesOf(ctx context.Context, c *k8sops.Client, name string) error {
	api := c.Kube.DiscoveryV1().EndpointSlices(APIServerNamespace)
	return k8sops.RetryWrite(ctx, func(bool) error {
		list, err := api.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return err
		}
		for _, sl := range list.Items {
			if err := api.Delete(ctx, sl.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// createAPIServerService creates default/kubernetes at the new IPs as it was (old), or, when an
// interrupted apply left it deleted, as kube-apiserver makes it: its labels, port 443 named https
// to the port of its endpoints.
func createAPIServerService(ctx context.Context, c *k8sops.Client, m APIServerMove, s *APIServerState, old *corev1.Service) error {
	api := c.Kube.CoreV1().Services(APIServerNamespace)
	if old == nil {
		old = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443}},
				SessionAffinity: corev1.ServiceAffinityNone}}
		if _, srcs, err := apiServerEndpoints(ctx, c); err == nil && len(srcs) > 0 && len(srcs[0].Ports) > 0 && srcs[0].Ports[0].Port != nil {
			old.Spec.Ports[0].TargetPort = intstr.FromInt32(*srcs[0].Ports[0].Port)
		}
	}
	fresh := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: APIServerServiceName, Namespace: APIServerNamespace, Labels: old.Labels},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: s.NewIPs[0], ClusterIPs: s.NewIPs,
			IPFamilyPolicy: familyPolicy(s.NewIPs), Ports: old.Spec.Ports, SessionAffinity: old.Spec.SessionAffinity},
	}
	var got *corev1.Service
	err := k8sops.RetryWrite(ctx, func(bool) error {
		var err error
		got, err = api.Create(ctx, fresh, metav1.CreateOptions{FieldManager: c.FieldManager})
		if apierrors.IsAlreadyExists(err) || ipTaken(err) {
			// kube-apiserver was quicker: its Service, or (refused as an IP already allocated)
			// its allocation of the IP for a Service not yet stored, which is tried again.
			found, getErr := api.Get(ctx, APIServerServiceName, metav1.GetOptions{})
			switch {
			case getErr == nil:
				got, err = found, nil
			case !apierrors.IsNotFound(getErr):
				err = getErr
			}
		}
		return err
	}, ipTaken)
	if err != nil {
		return fmt.Errorf("creating default/kubernetes at %s: %w (kube-apiserver recreates it within seconds)", strings.Join(s.NewIPs, ", "), err)
	}
	s.ServiceIPs = got.Spec.ClusterIPs
	if !s.Moved() {
		return fmt.Errorf("default/kubernetes came back at %s, not %s: a kube-apiserver still serves the old range. "+
			"Finish restarting every kube-apiserver with --service-cluster-ip-range=%s, then apply again",
			strings.Join(s.ServiceIPs, ", "), strings.Join(s.NewIPs, ", "), strings.Join(m.ServiceCIDRs, ","))
	}
	s.MovedAt = got.CreationTimestamp.UTC()
	return nil
}

// keepRange is a keep-range ServiceCIDR of the move, with the old IPs it records.
type keepRange struct {
	name, cidr string
	oldIPs     []string
}

func apiServerKeepRanges(ctx context.Context, c *k8sops.Client) ([]keepRange, error) {
	api, _, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return nil, err
	}
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: k8sops.APIServerBridgeLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("listing the apiserver bridge's keep-ranges: %w", err)
	}
	var out []keepRange
	for i := range list.Items {
		sc, err := k8sops.ServiceCIDRFrom(&list.Items[i])
		if err != nil {
			return nil, err
		}
		if sc.Terminating {
			continue // on its way out with the bridge
		}
		var ips []string
		if a := list.Items[i].GetAnnotations()[APIServerOldIPsAnnotation]; a != "" {
			ips = strings.Split(a, ",")
		}
		out = append(out, keepRange{name: sc.Name, cidr: strings.Join(sc.CIDRs, ","), oldIPs: ips})
	}
	slices.SortFunc(out, func(a, b keepRange) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// ensureKeepRanges makes a Ready keep-range for each old IP that no Ready ServiceCIDR but the
// default one holds (the default range is retired next), recording the old IPs on it.
func ensureKeepRanges(ctx context.Context, c *k8sops.Client, s *APIServerState) error {
	ranges, err := k8sops.ListServiceCIDRs(ctx, c)
	if err != nil {
		return err
	}
	others := slices.DeleteFunc(ranges, func(r k8sops.ServiceCIDR) bool { return r.Name == k8sops.DefaultServiceCIDRName })
	api, caps, err := k8sops.ServiceCIDRAPI(c)
	if err != nil {
		return err
	}
	for _, ip := range s.OldIPs {
		addr := netip.MustParseAddr(ip)
		if k8sops.ReadyHolds(others, addr) {
			continue
		}
		p, err := k8sops.CoveringPrefix([]netip.Addr{addr})
		if err != nil {
			return err
		}
		name := apiServerBridgeBase + dashed(p.String())
		obj := serviceCIDRObject(caps, name, []string{p.String()})
		obj.SetLabels(map[string]string{k8sops.APIServerBridgeLabel: "true", "app.kubernetes.io/managed-by": "k8scidr"})
		obj.SetAnnotations(map[string]string{APIServerOldIPsAnnotation: strings.Join(s.OldIPs, ","),
			"k8scidr.io/description": "Keeps default/kubernetes's old IP allocatable for the apiserver bridge."})
		err = k8sops.RetryWrite(ctx, func(bool) error {
			_, err := api.Create(ctx, obj, metav1.CreateOptions{FieldManager: c.FieldManager})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("creating the keep-range %s for %s: %w", p, ip, err)
		}
		if _, err := WaitServiceCIDRReady(ctx, c, name); err != nil {
			return err
		}
		if k := name + "=" + p.String(); !slices.Contains(s.KeepCIDRs, k) {
			s.KeepCIDRs = append(s.KeepCIDRs, k)
		}
	}
	return nil
}

// ensureBridgeAndRange makes the keep-range and the bridge, as a later apply needs after one that
// stopped halfway, or after bridge = true again.
func ensureBridgeAndRange(ctx context.Context, c *k8sops.Client, s *APIServerState) error {
	if err := ensureKeepRanges(ctx, c, s); err != nil {
		return err
	}
	return ensureAPIServerBridge(ctx, c, s)
}

// apiServerBridgeName is the bridge Service's name for old IPs.
func apiServerBridgeName(oldIPs []string) string { return apiServerBridgeBase + dashed(oldIPs[0]) }

func dashed(s string) string { return strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(s) }

// ensureAPIServerBridge makes the bridge Service on the old IPs, with the apiserver's ports, and
// its EndpointSlices as copies of the apiserver's current ones.
func ensureAPIServerBridge(ctx context.Context, c *k8sops.Client, s *APIServerState) error {
	api := c.Kube.CoreV1().Services(APIServerNamespace)
	name := apiServerBridgeName(s.OldIPs)
	bridge, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		bridge, err = createAPIServerBridge(ctx, c, name, s.OldIPs, s.ports)
	}
	if err != nil {
		return err
	}
	if err := copyAPIServerSlices(ctx, c, bridge); err != nil {
		return err
	}
	s.Bridge, s.BridgeIPs, s.BridgeCreated = name, bridge.Spec.ClusterIPs, bridge.CreationTimestamp.UTC()
	s.BridgeEndpoints, err = bridgeEndpoints(ctx, c, name)
	return err
}

// copyAPIServerSlices gives svc (the bridge, the carrier) copies of the apiserver's
// EndpointSlices, one per address type, owned by svc.
func copyAPIServerSlices(ctx context.Context, c *k8sops.Client, svc *corev1.Service) error {
	_, srcs, err := apiServerEndpoints(ctx, c)
	if err != nil {
		return err
	}
	for _, src := range srcs {
		want := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-" + strings.ToLower(string(src.AddressType)), Namespace: APIServerNamespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: apiServerSliceManager,
					k8sops.APIServerBridgeLabel: svc.Labels[k8sops.APIServerBridgeLabel]},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}},
			AddressType: src.AddressType, Endpoints: src.Endpoints, Ports: src.Ports,
		}
		if err := putSlice(ctx, c, want); err != nil {
			return err
		}
	}
	return nil
}

// ipTaken says whether a create was refused because an IP it asked for is allocated.
func ipTaken(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "already allocated")
}

// createAPIServerBridge creates the bridge on ips. Right after the delete the old IPs may still
// be taken for a moment, so an IP conflict is retried.
func createAPIServerBridge(ctx context.Context, c *k8sops.Client, name string, ips []string, ports []corev1.ServicePort) (*corev1.Service, error) {
	svc := bridgeService(name, ips, ports)
	var got *corev1.Service
	err := k8sops.RetryWrite(ctx, func(bool) error {
		var err error
		got, err = c.Kube.CoreV1().Services(APIServerNamespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: c.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			got, err = c.Kube.CoreV1().Services(APIServerNamespace).Get(ctx, name, metav1.GetOptions{})
		}
		return err
	}, ipTaken)
	if err != nil {
		return nil, fmt.Errorf("creating the apiserver bridge %s on %s: %w", name, strings.Join(ips, ", "), err)
	}
	return got, nil
}

// admitBridge asks the apiserver, by a server-side dry run before anything is deleted, whether
// it would admit the bridge (quota, admission policies, webhooks). The dry run leaves its IP to
// the allocator: the old IP is still default/kubernetes's.
func admitBridge(ctx context.Context, c *k8sops.Client, name string, ips []string, ports []corev1.ServicePort) error {
	svc := bridgeService(name, ips, ports)
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	_, err := c.Kube.CoreV1().Services(APIServerNamespace).Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: c.FieldManager})
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return fmt.Errorf("the apiserver would refuse the bridge Service default/%s (%w), so nothing was deleted: default/kubernetes "+
		"stays at %s. Let the quota or admission rules of namespace default admit it, then apply again", name, err, strings.Join(ips, ", "))
}

// bridgeService is the bridge on ips: selector-less, with default/kubernetes's ports
// (kube-apiserver's own, 443 named https, when an apply resumed after the move).
func bridgeService(name string, ips []string, ports []corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: APIServerNamespace,
			Labels: map[string]string{k8sops.APIServerBridgeLabel: "true", "app.kubernetes.io/managed-by": "k8scidr"},
			Annotations: map[string]string{k8sops.BridgeForAnnotation: APIServerNamespace + "/" + APIServerServiceName,
				"k8scidr.io/description": "Keeps default/kubernetes's old IP answering for pods started before it moved."}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips,
			IPFamilyPolicy: familyPolicy(ips), Ports: ports},
	}
}

// putSlice creates or updates the bridge's slice want, found by listing (the apply role may list
// EndpointSlices, not get them).
func putSlice(ctx context.Context, c *k8sops.Client, want *discoveryv1.EndpointSlice) error {
	api := c.Kube.DiscoveryV1().EndpointSlices(want.Namespace)
	return k8sops.RetryWrite(ctx, func(bool) error {
		list, err := api.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + want.Labels[discoveryv1.LabelServiceName]})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(list.Items, func(s discoveryv1.EndpointSlice) bool { return s.Name == want.Name })
		if i < 0 {
			_, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: c.FieldManager})
			return err
		}
		cur := &list.Items[i]
		if maps.Equal(cur.Labels, want.Labels) && equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) &&
			equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(cur.Ports, want.Ports) {
			return nil
		}
		cur.Labels, cur.OwnerReferences, cur.Endpoints, cur.Ports = want.Labels, want.OwnerReferences, want.Endpoints, want.Ports
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.FieldManager})
		return err
	}, apierrors.IsConflict, apierrors.IsAlreadyExists)
}

// apiServerEndpoints are the apiserver's EndpointSlices for default/kubernetes (its reconciler
// writes them, labelled only with the service name) and their endpoints as "ip:port".
func apiServerEndpoints(ctx context.Context, c *k8sops.Client) ([]string, []discoveryv1.EndpointSlice, error) {
	list, err := c.Kube.DiscoveryV1().EndpointSlices(APIServerNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + APIServerServiceName})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the apiserver's endpoints: %w", err)
	}
	return endpointStrings(list.Items), list.Items, nil
}

func bridgeEndpoints(ctx context.Context, c *k8sops.Client, bridge string) ([]string, error) {
	list, err := c.Kube.DiscoveryV1().EndpointSlices(APIServerNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + bridge})
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver bridge's endpoints: %w", err)
	}
	return endpointStrings(list.Items), nil
}

// endpointStrings are the ready addresses of slices with each port, "ip:port", sorted.
func endpointStrings(list []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range list {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				for _, p := range s.Ports {
					if p.Port != nil {
						out = append(out, netip.AddrPortFrom(netip.MustParseAddr(a), uint16(*p.Port)).String())
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckAPIServerBridgeRemoval says why deleting the bridge would take the API from running pods:
// every pod started before the bridge's creation got KUBERNETES_SERVICE_HOST = an old IP (hostNetwork
// pods too), and a pod naming an old IP in its environment uses it whenever it started.
func CheckAPIServerBridgeRemoval(ctx context.Context, c *k8sops.Client, s APIServerState) (findings []k8sops.Finding, notes []string, err error) {
	var users, pinned []string
	err = k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Status.StartTime == nil || p.DeletionTimestamp != nil {
			return nil
		}
		name := p.Namespace + "/" + p.Name
		switch {
		case envNames(p, s.BridgeIPs):
			pinned = append(pinned, name)
		case p.Status.StartTime.Time.Before(s.BridgeCreated):
			users = append(users, name)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	ips := strings.Join(s.BridgeIPs, ", ")
	if len(pinned) > 0 {
		findings = append(findings, k8sops.Finding{Path: k8sops.At("bridge"), Summary: "Pods Name the Apiserver's Old IP",
			Detail: fmt.Sprintf("%d running pods name %s in their environment: %s. Deleting the bridge would cut them off the "+
				"API. Point them at kubernetes.default.svc or %s, restart them, then apply again; or set bridge_force_removal = true.",
				len(pinned), ips, k8sops.FirstOf(pinned), strings.Join(s.NewIPs, ", "))})
	}
	if len(users) > 0 {
		findings = append(findings, k8sops.Finding{Path: k8sops.At("bridge"), Summary: "Apiserver Bridge Still in Use",
			Detail: fmt.Sprintf("%d running pods started before default/kubernetes moved (%s), so their KUBERNETES_SERVICE_HOST "+
				"is the old IP %s and their in-cluster clients reach the API through the bridge: %s. Restart them first "+
				"(k8scidr_workload_roll with started_before = moved_at; bare pods and static pods are not restarted by it), "+
				"then apply again; or set bridge_force_removal = true if they do not use the API.",
				len(users), s.BridgeCreated.Format(time.RFC3339), ips, k8sops.FirstOf(users))})
	}
	return findings, notes, nil
}

// envNames reports whether a container of p sets an environment value naming one of ips.
func envNames(p *corev1.Pod, ips []string) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if slices.ContainsFunc(ips, func(ip string) bool { return strings.Contains(e.Value, ip) }) {
					return true
				}
			}
		}
	}
	return false
}

// removeAPIServerBridge deletes the bridge, its EndpointSlices and the keep-ranges.
func removeAPIServerBridge(ctx context.Context, c *k8sops.Client, s *APIServerState) error {
	if s.Bridge != "" {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			err := c.Kube.CoreV1().Services(APIServerNamespace).Delete(ctx, s.Bridge, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("deleting the apiserver bridge %s: %w", s.Bridge, err)
		}
		if err := deleteSlicesOf(ctx, c, s.Bridge); err != nil {
			return fmt.Errorf("deleting the apiserver bridge's EndpointSlices: %w", err)
		}
		s.Bridge, s.BridgeIPs, s.BridgeEndpoints, s.BridgeCreated = "", nil, nil, time.Time{}
	}
	for _, k := range s.KeepCIDRs {
		name, _, _ := strings.Cut(k, "=")
		if err := DeleteServiceCIDR(ctx, c, name, true); err != nil { // kube-controller-manager releases it within seconds
			return err
		}
	}
	s.KeepCIDRs = nil
	return nil
}

// RemoveAPIServerBridge is the destroy: the bridge and keep-ranges go, checked as m says (and a
// carrier a cut-off move left).
func RemoveAPIServerBridge(ctx context.Context, c *k8sops.Client, m APIServerMove) error {
	s, err := ReadAPIServerMove(ctx, c, m)
	if err != nil {
		return err
	}
	if err := dropAPIServerCarrier(ctx, c, 0); err != nil {
		return err
	}
	if s.Bridge != "" && !m.ForceBridgeRemoval {
		findings, _, err := CheckAPIServerBridgeRemoval(ctx, c, s)
		if err != nil {
			return err
		}
		if len(findings) > 0 {
			return findings[0]
		}
	}
	return removeAPIServerBridge(ctx, c, &s)
}

// retireBlocked says which IPs hold the default range's old CIDRs with no other ServiceCIDR
// covering them (kube-controller-manager keeps a deleted range until none is left, and on
// 1.33 a Terminating default range fails every dynamic allocation), or "". IPs of old-IP
// bridges (k8scidr_service_recreation's old_ip_bridges = "all") do not block: they are only
// counted (bridged). Deleted, the range stays Terminating while they exist: no new Service gets
// an IP in it, theirs stay, and once they go kube-controller-manager releases it and
// kube-apiserver recreates it from its flags.
func retireBlocked(ctx context.Context, c *k8sops.Client, cidrs []string) (blocked string, bridged int, err error) {
	ranges, caps, err := k8sops.ListServiceCIDRObjects(ctx, c)
	if err != nil {
		return "", 0, err
	}
	var others []netip.Prefix
	for _, r := range ranges {
		if r.Name != k8sops.DefaultServiceCIDRName && !r.Terminating {
			others = append(others, k8sops.ParsePrefixes(r.CIDRs)...)
		}
	}
	ips, err := k8sops.IPAddressesIn(ctx, c, caps, cidrs)
	if err != nil {
		return "", 0, err
	}
	ips = slices.DeleteFunc(ips, func(ip k8sops.IPAddressRef) bool {
		return k8sops.InAny(others, ip.IP) || ip.Parent == APIServerNamespace+"/"+APIServerServiceName
	})
	if len(ips) == 0 {
		return "", 0, nil
	}
	bridges, err := oldIPBridgeKeys(ctx, c)
	if err != nil {
		return "", 0, err
	}
	held := slices.DeleteFunc(slices.Clone(ips), func(ip k8sops.IPAddressRef) bool { return bridges[ip.Parent] })
	if len(held) == 0 {
		return "", len(ips), nil // the bridges' alone
	}
	return fmt.Sprintf("%d IPs in the old default range %s are held by no other ServiceCIDR: %s. Move those Services "+
		"(k8scidr_service_recreation) or keep their IPs in a k8scidr_service_cidr; the range is retired by the next apply after.",
		len(held), strings.Join(cidrs, ", "), describeIPs(held, 10)), 0, nil
}

// oldIPBridgeKeys are the old-IP bridges of every k8scidr_service_recreation, namespace/name
// (one list, by their label).
func oldIPBridgeKeys(ctx context.Context, c *k8sops.Client) (map[string]bool, error) {
	out := map[string]bool{}
	err := k8sops.EachLabeledService(ctx, c, k8sops.OldIPBridgeLabel, func(svc *corev1.Service) error {
		out[k8sops.SvcKey(svc)] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the old-IP bridges: %w", err)
	}
	return out, nil
}

// retireDefaultRange deletes the default ServiceCIDR while it has other ranges than m's and
// nothing but old-IP bridges holds it alone. Then it waits for kube-apiserver to recreate it
// from its flags, unless bridges hold it: it stays Terminating until they go, and the apply
// after that waits for it.
func retireDefaultRange(ctx context.Context, c *k8sops.Client, m APIServerMove, s *APIServerState) (string, error) {
	if len(s.DefaultRange) == 0 || sameSet(s.DefaultRange, m.ServiceCIDRs) {
		return "", nil
	}
	blocked, bridged, err := retireBlocked(ctx, c, s.DefaultRange)
	s.RetireBlocked, s.BridgedIPs = blocked, bridged
	if err != nil || blocked != "" {
		return blocked, err
	}
	if bridged > 0 {
		if err := DeleteServiceCIDR(ctx, c, k8sops.DefaultServiceCIDRName, false); err != nil {
			return "", fmt.Errorf("retiring the old default ServiceCIDR: %w", err)
		}
		s.DefaultTerminating = true
		return "", nil
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := DeleteServiceCIDR(wctx, c, k8sops.DefaultServiceCIDRName, true); err != nil {
		return "", fmt.Errorf("retiring the old default ServiceCIDR: %w", err)
	}
	err = wait.PollUntilContextCancel(wctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sc, err := k8sops.GetServiceCIDR(ctx, c, k8sops.DefaultServiceCIDRName)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		s.DefaultRange = sc.CIDRs
		return sc.Ready, nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return "", err
	case err != nil:
		return "The old default ServiceCIDR is deleted; kube-apiserver had not recreated it within 2 minutes. It does so " +
			"from its --service-cluster-ip-range; check that every kube-apiserver runs, then refresh.", nil
	case !sameSet(s.DefaultRange, m.ServiceCIDRs):
		return fmt.Sprintf("kube-apiserver recreated the default ServiceCIDR with %s, not %s: a kube-apiserver still runs "+
			"with the old --service-cluster-ip-range. Finish restarting them; the next apply retires it again.",
			strings.Join(s.DefaultRange, ", "), strings.Join(m.ServiceCIDRs, ", ")), nil
	}
	return "", nil
}

func familyPolicy(ips []string) *corev1.IPFamilyPolicy {
	if len(ips) > 1 {
		return ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	}
	return ptr.To(corev1.IPFamilyPolicySingleStack)
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
}
