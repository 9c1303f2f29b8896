// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// What may refuse a Service create during an apply, kept current by watches: the webhook
// configurations, ValidatingAdmissionPolicies and ResourceQuotas, listed once and watched for
// the whole run instead of listed every admissionRelist.
package recreation

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// admissionGuards is what may refuse a Service create beyond the built-in plugins (policies and
// webhooks matching it: matchingConfigs) and the namespaces whose ResourceQuota counts
// Services. The dry run before a delete is asked only where one of them could refuse, or the
// built-in DenyServiceExternalIPs plugin (a Service with externalIPs), which no API lists:
// elsewhere nothing can, and each dry run costs requests (the dry run's range pick takes 8 on
// average: dryRunTries).
//
// Watched (watch), they are current within a watch event's latency at the cost of one list and
// one watch each for the run. Without the watches (not started, not synced, or one failed: a
// role without the watch verb, a lost connection) they are listed again at most every
// admissionRelist, so that a policy rolled out during a long apply is known within that time.
// The zero value relists; a failed listing asks everywhere.
type admissionGuards struct {
	mu       sync.Mutex
	w        *guardWatch
	seen     int64 // the watch's generation configs and quotas were derived from
	listedAt time.Time
	configs  []string
	quotas   map[string]bool
	err      error
}

const admissionRelist = 2 * time.Second

// current returns whether admission may refuse svc (isNew: a Service more, which a full quota
// refuses), by the watches or a listing of at most admissionRelist ago.
func (g *admissionGuards) current(ctx context.Context, c *k8sops.Client) func(svc *corev1.Service, isNew bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.w.ready():
		if gen := g.w.gen.Load(); gen != g.seen || g.listedAt.IsZero() {
			g.configs, g.quotas = g.w.derive()
			g.err = nil
			g.seen, g.listedAt = gen, time.Now()
		}
	case g.listedAt.IsZero() || time.Since(g.listedAt) >= admissionRelist:
		g.configs, g.err = admissionConfigs(ctx, c)
		if g.err == nil {
			g.quotas, g.err = serviceQuotaNamespaces(ctx, c)
		}
		g.listedAt = time.Now()
	}
	everywhere, quotas := g.err != nil || len(g.configs) > 0, g.quotas
	return func(svc *corev1.Service, isNew bool) bool {
		return everywhere || len(svc.Spec.ExternalIPs) > 0 || (isNew && quotas[svc.Namespace])
	}
}

// guardWatch holds one informer per input of admissionGuards.
type guardWatch struct {
	runWatch
	vwc, mwc, quotas cache.SharedInformer
	policies         cache.SharedInformer // ValidatingAdmissionPolicies, v1 or v1beta1; nil where neither is served
	gen              atomic.Int64         // bumped by every event
}

// startGuardWatch starts the guards' watches for a run and waits for them; stop ends them.
// Watches that cannot start or sync within 10 seconds leave the guards relisting (a nil
// guardWatch), and log says so: never an error.
func startGuardWatch(ctx context.Context, c *k8sops.Client, log func(string, map[string]any)) (gw *guardWatch, stop func()) {
	w := &guardWatch{runWatch: newRunWatch()}
	k := c.Kube.AdmissionregistrationV1()
	w.vwc = guardInformer(w, c.Kube, &admissionv1.ValidatingWebhookConfiguration{}, k.ValidatingWebhookConfigurations().List, k.ValidatingWebhookConfigurations().Watch)
	w.mwc = guardInformer(w, c.Kube, &admissionv1.MutatingWebhookConfiguration{}, k.MutatingWebhookConfigurations().List, k.MutatingWebhookConfigurations().Watch)
	w.quotas = guardInformer(w, c.Kube, &corev1.ResourceQuota{}, c.Kube.CoreV1().ResourceQuotas("").List, c.Kube.CoreV1().ResourceQuotas("").Watch)
	// The served version of ValidatingAdmissionPolicy, found as k8sops.ListAdmissionPolicies does.
	one := metav1.ListOptions{Limit: 1}
	v1, beta := k.ValidatingAdmissionPolicies(), c.Kube.AdmissionregistrationV1beta1().ValidatingAdmissionPolicies()
	_, err := v1.List(ctx, one)
	if err == nil {
		w.policies = guardInformer(w, c.Kube, &admissionv1.ValidatingAdmissionPolicy{}, v1.List, v1.Watch)
	} else if apierrors.IsNotFound(err) {
		if _, err = beta.List(ctx, one); err == nil {
			w.policies = guardInformer(w, c.Kube, &admissionv1beta1.ValidatingAdmissionPolicy{}, beta.List, beta.Watch)
		} else if apierrors.IsNotFound(err) {
			err = nil // neither served: no policy can refuse
		}
	}
	if err != nil {
		log("admission guards are listed every "+admissionRelist.String()+": the ValidatingAdmissionPolicy list failed", map[string]any{"error": err.Error()})
		return nil, func() {}
	}
	if !w.start(ctx, w.vwc, w.mwc, w.quotas, w.policies) {
		log("admission guards are listed every "+admissionRelist.String()+": watching them failed (the role needs watch on "+
			"webhook configurations, ValidatingAdmissionPolicies and ResourceQuotas)", nil)
		return nil, func() {}
	}
	return w, w.stop
}

// watch starts the guards' watches for a run (startGuardWatch) and follows them; stop ends them.
func (g *admissionGuards) watch(ctx context.Context, c *k8sops.Client, log func(string, map[string]any)) (stop func()) {
	w, stop := startGuardWatch(ctx, c, log)
	g.use(w)
	return stop
}

// use makes the guards follow w (nil: relist).
func (g *admissionGuards) use(w *guardWatch) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.w = w
}

// guardInformer is an informer over one cluster-wide list and watch that bumps w.gen on every
// event and, on any list or watch error (a role without the watch verb, a watch the apiserver
// ended with an error), marks w failed and stops the watches: relisting takes over for the
// rest of the run.
// kube is the clientset the functions belong to (a fake one says it cannot stream lists).
func guardInformer[L runtime.Object](w *guardWatch, kube any, obj runtime.Object, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.SharedInformer {
	inf := cache.NewSharedInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) },
		WatchFuncWithContext: watchFn,
	}, kube), obj, 0)
	_ = inf.SetWatchErrorHandler(w.fail)
	bump := func(any) { w.gen.Add(1) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: bump, UpdateFunc: func(_, o any) { bump(o) }, DeleteFunc: bump})
	return inf
}

// watched is the run's watch, nil before it is up.
func (g *admissionGuards) watched() *guardWatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.w
}

// ready says whether the watches are synced and none has failed.
func (w *guardWatch) ready() bool {
	return w != nil && !w.failed.Load()
}

// derive is what admissionGuards needs from the watched objects.
func (w *guardWatch) derive() (configs []string, quotas map[string]bool) {
	var vwc []admissionv1.ValidatingWebhookConfiguration
	var mwc []admissionv1.MutatingWebhookConfiguration
	var policies []admissionv1.ValidatingAdmissionPolicy
	var rqs []*corev1.ResourceQuota
	for _, o := range w.vwc.GetStore().List() {
		if v, ok := o.(*admissionv1.ValidatingWebhookConfiguration); ok {
			vwc = append(vwc, *v)
		}
	}
	for _, o := range w.mwc.GetStore().List() {
		if m, ok := o.(*admissionv1.MutatingWebhookConfiguration); ok {
			mwc = append(mwc, *m)
		}
	}
	if w.policies != nil {
		for _, o := range w.policies.GetStore().List() {
			switch p := o.(type) {
			case *admissionv1.ValidatingAdmissionPolicy:
				policies = append(policies, *p)
			case *admissionv1beta1.ValidatingAdmissionPolicy:
				policies = append(policies, k8sops.AdmissionPolicyV1(p))
			}
		}
	}
	for _, o := range w.quotas.GetStore().List() {
		if q, ok := o.(*corev1.ResourceQuota); ok {
			rqs = append(rqs, q)
		}
	}
	return matchingConfigs(vwc, mwc, policies), quotaNamespaces(rqs)
}
