// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

const (
	drainOldPool = "10.0.0.0/16"
	drainNewPool = "10.1.0.0/16"
	drainDelay   = 5 * time.Second // the destroy waits this long before the pods are restarted
)

var drainConfig = providerBlock + `
resource "k8scidr_calico_ippool" "old" {
  name         = "old-pool"
  cidr         = %q
  ipip_mode    = "Always"
  nat_outgoing = true
  timeouts { delete = "30m" }
}
`

// drain is scenario 6: the destroy of a Calico pool holding o.drainPods pods, on a cluster of its
// own with Calico's CRDs and Calico's IPAM giving the pods their addresses (kube-controller-manager
// raised). The destroy (deletion_policy wait_for_drain) starts; drainDelay later every Deployment is
// restarted, and the pods take addresses from the other pool. It records the provider's API
// requests over the whole destroy, and the time from the last pod leaving the old pool to the pool
// being gone: what the drain's watch costs and how late it notices.
func (b *bench) drain(ctx context.Context) error {
	n := b.o.drainPods
	scenario := fmt.Sprintf("6. drain a pool of %d pods", n)
	logf("%s: starting a loopback cluster with Calico (%d kwok nodes)", scenario, n/100+10)
	c, err := testcluster.Start(ctx, testcluster.Options{Nodes: n/100 + 10, Calico: testcluster.Calico331, BinDir: b.bin,
		ControllerManagerFlags: kcmRaised, SchedulerFlags: []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}})
	if err != nil {
		return err
	}
	defer c.Stop()
	ipam, err := c.StartCalicoIPAM(ctx)
	if err != nil {
		return err
	}
	fast := *c.RESTConfig
	fast.QPS, fast.Burst, fast.WarningHandler = 1000, 2000, rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(&fast)
	if err != nil {
		return err
	}
	px, err := startProxy(c.RESTConfig, clientQPS, clientBurst)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.Dir, "proxy.kubeconfig")
	if err := px.kubeconfig(kubeconfig); err != nil {
		return err
	}
	w, err := newWorkspace(b.bin, b.self, kubeconfig, fmt.Sprintf(drainConfig, drainOldPool))
	if err != nil {
		return err
	}
	defer w.close()
	if _, _, err := w.run("apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		return err
	}
	deps, start := n/20, time.Now()
	if err := createNamespace(ctx, kube, "drain"); err != nil {
		return err
	}
	if err := parallel(deps, 20, func(i int) error {
		_, err := kube.AppsV1().Deployments("drain").Create(ctx, deployment("drain", fmt.Sprintf("d%03d", i), 20), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	oldPool, newPool := netip.MustParsePrefix(drainOldPool), netip.MustParsePrefix(drainNewPool)
	if err := waitPodsIn(ctx, kube, n, oldPool); err != nil {
		return fmt.Errorf("%w (calico-ipam: %v)", err, ipam.Errors())
	}
	logf("%d pods got addresses of the old pool from Calico's IPAM in %s", n, time.Since(start).Round(time.Second))
	if err := c.CreateCalicoPool(ctx, "crd.projectcalico.org/v1", "new-pool", map[string]any{"cidr": drainNewPool,
		"ipipMode": "Always", "natOutgoing": true, "nodeSelector": "all()"}); err != nil {
		return err
	}
	lastLeft, poolGone, stop, err := watchDrain(ctx, kube, &fast, oldPool)
	if err != nil {
		return err
	}
	defer stop()
	if err := w.rewrite(providerBlock); err != nil {
		return err
	}
	before := px.requests.Load()
	restartErr := make(chan error, 1)
	go func() {
		time.Sleep(drainDelay)
		patch := restartPatch()
		restartErr <- parallel(deps, 20, func(i int) error {
			_, err := kube.AppsV1().Deployments("drain").Patch(ctx, fmt.Sprintf("d%03d", i), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}()
	var m measure
	m.wall, m.rss, err = w.run("apply", "-auto-approve", "-input=false", "-no-color")
	m.requests = px.requests.Load() - before
	if err != nil {
		return err
	}
	if err := <-restartErr; err != nil {
		return err
	}
	if err := waitPodsIn(ctx, kube, n, newPool); err != nil {
		return err
	}
	m.drainTail = poolGone().Sub(lastLeft())
	logf("%s: destroy %s, %d requests, pool gone %s after the last pod left the old pool", scenario,
		m.wall.Round(time.Millisecond), m.requests, m.drainTail.Round(time.Millisecond))
	b.table.add(scenario, settingRaised, "k8scidr", m)
	return nil
}

// waitPodsIn waits until n pods of namespace drain are Running with an address in pool.
func waitPodsIn(ctx context.Context, kube kubernetes.Interface, n int, pool netip.Prefix) error {
	got := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().Pods("drain").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		got = 0
		for _, p := range l.Items {
			if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil && pool.Contains(ip) && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				got++
			}
		}
		return got == n, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods running in %s: %w", got, n, pool, err)
	}
	return nil
}

// watchDrain watches, with the harness's own client, when the last pod holding an address of pool
// goes, and when the old pool's IPPool is deleted.
func watchDrain(ctx context.Context, kube kubernetes.Interface, cfg *rest.Config, pool netip.Prefix) (lastLeft, poolGone func() time.Time, stop func(), err error) {
	var mu sync.Mutex
	holders := map[string]bool{}
	var left, gone time.Time
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace("drain"))
	pods := f.Core().V1().Pods().Informer()
	update := func(o any, deleted bool) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		mu.Lock()
		defer mu.Unlock()
		if !deleted && err == nil && pool.Contains(ip) {
			holders[p.Name] = true
			return
		}
		if holders[p.Name] {
			delete(holders, p.Name)
			if len(holders) == 0 {
				left = time.Now()
			}
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) { update(o, false) },
		UpdateFunc: func(_, o any) { update(o, false) }, DeleteFunc: func(o any) { update(o, true) }}); err != nil {
		return nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ippools := dyn.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"})
	done := make(chan struct{})
	f.Start(done)
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		close(done)
		return nil, nil, nil, fmt.Errorf("the drain watch did not sync")
	}
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, false, func(ctx context.Context) (bool, error) {
			select {
			case <-done:
				return true, nil
			default:
			}
			if _, err := ippools.Get(ctx, "old-pool", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				mu.Lock()
				gone = time.Now()
				mu.Unlock()
				return true, nil
			}
			return false, nil
		})
	}()
	read := func(t *time.Time) func() time.Time {
		return func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return *t
		}
	}
	return read(&left), read(&gone), func() { close(done) }, nil
}
