// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Old-IP bridges: for each moved Service, a Service on the IPs it left, with its selector and
// ports, so that clients that cached the old ClusterIP (an upstream resolved once at start, a
// JVM's lookup cache, a Service environment variable) keep reaching it until they restart.
package recreation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// The old_ip_bridges settings: the cluster DNS Service's old IP only (by the DNS bridge), or
// every moved Service's. The default is every Service's: clients that keep the IP they resolved
// once (nginx and Envoy upstreams, JVM caches, <SVC>_SERVICE_HOST) cannot be reached by a DNS
// answer, and without a bridge they fail from the moment the old IP is freed until their pods
// restart; the bridges go once those pods have (CheckOldIPBridgeRemoval).
const (
	BridgesDNS = "dns"
	BridgesAll = "all"

	DefaultOldIPBridges = BridgesAll
)

// bridgeNamePrefixMax keeps "<prefix>-old-<10 hex>" within a DNS-1035 label's 63 characters.
const bridgeNamePrefixMax = 63 - len("-old-") - 10

// OldIPBridgeName is the name of the old-IP bridge of Service namespace/name on ips, the IPs its
// move frees: the Service's name (cut to fit) with "-old-" and 10 hex digits of a hash of
// namespace/name and the IPs. It is a valid Service name (DNS-1035, at most 63 characters)
// because the Service's is; the hash keeps apart the bridges of two Services whose names share
// the kept part, and the bridges of one Service moved twice (a second migration frees other IPs,
// and the first one's bridge keeps its own).
func OldIPBridgeName(namespace, name string, ips []string) string {
	return name[:min(len(name), bridgeNamePrefixMax)] + "-old-" + shortHash(namespace+"/"+name+" "+strings.Join(ips, ","))
}

// shortHash is 10 hex digits of the SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// OldIPBridge is an old-IP bridge in the cluster.
type OldIPBridge struct {
	Name    string   // the bridge Service, in the namespace of For
	For     string   // namespace/name of the Service it stands in for
	IPs     []string // the IPs it keeps
	Created time.Time
	Group   string // the journal group of the k8scidr_service_recreation that made it
}

// Key is the bridge's namespace/name.
func (b OldIPBridge) Key() string {
	ns, _, _ := strings.Cut(b.For, "/")
	return ns + "/" + b.Name
}

// oldIPBridgeOf reads svc as an old-IP bridge of journal group (any group when group is "").
func oldIPBridgeOf(svc *corev1.Service, group string) (OldIPBridge, bool) {
	if svc.Labels[k8sops.OldIPBridgeLabel] != "true" || (group != "" && groupOf(svc.Labels) != group) {
		return OldIPBridge{}, false
	}
	forKey := svc.Annotations[k8sops.BridgeForAnnotation]
	if forKey == "" {
		forKey = svc.Namespace + "/" + svc.Labels[k8sops.OldIPBridgeForLabel]
	}
	return OldIPBridge{Name: svc.Name, For: forKey, IPs: ipStrings(k8sops.ClusterIPs(svc)), Created: svc.CreationTimestamp.UTC(),
		Group: groupOf(svc.Labels)}, true
}

func groupOf(labels map[string]string) string {
	if g := labels[JournalGroupLabel]; g != "" {
		return g
	}
	return DefaultJournalGroup
}

// OldIPBridgesIn are the old-IP bridges of journal group among services ("" for any group),
// sorted by the Service they stand in for.
func OldIPBridgesIn(services []corev1.Service, group string) []OldIPBridge {
	var out []OldIPBridge
	for i := range services {
		if b, ok := oldIPBridgeOf(&services[i], group); ok {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b OldIPBridge) int { return strings.Compare(a.For, b.For) })
	return out
}

// ListOldIPBridges lists the old-IP bridges of journal group ("" for any) in one paged list.
func ListOldIPBridges(ctx context.Context, c *k8sops.Client, group string) ([]OldIPBridge, error) {
	var services []corev1.Service
	err := k8sops.EachLabeledService(ctx, c, k8sops.OldIPBridgeLabel, func(svc *corev1.Service) error {
		services = append(services, *svc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing old-IP bridges: %w", err)
	}
	return OldIPBridgesIn(services, group), nil
}

// bridgeFor is a ClusterIP Service named name on ips (svc's IPs that move) that serves what svc
// serves: its selector, its ports without node ports, its session affinity and whether it
// publishes not-ready addresses.
func bridgeFor(svc *corev1.Service, name string, ips []string) *corev1.Service {
	var families []corev1.IPFamily
	for _, ip := range parseAddrs(ips) {
		if ip.Is4() {
			families = append(families, corev1.IPv4Protocol)
		} else {
			families = append(families, corev1.IPv6Protocol)
		}
	}
	policy := ptr.To(corev1.IPFamilyPolicySingleStack)
	if len(families) > 1 {
		policy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	}
	b := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: svc.Namespace,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "k8scidr"},
			Annotations: map[string]string{k8sops.BridgeForAnnotation: k8sops.SvcKey(svc)},
		},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			Selector:                 maps.Clone(svc.Spec.Selector),
			ClusterIP:                ips[0],
			ClusterIPs:               slices.Clone(ips),
			IPFamilies:               families,
			IPFamilyPolicy:           policy,
			SessionAffinity:          svc.Spec.SessionAffinity,
			SessionAffinityConfig:    svc.Spec.SessionAffinityConfig.DeepCopy(),
			PublishNotReadyAddresses: svc.Spec.PublishNotReadyAddresses,
		},
	}
	for _, port := range svc.Spec.Ports {
		b.Spec.Ports = append(b.Spec.Ports, corev1.ServicePort{Name: port.Name, Protocol: port.Protocol, Port: port.Port,
			TargetPort: port.TargetPort, AppProtocol: port.AppProtocol})
	}
	return b
}

// oldIPBridgeService is the old-IP bridge of svc on ips, labelled for journal group.
func oldIPBridgeService(svc *corev1.Service, ips []string, group string) *corev1.Service {
	b := bridgeFor(svc, OldIPBridgeName(svc.Namespace, svc.Name, ips), ips)
	b.Labels[k8sops.OldIPBridgeLabel] = "true"
	b.Labels[k8sops.OldIPBridgeForLabel] = svc.Name
	b.Labels[JournalGroupLabel] = group
	b.Annotations["k8scidr.io/description"] = "Keeps " + k8sops.SvcKey(svc) + "'s old ClusterIP answering for clients that cached it."
	return b
}

// bridgeEndpoints is a copy of a selector-less Service's hand-made Endpoints for its bridge:
// the same addresses and ports under the bridge's name, owned by nothing (the original's owner
// references point at the Service, not at the bridge) and labelled as the bridge is, never as
// the original: its labels say which application it belongs to (Argo CD's
// app.kubernetes.io/instance, kubectl's applyset.kubernetes.io/part-of), and a pruning tool
// would delete the bridge's Endpoints as a leftover of that application, not in its manifests.
// (endpointslice.kubernetes.io/skip-mirror is not copied either: kube-proxy serves the bridge
// only from the slices the mirroring controller makes of its Endpoints.)
func bridgeEndpoints(ep *corev1.Endpoints, bridge string) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: bridge, Namespace: ep.Namespace,
			Labels: map[string]string{k8sops.OldIPBridgeLabel: "true", "app.kubernetes.io/managed-by": "k8scidr"}},
		Subsets: slices.Clone(ep.Subsets),
	}
}

// planOldIPBridges decides the old-IP bridges of an apply: with old_ip_bridges = "all", each
// moved Service but the cluster DNS Service (the DNS bridge keeps its IP) gets one on the IPs
// its move changes. Each such IP must stay allocatable: inside a Ready ServiceCIDR. At plan the
// snapshot holds no Services and only that is checked; at apply the bridge names must be free
// and the bridges are built from the Services as they are.
func planOldIPBridges(snap Snapshot, s *RecreationSteps, o BridgeOptions, byKey map[string]*corev1.Service) []k8sops.Finding {
	if o.OldIPs != BridgesAll {
		return nil
	}
	var out []k8sops.Finding
	var outside []string
	for _, m := range s.Moves {
		if m.Key == s.DNSService {
			continue
		}
		moving := MovingIPs(m.OldIPs, m.NewIPs)
		if len(moving) == 0 {
			continue
		}
		for _, ip := range parseAddrs(moving) {
			if !k8sops.ReadyHolds(snap.Ranges, ip) {
				outside = append(outside, m.Key+" "+ip.String())
			}
		}
		svc := byKey[m.Key]
		if svc == nil {
			continue
		}
		name := OldIPBridgeName(svc.Namespace, svc.Name, moving)
		if other := byKey[svc.Namespace+"/"+name]; other != nil {
			if b, ok := oldIPBridgeOf(other, ""); !ok || b.For != m.Key || !holdsAll(other, moving) {
				out = append(out, k8sops.Finding{Path: k8sops.At("old_ip_bridges"), Summary: "Bridge Name Taken", Detail: fmt.Sprintf("%s/%s, the old-IP "+
					"bridge name of %s, is taken by another Service. Rename that Service, or exclude %s from the moves.",
					svc.Namespace, name, m.Key, m.Key)})
				continue
			}
		}
		if s.OldIPBridges == nil {
			s.OldIPBridges = map[string]*corev1.Service{}
		}
		s.OldIPBridges[m.Key] = oldIPBridgeService(svc, moving, o.Group)
	}
	if len(outside) > 0 {
		out = append(out, k8sops.Finding{Path: k8sops.At("old_ip_bridges"), Summary: "Old-IP Bridge IPs Outside a Ready Range",
			Detail: fmt.Sprintf("The old-IP bridges keep the IPs the moves free, but no Ready ServiceCIDR holds %d of them (%s). Keep "+
				"the old range until the bridges are removed, or set old_ip_bridges = \"dns\".", len(outside), k8sops.FirstOf(outside))})
	}
	return out
}

// CheckOldIPBridgeRemoval says which of bridges a running pod may still reach through the old
// IP: a pod started before the bridge (its Service's move) that resolves names through the
// cluster DNS (it may hold the old IP from a lookup), or that runs in the bridge's namespace
// with Service environment variables (enableServiceLinks, which gives every pod the ClusterIPs
// of its namespace's Services at start). One pod list for all bridges.
func CheckOldIPBridgeRemoval(ctx context.Context, c *k8sops.Client, bridges []OldIPBridge) ([]k8sops.Finding, error) {
	if len(bridges) == 0 {
		return nil, nil
	}
	newest, newestIn := time.Time{}, map[string]time.Time{}
	for _, b := range bridges {
		ns, _, _ := strings.Cut(b.For, "/")
		if b.Created.After(newest) {
			newest = b.Created
		}
		if b.Created.After(newestIn[ns]) {
			newestIn[ns] = b.Created
		}
	}
	var users []string
	earliest, earliestIn := time.Time{}, map[string]time.Time{} // of the resolvers, of the pods with links per namespace
	err := k8sops.EachItem(ctx, k8sops.ListPages(c.Kube.CoreV1().Pods("").List), func(p *corev1.Pod) error {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Status.StartTime == nil {
			return nil
		}
		start := p.Status.StartTime.Time
		resolves, links := resolvesThrough(p), p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks
		if resolves && (earliest.IsZero() || start.Before(earliest)) {
			earliest = start
		}
		if links && (earliestIn[p.Namespace].IsZero() || start.Before(earliestIn[p.Namespace])) {
			earliestIn[p.Namespace] = start
		}
		if (resolves && start.Before(newest)) || (links && start.Before(newestIn[p.Namespace])) {
			users = append(users, p.Namespace+"/"+p.Name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var inUse []string
	for _, b := range bridges {
		ns, _, _ := strings.Cut(b.For, "/")
		before := func(t time.Time) bool { return !t.IsZero() && t.Before(b.Created) }
		if before(earliest) || before(earliestIn[ns]) {
			inUse = append(inUse, b.For)
		}
	}
	if len(inUse) == 0 {
		return nil, nil
	}
	return []k8sops.Finding{{Path: k8sops.At("old_ip_bridges"), Summary: "Old-IP Bridges Still in Use", Detail: fmt.Sprintf("%d running pods started before "+
		"their Services moved and may still reach them by the old IP (they resolve Service names through the cluster DNS, or "+
		"got the IPs as Service environment variables): %s. Removing the bridges now would cut them off from the Services of "+
		"%d bridges: %s. Restart those pods first (k8scidr_workload_roll with started_before = this resource's completed_at; "+
		"bare pods are not restarted by it), then apply again; or set old_ip_bridge_ttl, or old_ip_bridges_force_removal = "+
		"true if you know they hold no old IP.", len(users), k8sops.FirstOf(users), len(inUse), k8sops.FirstOf(inUse))}}, nil
}

// BridgesHolding describes the bridges (the DNS bridge, unless withoutDNS, and old-IP bridges)
// with an IP inside the ServiceCIDR name that no other Ready ServiceCIDR holds: while they exist
// its deletion cannot finish, and a bridge the journal still has to make needs a Ready range for
// its IP.
func BridgesHolding(ctx context.Context, c *k8sops.Client, name string, withoutDNS bool) ([]string, error) {
	ranges, _, err := k8sops.ListServiceCIDRObjects(ctx, c)
	if err != nil {
		return nil, err
	}
	var mine []netip.Prefix
	var others []k8sops.ServiceCIDR
	for _, r := range ranges {
		if r.Name == name {
			mine = k8sops.ParsePrefixes(r.CIDRs)
		} else {
			others = append(others, r)
		}
	}
	var out []string
	for _, label := range []string{k8sops.DNSBridgeLabel, k8sops.OldIPBridgeLabel} {
		if withoutDNS && label == k8sops.DNSBridgeLabel {
			continue
		}
		err := k8sops.EachLabeledService(ctx, c, label, func(svc *corev1.Service) error {
			if slices.ContainsFunc(k8sops.ClusterIPs(svc), func(ip netip.Addr) bool { return k8sops.InAny(mine, ip) && !k8sops.ReadyHolds(others, ip) }) {
				out = append(out, fmt.Sprintf("%s (bridge of %s, on %s)", k8sops.SvcKey(svc), svc.Annotations[k8sops.BridgeForAnnotation],
					strings.Join(svc.Spec.ClusterIPs, ", ")))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing bridges: %w", err)
		}
	}
	slices.Sort(out)
	return out, nil
}
