// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The hand-over: how one Service moves without a moment in which its name, its old IPs or its
// new IPs go unserved on the wire, read top to bottom in handOverSteps.
//
// A ClusterIP Service's IPs cannot change in place, and a delete and create leaves, for one
// kube-proxy sync or more, the old IP routed nowhere (kube-proxy's rules are rewritten at most
// once per --min-sync-period, the first change after a quiet second at once) and the name
// absent (CoreDNS answers NXDOMAIN, and caches it for the Corefile's TTL). The apiserver allows
// one change of the IPs without a delete: to ExternalName (no IPs) and back to ClusterIP with
// new ones. The hand-over goes through it with two helpers, so that at every instant each IP a
// client may hold is a ClusterIP or an external IP of a Service with the moving Service's
// selector and ports, and its name answers with one of those IPs:
//
//	carry    C, the carrier, on the new IPs with the old ones as external IPs  -> wait a sync
//	release  the Service becomes ExternalName C: its old IPs are free, C serves them
//	bridge   B, the bridge, on the old IPs with the new ones as external IPs
//	repoint  the Service becomes ExternalName B                                 -> wait a sync
//	drop     C is deleted: B serves the new IPs
//	take     the Service is ClusterIP again, on the new IPs                      -> wait a sync
//	settle   B keeps the old IPs only: the DNS bridge, an old-IP bridge, or (old_ip_bridges =
//	         "dns") a bridge removed once the DNS answers naming the old IPs have expired
//
// The Service keeps its UID, labels, annotations, owners and EndpointSlices throughout (the
// EndpointSlice controller leaves an ExternalName Service's slices alone); only the fields of a
// ClusterIP Service (its IPs, IP families, internal traffic policy, session affinity) are set
// back by take from the journal, which holds the Service as it was before the move.
//
// What cannot go through it moves by delete and create (move): NodePort and LoadBalancer
// Services (their node ports and load balancers would be released), selector-less Services,
// Services with external IPs of their own or a family that stays, and any Service whose
// carrier or ExternalName form admission refuses (policies against external IPs,
// CVE-2020-8554, or ExternalName, CVE-2021-25740). A hand-over cut off at any step leaves every
// IP served; the Service's journal entry stays, and the next apply goes on from where it was.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// HandOverOptions are what the hand-over must know of the cluster's data path, which the
// Kubernetes API does not tell.
type HandOverOptions struct {
	// Off moves every Service by delete and create.
	Off bool
	// ClusterDomain is the cluster DNS zone (kubelet clusterDomain): the ExternalName form
	// names the carrier and the bridge in it, and CoreDNS answers with their IPs. Default
	// DefaultClusterDomain.
	ClusterDomain string
	// ProxySync is how long after a Service change kube-proxy has its rules for it in place on
	// every node: its --min-sync-period and the time a sync takes. Default DefaultProxySync.
	ProxySync time.Duration
	// DNSTTL is how long an answer of the cluster DNS may be cached (the Corefile's kubernetes
	// ttl): a bridge that is not kept stays this long after the Service took its new IPs.
	// Default DefaultDNSTTL.
	DNSTTL time.Duration
}

// The hand-over's defaults: kubeadm's and kOps' cluster domain, kube-proxy's sync
// (k8sops.DefaultProxySync), and the ttl of the Corefile kubeadm and the Kubernetes DNS addon
// ship (kOps' is the plugin's default, 5 s).
const (
	DefaultClusterDomain = "cluster.local"
	DefaultProxySync     = k8sops.DefaultProxySync
	DefaultDNSTTL        = 30 * time.Second
)

// The marks of a hand-over. HandOverLabel is on the carrier ("carrier") and on a bridge that
// is not kept ("bridge"); handOverToAnnotation on the Service while it is ExternalName (its
// new IPs); handOverIPsAnnotation on a bridge that serves the new IPs as external IPs;
// handOverUntilAnnotation on a bridge that is not kept: when it may go.
const (
	HandOverLabel           = "k8scidr.io/hand-over"
	handOverToAnnotation    = "k8scidr.io/hand-over-to"
	handOverIPsAnnotation   = "k8scidr.io/hand-over-external-ips"
	handOverUntilAnnotation = "k8scidr.io/hand-over-until"
)

// handOverSteps is the hand-over, in order. sync: the next step relies on kube-proxy having
// programmed what this one wrote, so all hand-overs in a batch wait ProxySync once after it.
var handOverSteps = []handOverStep{
	{"carry", (*executor).carry, true},
	{"release", (*executor).release, false},
	{"bridge", (*executor).bridgeOld, false},
	{"repoint", (*executor).repoint, true},
	{"drop carrier", (*executor).dropCarrier, false},
	{"take", (*executor).take, true},
	{"settle", (*executor).settle, false},
}

type handOverStep struct {
	name string
	do   func(*executor, context.Context, *handOver) error
	sync bool
}

// stepNamed is the index of the step called name.
func stepNamed(name string) int {
	return slices.IndexFunc(handOverSteps, func(s handOverStep) bool { return s.name == name })
}

// bridgeKind is which bridge a hand-over makes on the old IPs.
type bridgeKind int

const (
	bridgeTransient bridgeKind = iota // removed DNSTTL after the take
	bridgeDNS                         // the DNS bridge
	bridgeOldIP                       // an old-IP bridge (old_ip_bridges = "all")
)

// handOver is one Service's hand-over in progress.
type handOver struct {
	e        JournalEntry
	svc      *corev1.Service // the Service as last read or written
	carrier  *corev1.Service // what carry creates
	bridge   *corev1.Service // what bridge creates
	kind     bridgeKind
	next     int // the first step still to do
	done     bool
	err      error
	bridgeUp *corev1.Service // the bridge as created or found
	copies   []string        // EndpointSlice copies of an old-IP bridge, deleted once served
	took     time.Time       // when the Service took its new IPs
}

func (h *handOver) newIPs() []string { return h.e.Service.Spec.ClusterIPs }
func (h *handOver) oldIPs() []string { return h.e.OldIPs }

// newHandOver is the hand-over of the journaled move e of svc, from the step svc's state says.
func (x *executor) newHandOver(e JournalEntry, svc *corev1.Service) *handOver {
	h := &handOver{e: e, svc: svc}
	group := x.o.Journal.group()
	h.carrier = bridgeFor(&e.Service, carrierName(e.Service.Namespace, e.Service.Name, h.oldIPs()), h.newIPs())
	h.carrier.Spec.ExternalIPs = slices.Clone(h.oldIPs())
	h.carrier.Labels[HandOverLabel] = "carrier"
	h.carrier.Labels[JournalGroupLabel] = group
	h.carrier.Annotations["k8scidr.io/description"] = "Carries " + e.Key + "'s new IPs while it moves to them; removed by the move."
	switch {
	case e.Key == x.dnsKey && x.bridge != nil:
		h.kind, h.bridge = bridgeDNS, x.bridge.DeepCopy()
	case e.Bridge != nil:
		h.kind, h.bridge = bridgeOldIP, e.Bridge.DeepCopy()
	default:
		h.bridge = bridgeFor(&e.Service, transientName(e.Service.Namespace, e.Service.Name, h.oldIPs()), h.oldIPs())
		h.bridge.Labels[HandOverLabel] = "bridge"
		h.bridge.Labels[JournalGroupLabel] = group
		h.bridge.Annotations["k8scidr.io/description"] = "Keeps " + e.Key + "'s old IPs answering until cached DNS answers naming them expire; removed by the move."
	}
	switch {
	case svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Annotations[handOverToAnnotation] == "" &&
		slices.Equal(svc.Spec.ClusterIPs, h.newIPs()):
		h.next = stepNamed("settle") // took its IPs; a bridge may still carry them
	case svc.Spec.ExternalName == x.fqdn(h.bridge):
		h.next = stepNamed("drop carrier")
	case svc.Spec.ExternalName == x.fqdn(h.carrier):
		h.next = stepNamed("bridge")
	}
	return h
}

// carrierName and transientName name a hand-over's carrier and its bridge that is not kept, as
// old-IP bridges are named (after the old IPs, which do not change when a planned new IP turns
// out to be taken).
func carrierName(namespace, name string, ips []string) string {
	return name[:min(len(name), bridgeNamePrefixMax)] + "-new-" + shortHash(namespace+"/"+name+" "+strings.Join(ips, ","))
}

func transientName(namespace, name string, ips []string) string {
	return name[:min(len(name), bridgeNamePrefixMax)] + "-was-" + shortHash(namespace+"/"+name+" "+strings.Join(ips, ","))
}

// fqdn is svc's name in the cluster DNS zone.
func (x *executor) fqdn(svc *corev1.Service) string {
	return svc.Name + "." + svc.Namespace + ".svc." + x.o.HandOver.ClusterDomain
}

// handOverBlocker says why the move of e cannot be a hand-over ("" when it can), by what the
// Service is. Its move is then a delete and create.
func (x *executor) handOverBlocker(svc *corev1.Service, e JournalEntry) string {
	switch {
	case x.o.HandOver.Off:
		return "the hand-over is off"
	case svc.Spec.Type != corev1.ServiceTypeClusterIP:
		return string(svc.Spec.Type) + " Service: the hand-over would release its node ports"
	case len(svc.Spec.Selector) == 0:
		return "selector-less Service"
	case len(svc.Spec.ExternalIPs) > 0:
		return "has external IPs of its own"
	case len(MovingIPs(e.OldIPs, e.Service.Spec.ClusterIPs)) != len(svc.Spec.ClusterIPs) || !slices.Equal(e.OldIPs, svc.Spec.ClusterIPs):
		return "a family of its IPs stays"
	case len(x.takeOver[e.Key]) > 0:
		return "goes back to IPs its bridge holds (ip_assignment = \"previous\"): the bridge gives them up at its create"
	case slices.ContainsFunc(parseAddrs(e.OldIPs), func(ip netip.Addr) bool { return !k8sops.ReadyHolds(x.ranges, ip) }):
		return "its old IPs are in no Ready ServiceCIDR (the old range is retired): no bridge can hold them"
	}
	return ""
}

// handOverRefusal says what admission would refuse of h's carrier, its bridge and the
// Service's ExternalName form ("" nothing), by dry runs.
func (x *executor) handOverRefusal(ctx context.Context, h *handOver) (string, error) {
	svc := h.svc
	held := ipStrings(k8sops.ClusterIPs(svc))
	for _, b := range []*corev1.Service{h.carrier, withExternalIPs(h.bridge, h.newIPs())} {
		if why, err := x.helperRefusal(ctx, b, held); err != nil || why != "" {
			return why, err
		}
	}
	mayRefuse := x.guards.current(ctx, x.c)
	next := externalNameOf(svc, x.fqdn(h.carrier), h.newIPs())
	if !mayRefuse(next, false) {
		return "", nil
	}
	_, err := x.c.Kube.CoreV1().Services(svc.Namespace).Update(ctx, next,
		metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: x.c.FieldManager})
	switch {
	case apierrors.IsConflict(err):
		return "", nil // changed since: release reads it again
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return "admission refuses its ExternalName form: " + err.Error(), nil
	}
	return "", err
}

// helperRefusal says what admission would refuse of b, a helper with external IPs (a carrier,
// a bridge, an escort; "" nothing), by a dry run; held are IPs the moving Service holds.
func (x *executor) helperRefusal(ctx context.Context, b *corev1.Service, held []string) (string, error) {
	// Only a policy, a webhook or a quota refuses one of them and not the others; the admission
	// plugin that denies external IPs (which no API shows) refuses all: asked once.
	if !x.guards.current(ctx, x.c)(withExternalIPs(b, nil), true) {
		if refusal, err := x.externalIPsRefusal(ctx, b, held); err != nil || refusal != "" {
			return "admission refuses external IPs: " + refusal, err
		}
		return "", nil
	}
	if refusal, err := AdmissionRefusal(ctx, x.c, b, held, true); err != nil || refusal != "" {
		return "admission refuses " + b.Name + ": " + refusal, err
	}
	return "", nil
}

// externalIPsRefusal is what admission said of the first helper of the run asked about
// (b, by a dry run), where nothing but the admission plugin that denies external IPs may
// refuse it: that answer holds for every other such helper.
func (x *executor) externalIPsRefusal(ctx context.Context, b *corev1.Service, held []string) (string, error) {
	x.externalIPsMu.Lock()
	defer x.externalIPsMu.Unlock()
	if x.externalIPsAsked {
		return x.externalIPsRefused, nil
	}
	refusal, err := AdmissionRefusal(ctx, x.c, b, held, true)
	if err == nil {
		x.externalIPsAsked, x.externalIPsRefused = true, refusal
	}
	return refusal, err
}

// queueResume queues the hand-over of e that a cut-off apply left at svc, for
// resumeHandOvers to finish with the others, their waits for kube-proxy shared.
func (x *executor) queueResume(e JournalEntry, svc *corev1.Service) error {
	h := x.newHandOver(e, svc)
	if h.next == 0 {
		return fmt.Errorf("%s is mid-hand-over, but its ExternalName %q names neither its carrier %s nor its bridge %s: "+
			"set it back to ClusterIP by hand (the journal holds it as it was)", e.Key, svc.Spec.ExternalName, x.fqdn(h.carrier), x.fqdn(h.bridge))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.resumes = append(x.resumes, h)
	return nil
}

// resumeHandOvers finishes the queued hand-overs; one that fails stays as it is (served), its
// journal object unsettled, and the next apply goes on with it.
func (x *executor) resumeHandOvers(ctx context.Context, settled map[string]bool) error {
	x.mu.Lock()
	hs := x.resumes
	x.resumes = nil
	x.mu.Unlock()
	x.handOverAll(ctx, hs, nil)
	for _, h := range hs {
		switch {
		case h.err == nil:
			x.mu.Lock()
			x.res.Restored = append(x.res.Restored, h.e.Key)
			x.mu.Unlock()
		case ctx.Err() != nil:
			return h.err
		default:
			x.note("%s could not be finished from journal %s/%s: %v. It is served as it is; the next plan shows it under "+
				"restore again.", h.e.Key, x.o.Journal.Namespace, h.e.Object, h.err)
			settled[h.e.Object] = false
		}
	}
	return nil
}

// handOverAll carries out the hand-overs step by step across all of them: each step's writes
// in parallel (at most Parallelism at once across the run), and after a step the next relies on
// kube-proxy for, one wait for all. A hand-over whose step fails does no later step, and stays
// as the steps before left it, served. Once stop says a move of the run failed, no further step
// starts (in an outage every one would spend its retries): hand-overs not started stay as they
// are, and the others are left where they are (errLeftMidway), for the next apply to finish.
func (x *executor) handOverAll(ctx context.Context, hs []*handOver, stop func() bool) {
	// Once the Service is ExternalName, the hand-over is finished even when the apply is
	// interrupted, within a grace period long enough for its waits: a Service is not left
	// without its ClusterIP for the next apply to find. One not released yet stops there.
	gctx, finished := afterCancel(ctx, interruptGrace+3*x.o.HandOver.ProxySync)
	defer finished()
	// Once another move failed, the steps in flight are cut off too: every state they may
	// leave is served, and in an outage each would otherwise spend its retries.
	sctx, cut := context.WithCancel(gctx)
	defer cut()
	var failedHere atomic.Bool
	if stop != nil {
		others := stop
		stop = func() bool { return failedHere.Load() || others() }
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-tick.C:
					if stop() {
						cut()
						return
					}
				}
			}
		}()
	}
	released, take := stepNamed("release"), stepNamed("take")
	for i, step := range handOverSteps {
		var wg sync.WaitGroup
		ran, late := false, ctx.Err() != nil
		for _, h := range hs {
			if h.err != nil || h.done || h.next > i {
				continue
			}
			if gctx.Err() != nil || (ctx.Err() != nil && i <= released) {
				h.err = context.Cause(ctx)
				continue
			}
			if stop != nil && stop() {
				if h.next == 0 && i == 0 {
					h.done = true // not started
				} else {
					h.err = errLeftMidway
				}
				continue
			}
			ran = true
			x.requests <- struct{}{}
			wg.Go(func() {
				defer func() { <-x.requests }()
				err := step.do(x, sctx, h)
				switch {
				case err == nil:
				case sctx.Err() != nil && gctx.Err() == nil:
					h.err = errLeftMidway // cut off by another move's failure
				default:
					h.err = fmt.Errorf("%s: hand-over step %q: %w", h.e.Key, step.name, err)
					failedHere.Store(true)
				}
			})
		}
		wg.Wait()
		if late && i == take {
			x.mu.Lock()
			for _, h := range hs {
				if h.err == nil && !h.took.IsZero() {
					x.finishedLate = append(x.finishedLate, h.e.Key) // finished after the interruption
				}
			}
			x.mu.Unlock()
		}
		if ran && step.sync {
			x.proxySync(sctx)
		}
	}
}

// errLeftMidway is the state of a hand-over the run stopped because another move failed: every
// IP it touched is served, its journal entry stays, and the next apply finishes it.
var errLeftMidway = errors.New("left mid-hand-over, served, after another move failed: the next apply finishes it")

// proxySync waits until kube-proxy has programmed what was just written, on every node (or
// ctx ends: the next step then sees it).
func (x *executor) proxySync(ctx context.Context) {
	_ = x.sleepUntil(ctx, time.Now().Add(x.o.HandOver.ProxySync))
}

// carry creates the carrier, and gives it copies of the Service's EndpointSlices so that
// kube-proxy routes it at once. A planned IP another client took meanwhile is replaced as a
// create replaces it (the next free one, noted), and the Service takes the carrier's IPs: its
// journal entry is written again with them.
func (x *executor) carry(ctx context.Context, h *handOver) error {
	api := x.c.Kube.CoreV1().Services(h.carrier.Namespace)
	cur, err := api.Get(ctx, h.carrier.Name, metav1.GetOptions{})
	switch {
	case err == nil && cur.Labels[HandOverLabel] != "carrier":
		return fmt.Errorf("the name %s/%s is taken by a Service that is not its carrier", cur.Namespace, cur.Name)
	case err == nil && slices.Equal(cur.Spec.ClusterIPs, h.newIPs()):
		h.carrier = cur // a cut-off run's, on the planned IPs
		return nil
	case err == nil:
		if err := x.deleteHelper(ctx, cur); err != nil {
			return err
		}
		if err := waitDeleted(ctx, objectWatch(api.List, api.Watch, cur.Name), &corev1.Service{}, cur.UID); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	c, err := x.create(ctx, h.carrier.DeepCopy(), h.e.Key, x.c.FieldManager)
	if err != nil {
		return err
	}
	if !slices.Equal(c.Spec.ClusterIPs, h.newIPs()) {
		next := h.e
		next.Service = *h.e.Service.DeepCopy()
		next.Service.Spec.ClusterIPs, next.Service.Spec.ClusterIP = slices.Clone(c.Spec.ClusterIPs), c.Spec.ClusterIPs[0]
		if err := x.rejournal(ctx, next, "re-journaled a Service whose planned IP another client took"); err != nil {
			return err
		}
		h.e = next
	}
	if _, err := x.copySlices(ctx, familiesOf(x.currentSlices(h.e.Key), c), c); err != nil {
		x.note("%s: copying its endpoints to its carrier %s failed (%v): the carrier answers once kube-controller-manager writes its EndpointSlice.", h.e.Key, c.Name, err)
	}
	h.carrier = c
	return nil
}

// release makes the Service ExternalName for the carrier, with the journaled Service's
// resourceVersion as precondition: a change another client made since is journaled first
// (actOnCurrent), and a Service changed so that its move no longer holds is left, its carrier
// deleted.
func (x *executor) release(ctx context.Context, h *handOver) error {
	if x.o.HoldBeforeDelete != nil {
		x.o.HoldBeforeDelete(ctx, h.e.Key)
	}
	api := x.c.Kube.CoreV1().Services(h.svc.Namespace)
	old, e, err := x.actOnCurrent(ctx, h.svc, h.e, func(old *corev1.Service) error {
		next := externalNameOf(old, x.fqdn(h.carrier), h.newIPs())
		next.ResourceVersion = old.ResourceVersion
		// Retried as a delete is: an update applied whose answer was lost meets a conflict,
		// which the check below finds to be this release.
		return k8sops.RetryWrite(ctx, func(bool) error {
			updated, err := api.Update(ctx, next, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
			if err == nil {
				h.svc = updated
			}
			return err
		})
	})
	h.e = e
	var changed changedAway
	if err != nil && !errors.As(err, &changed) && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		// The release of a cut-off run, in flight when it ended, may land after this run read
		// the Service: it names this carrier already. That is this step done, not a change.
		if cur, getErr := api.Get(ctx, h.svc.Name, metav1.GetOptions{}); getErr == nil && cur.UID == h.svc.UID &&
			handingOver(cur) && cur.Spec.ExternalName == x.fqdn(h.carrier) {
			h.svc = cur
			return nil
		}
	}
	switch {
	case err == nil:
		if x.o.HoldAfterDelete != nil {
			x.o.HoldAfterDelete(ctx, h.e.Key)
		}
		return nil
	case errors.As(err, &changed):
		x.notMoved(h.e.Key, changed.reason)
	case apierrors.IsNotFound(err):
		x.notMoved(h.e.Key, "deleted by another client during the apply")
	case apierrors.IsConflict(err):
		x.notMoved(h.e.Key, "replaced by another client during the apply (its UID changed); left as it is")
	default:
		return err
	}
	h.done, h.svc = true, old
	return x.deleteHelper(ctx, h.carrier)
}

// bridgeOld creates the bridge on the old IPs the release freed, with the new IPs as external
// IPs, serving at once from copies of the Service's EndpointSlices (which stay while it is
// ExternalName).
func (x *executor) bridgeOld(ctx context.Context, h *handOver) error {
	want := withExternalIPs(h.bridge, h.newIPs())
	b, found, err := x.createOnFreedIPs(ctx, want)
	if err != nil {
		return fmt.Errorf("creating the bridge %s/%s on the old IPs %v: %w", want.Namespace, want.Name, h.oldIPs(), err)
	}
	if found && !slices.Equal(b.Spec.ExternalIPs, want.Spec.ExternalIPs) {
		if b, err = x.setExternalIPs(ctx, b, h.newIPs(), nil); err != nil {
			return err
		}
	}
	// A bridge found is one a killed run created, perhaps before it copied the endpoints: until
	// kube-controller-manager writes its slice, its old IPs would be refused. Copies have fixed
	// names, so copying again what was copied already is a no-op.
	var copies []string
	if !found || len(x.currentSlices(k8sops.SvcKey(b))) == 0 {
		copies, err = x.copySlices(ctx, familiesOf(x.currentSlices(h.e.Key), b), b)
		if err != nil {
			x.note("%s: copying its endpoints to the bridge %s failed (%v): it answers once kube-controller-manager writes its EndpointSlice.", h.e.Key, b.Name, err)
		}
	}
	h.bridgeUp = b
	x.mu.Lock()
	defer x.mu.Unlock()
	switch h.kind {
	case bridgeDNS:
		x.bridgeUID, x.bridgeMirror = b.UID, append(x.bridgeMirror, copies...)
		x.res.BridgeCreated = k8sops.SvcKey(b)
	case bridgeOldIP:
		h.copies = copies
		x.res.OldIPBridgesCreated = append(x.res.OldIPBridgesCreated, OldIPBridge{Name: b.Name, For: h.e.Key,
			IPs: b.Spec.ClusterIPs, Created: b.CreationTimestamp.UTC()})
	}
	return nil
}

// repoint makes the Service ExternalName for the bridge: its name answers with the old IPs,
// which stay, while the carrier goes.
func (x *executor) repoint(ctx context.Context, h *handOver) error {
	return x.updateHandingOver(ctx, h, func(svc *corev1.Service) { svc.Spec.ExternalName = x.fqdn(h.bridge) })
}

// dropCarrier deletes the carrier: the bridge serves the new IPs until the Service takes them.
func (x *executor) dropCarrier(ctx context.Context, h *handOver) error {
	return x.deleteHelper(ctx, h.carrier)
}

// takeLag is how long take waits for the carrier's IPs to be free. The allocator lags behind a
// delete for a moment; and a carrier delete whose client was killed mid-request can leave its
// IPAddress behind (kube-apiserver releases it in the request's context): kube-apiserver's
// repair loop deletes such an orphan once it is 60 s old (pkg/registry/core/service/ipallocator/
// controller/repairip.go), counted from the carry. Between the carrier's delete and the take no
// other client can have been given those IPs but in that moment, so the wait is for them.
const takeLag = 70 * time.Second

// take makes the Service ClusterIP on its new IPs, with the fields of a ClusterIP Service as
// journaled. The carrier's IPs are free once its delete is through (takeLag).
func (x *executor) take(ctx context.Context, h *handOver) error {
	// Only the allocator's lag is waited for here; any other failure is the update's own, after
	// its retries.
	var err error
	for start := time.Now(); ; {
		err = x.updateHandingOver(ctx, h, func(svc *corev1.Service) { takeBack(svc, &h.e.Service) })
		if takenIP(err, h.newIPs()) < 0 || time.Since(start) > takeLag {
			break
		}
		every := 50 * time.Millisecond // the allocator's moment
		if time.Since(start) > 2*time.Second {
			every = time.Second // an orphan IPAddress, until the repair loop
		}
		if err := x.sleepUntil(ctx, time.Now().Add(every)); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	taken := h.svc
	h.took = time.Now()
	// Every field the hand-over's updates took goes back to its owner before the move (a Helm
	// chart's spec.type, kubectl's sessionAffinity): the mover keeps the IPs alone.
	// A sole former updater that reapplies nothing (an operator's client) gets every field back,
	// as a create under its name gives it after a delete (creator).
	mine := movedFields
	if creator(h.e.Owners, x.c.FieldManager) != x.c.FieldManager {
		mine = &fieldpath.Set{}
	}
	api := x.c.Kube.CoreV1().Services(taken.Namespace)
	giveFieldsBack(ctx, x, h.e.Key, taken, h.e.Owners, mine, api.Get, api.Update)
	var movedAt time.Time
	if h.e.Key == x.dnsKey {
		// The object keeps its creationTimestamp: the plans after this one read the time of the
		// move from its annotation (k8sops.MovedAt), the apiserver's time of the take.
		movedAt = updatedAt(taken, x.c.FieldManager, h.took)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k8sops.MovedAtAnnotation, movedAt.Format(time.RFC3339))
		err := k8sops.RetryWrite(ctx, func(bool) error {
			_, err := x.c.Kube.CoreV1().Services(taken.Namespace).Patch(ctx, taken.Name, types.MergePatchType, []byte(patch),
				metav1.PatchOptions{FieldManager: x.c.FieldManager})
			return err
		})
		if err != nil {
			x.note("%s moved at %s, but recording the time on it failed (%v): the next plan's dns_moved_at is its creation "+
				"time; set the roll's started_before to this apply's dns_moved_at.", h.e.Key, movedAt.Format(time.RFC3339), err)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.res.Recreated = append(x.res.Recreated, Move{Key: h.e.Key, UID: string(taken.UID), Type: serviceType(taken), OldIPs: h.oldIPs(), NewIPs: taken.Spec.ClusterIPs})
	if h.e.Key == x.dnsKey {
		x.res.DNSMovedAt = movedAt
	}
	return nil
}

// settle takes the new IPs off the bridge: the DNS bridge and an old-IP bridge stay on the old
// IPs, and a bridge that is not kept is removed by the run once the cluster DNS's answers
// naming the old IPs have expired (retireTransients).
func (x *executor) settle(ctx context.Context, h *handOver) error {
	b := h.bridgeUp
	if b == nil {
		cur, err := x.c.Kube.CoreV1().Services(h.bridge.Namespace).Get(ctx, h.bridge.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		b = cur
	}
	mark := map[string]string{}
	if h.kind == bridgeTransient {
		// From the take on, the Service's name answers with its new IPs; a resumed hand-over's
		// take was an earlier apply's, at the time the apiserver recorded.
		until := updatedAt(h.svc, x.c.FieldManager, time.Now()).Add(x.o.HandOver.DNSTTL)
		if !h.took.IsZero() {
			until = h.took.Add(x.o.HandOver.DNSTTL)
		}
		x.retireAfter(b, until)
		mark[handOverUntilAnnotation] = until.UTC().Format(time.RFC3339)
	}
	if len(b.Spec.ExternalIPs) > 0 || len(mark) > 0 {
		if _, err := x.setExternalIPs(ctx, b, nil, mark); err != nil {
			return err
		}
	}
	if h.kind == bridgeOldIP {
		x.waitOldIPBridge(ctx, oldIPBridgeRun{svc: b, copies: h.copies})
	}
	h.done = true
	return nil
}

// retireAfter records a bridge that is not kept, to be removed at until.
func (x *executor) retireAfter(b *corev1.Service, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.transients == nil {
		x.transients = map[types.UID]transientBridge{}
	}
	if t, ok := x.transients[b.UID]; !ok || until.After(t.until) {
		x.transients[b.UID] = transientBridge{key: k8sops.SvcKey(b), until: until}
	}
}

type transientBridge struct {
	key   string
	until time.Time
}

// retireTransients removes the bridges that are not kept once their time has come: the
// latest at most DNSTTL after the last take of the run. Then it reads the hand-over helpers of
// the journal group that are left, whatever left them (a cut-off run this one did not see), and
// removes those no Service mid-hand-over names: a bridge once its time has come (DNSTTL from
// now when it has none). One the run cannot wait for (ctx ended) stays, and the next apply
// removes it.
func (x *executor) retireTransients(ctx context.Context) error {
	x.mu.Lock()
	ts := maps.Clone(x.transients)
	x.mu.Unlock()
	var last time.Time
	for _, t := range ts {
		if t.until.After(last) {
			last = t.until
		}
	}
	if len(ts) > 0 {
		x.log("waiting for cached DNS answers naming the old IPs to expire before removing the hand-over bridges",
			map[string]any{"bridges": len(ts), "wait_ms": max(0, time.Until(last).Milliseconds())})
		if err := x.sleepUntil(ctx, last); err != nil {
			return bridgesLeft(err)
		}
		for uid, t := range ts {
			ns, name, _ := strings.Cut(t.key, "/")
			if err := x.deleteHelper(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}); err != nil {
				return err
			}
		}
	}
	left, err := x.leftHelpers(ctx)
	if err != nil || len(left) == 0 {
		return err
	}
	last = time.Time{}
	for _, h := range left {
		if h.Labels[HandOverLabel] != "bridge" {
			continue
		}
		until, err := time.Parse(time.RFC3339, h.Annotations[handOverUntilAnnotation])
		if err != nil {
			until = time.Now().Add(x.o.HandOver.DNSTTL)
		}
		if until.After(last) {
			last = until
		}
	}
	var names []string
	for _, h := range left {
		names = append(names, k8sops.SvcKey(&h))
	}
	x.log("removing hand-over helpers left behind", map[string]any{"helpers": strings.Join(names, ","), "wait_ms": max(0, time.Until(last).Milliseconds())})
	if err := x.sleepUntil(ctx, last); err != nil {
		return bridgesLeft(err)
	}
	for i := range left {
		if err := x.deleteHelper(ctx, &left[i]); err != nil {
			return err
		}
	}
	return nil
}

// sleepUntil waits until t, or fails when ctx ends first.
func (x *executor) sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// bridgesLeft says why the hand-over bridges are not removed yet.
func bridgesLeft(err error) error {
	return fmt.Errorf("interrupted (%v) before the hand-over bridges were removed: the next apply removes them", err)
}

// leftHelpers are the carriers and bridges of the journal group's hand-overs in the cluster
// that no Service mid-hand-over names (read from the API, one list by label).
func (x *executor) leftHelpers(ctx context.Context) ([]corev1.Service, error) {
	var out []corev1.Service
	group := x.o.Journal.group()
	list := x.c.Kube.CoreV1().Services("").List
	err := k8sops.EachItem(ctx, k8sops.ListPages(func(ctx context.Context, o metav1.ListOptions) (*corev1.ServiceList, error) {
		o.LabelSelector = HandOverLabel
		return list(ctx, o)
	}), func(svc *corev1.Service) error {
		if groupOf(svc.Labels) != group {
			return nil
		}
		ns, name, _ := strings.Cut(svc.Annotations[k8sops.BridgeForAnnotation], "/")
		if name != "" {
			owner, err := x.c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil && handingOver(owner) && owner.Spec.ExternalName == x.fqdn(svc) {
				return nil // its Service's hand-over goes on from it: the restore finishes it
			}
		}
		out = append(out, *svc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the hand-overs' carriers and bridges: %w", err)
	}
	return out, nil
}

// sweepHandOvers finishes, at the start of a run, what a cut-off hand-over of this journal
// group left that its Service's restore does not: a carrier or a bridge that is not kept whose
// Service no longer names it (deleted now, or when its time comes), and new IPs still carried
// by a bridge as external IPs.
func (x *executor) sweepHandOvers(ctx context.Context, services []corev1.Service) error {
	named := map[string]bool{} // the names Services mid-hand-over point at
	for _, svc := range services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName && svc.Annotations[handOverToAnnotation] != "" {
			named[svc.Spec.ExternalName] = true
		}
	}
	group := x.o.Journal.group()
	for i := range services {
		svc := &services[i]
		if named[x.fqdn(svc)] {
			continue
		}
		switch {
		case svc.Labels[HandOverLabel] == "carrier" && groupOf(svc.Labels) == group:
			if err := x.deleteHelper(ctx, svc); err != nil {
				return err
			}
		case svc.Labels[HandOverLabel] == "bridge" && groupOf(svc.Labels) == group:
			until, err := time.Parse(time.RFC3339, svc.Annotations[handOverUntilAnnotation])
			if err != nil {
				until = time.Now().Add(x.o.HandOver.DNSTTL) // cut off before its settle: when the take was is not known
			}
			x.retireAfter(svc, until)
		case svc.Annotations[handOverIPsAnnotation] != "" && len(svc.Spec.ExternalIPs) > 0:
			if _, err := x.setExternalIPs(ctx, svc, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteHelper deletes a carrier or bridge (with its UID as precondition when known).
func (x *executor) deleteHelper(ctx context.Context, svc *corev1.Service) error {
	var pre *metav1.Preconditions
	if svc.UID != "" {
		pre = &metav1.Preconditions{UID: &svc.UID}
	}
	err := k8sops.RetryWrite(ctx, func(bool) error {
		return x.c.Kube.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{Preconditions: pre})
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s: %w", k8sops.SvcKey(svc), err)
	}
	return nil
}

// setExternalIPs sets a bridge's external IPs to ips (none: nil), marking the ones it carries
// for a hand-over so that a cut-off run's are found again, and sets the annotations mark.
func (x *executor) setExternalIPs(ctx context.Context, b *corev1.Service, ips []string, mark map[string]string) (*corev1.Service, error) {
	api := x.c.Kube.CoreV1().Services(b.Namespace)
	var out *corev1.Service
	err := k8sops.RetryWrite(ctx, func(bool) error {
		cur, err := api.Get(ctx, b.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := withExternalIPs(cur, ips)
		maps.Copy(next.Annotations, mark)
		out, err = api.Update(ctx, next, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
		return err
	}, apierrors.IsConflict)
	if err != nil {
		return nil, fmt.Errorf("setting the external IPs of %s to %v: %w", k8sops.SvcKey(b), ips, err)
	}
	return out, nil
}

// updateHandingOver changes the Service mid-hand-over (read again on a conflict, retried as
// writes are); one that is no longer mid-hand-over was finished by another apply, and is taken
// as it is.
func (x *executor) updateHandingOver(ctx context.Context, h *handOver, change func(*corev1.Service)) error {
	api := x.c.Kube.CoreV1().Services(h.svc.Namespace)
	return k8sops.RetryWrite(ctx, func(bool) error {
		cur, err := api.Get(ctx, h.svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != h.svc.UID {
			return fmt.Errorf("replaced by another client mid-hand-over (its UID changed)")
		}
		if cur.Annotations[handOverToAnnotation] == "" {
			h.svc = cur
			return nil
		}
		next := cur.DeepCopy()
		change(next)
		updated, err := api.Update(ctx, next, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
		if err == nil {
			h.svc = updated
		}
		return err
	}, apierrors.IsConflict)
}

// externalNameOf is svc as ExternalName for name, marked with the IPs it moves to: without the
// fields only a ClusterIP Service has, which takeBack sets again from the journal.
func externalNameOf(svc *corev1.Service, name string, to []string) *corev1.Service {
	next := svc.DeepCopy()
	next.ManagedFields = nil // the server's stay
	next.Spec.Type = corev1.ServiceTypeExternalName
	next.Spec.ExternalName = name
	next.Spec.ClusterIP, next.Spec.ClusterIPs = "", nil
	next.Spec.IPFamilies, next.Spec.IPFamilyPolicy = nil, nil
	next.Spec.InternalTrafficPolicy = nil
	next.Spec.SessionAffinity, next.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[handOverToAnnotation] = strings.Join(to, ",")
	return next
}

// takeBack sets svc, mid-hand-over, to the journaled Service's type and ClusterIP fields at its
// new IPs, and drops the hand-over's mark.
func takeBack(svc, journaled *corev1.Service) {
	svc.Spec.Type = journaled.Spec.Type
	svc.Spec.ExternalName = ""
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = journaled.Spec.ClusterIP, slices.Clone(journaled.Spec.ClusterIPs)
	svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = slices.Clone(journaled.Spec.IPFamilies), journaled.Spec.IPFamilyPolicy
	svc.Spec.InternalTrafficPolicy = journaled.Spec.InternalTrafficPolicy
	svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig = journaled.Spec.SessionAffinity, journaled.Spec.SessionAffinityConfig.DeepCopy()
	for i, p := range svc.Spec.Ports { // a Service made NodePort by another client mid-move gets its node ports back
		if j := slices.IndexFunc(journaled.Spec.Ports, func(q corev1.ServicePort) bool { return q.Port == p.Port && q.Protocol == p.Protocol }); j >= 0 {
			svc.Spec.Ports[i].NodePort = journaled.Spec.Ports[j].NodePort
		}
	}
	delete(svc.Annotations, handOverToAnnotation)
	if prev := journaled.Annotations[k8sops.PreviousClusterIPsAnnotation]; prev != "" {
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[k8sops.PreviousClusterIPsAnnotation] = prev
	}
}

// withExternalIPs is a copy of b with ips (none: nil) as external IPs, marked as the
// hand-over's.
func withExternalIPs(b *corev1.Service, ips []string) *corev1.Service {
	out := b.DeepCopy()
	out.Spec.ExternalIPs = slices.Clone(ips)
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	if len(ips) > 0 {
		out.Annotations[handOverIPsAnnotation] = strings.Join(ips, ",")
	} else {
		delete(out.Annotations, handOverIPsAnnotation)
	}
	return out
}

// familiesOf are the slices among from of the address families svc has.
func familiesOf(from []discoveryv1.EndpointSlice, svc *corev1.Service) []discoveryv1.EndpointSlice {
	return slices.DeleteFunc(slices.Clone(from), func(s discoveryv1.EndpointSlice) bool {
		return !slices.Contains(svc.Spec.IPFamilies, corev1.IPFamily(s.AddressType))
	})
}

// updatedAt is when manager last updated svc, as the apiserver recorded it; else fallback.
func updatedAt(svc *corev1.Service, manager string, fallback time.Time) time.Time {
	for _, f := range svc.ManagedFields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationUpdate && f.Time != nil {
			return f.Time.UTC()
		}
	}
	return fallback.UTC()
}

// handingOver reports whether svc is mid-hand-over: ExternalName for its carrier or bridge.
func handingOver(svc *corev1.Service) bool {
	return svc != nil && svc.Spec.Type == corev1.ServiceTypeExternalName && svc.Annotations[handOverToAnnotation] != ""
}
