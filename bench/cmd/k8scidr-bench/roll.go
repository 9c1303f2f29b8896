// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/polymorphichelpers"
)

// roll is scenario 3: restart o.rollDep two-replica Deployments, with kube-controller-manager
// at the given setting.
func (b *bench) roll(ctx context.Context, setting string) error {
	scenario := fmt.Sprintf("3. roll %d Deployments", b.o.rollDep)
	contenders := []string{"k8scidr", rollBest, rollFloor, "kubectl rollout loop, serial", fmt.Sprintf("kubectl rollout loop, xargs -P %d", rollWorkers)}
	for round := range b.o.rounds {
		for _, who := range contenders {
			run := b.nextRun()
			logf("%s, round %d: %s", scenario, round+1, who)
			// The previous run's namespaces are still being deleted: wait, so that every
			// contender starts on a cluster doing nothing else.
			if err := waitNamespacesGone(ctx, b.kube); err != nil {
				return err
			}
			m, err := b.rollOnce(ctx, run, who, b.o.rollDep)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", who, round+1, err)
			}
			b.table.add(scenario, setting, who, m)
		}
	}
	return nil
}

func (b *bench) rollOnce(ctx context.Context, run int, who string, n int) (measure, error) {
	var nss, pairs []string
	for j := 0; j*50 < n; j++ {
		ns := fmt.Sprintf("r%d-%d", run, j)
		if err := createNamespace(ctx, b.kube, ns); err != nil {
			return measure{}, err
		}
		nss = append(nss, ns)
	}
	defer deleteNamespaces(context.WithoutCancel(ctx), b.kube, nss)
	err := parallel(n, 20, func(i int) error {
		ns := nss[i/50]
		_, err := b.kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, fmt.Sprintf("w%03d", i), 2), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return measure{}, err
	}
	for i := range n {
		pairs = append(pairs, fmt.Sprintf("%s w%03d", nss[i/50], i))
	}
	if err := b.waitRolled(ctx, nss, n, false); err != nil {
		return measure{}, fmt.Errorf("the Deployments are not available before the roll: %w", err)
	}
	time.Sleep(1100 * time.Millisecond) // started_before has second granularity
	stamp := time.Now().UTC().Format(time.RFC3339)
	before, ctlBefore := b.proxy.requests.Load(), b.scrapeRoll(ctx)
	start := time.Now()
	var m measure
	switch who {
	case "k8scidr", rollBest:
		par := rollWorkers
		if who == rollBest {
			par = rollBestParallelism
		}
		var w *workspace
		w, err = newWorkspace(b.bin, b.self, b.kubeconfig, fmt.Sprintf(rollConfig, quoted(nss), stamp, par))
		if err != nil {
			return m, err
		}
		defer w.close()
		m.wall, m.rss, err = w.run("apply", "-auto-approve", "-input=false", "-no-color")
	case rollFloor:
		err = b.rollFloor(ctx, pairs)
		m.wall = time.Since(start)
	default:
		workers := 1
		if strings.Contains(who, "xargs") {
			workers = rollWorkers
		}
		keys := make([]string, len(pairs))
		for i, p := range pairs {
			keys[i] = strings.Replace(p, " ", "/", 1)
		}
		err = b.xargsLoop(ctx, "rollout-restart.sh", keys, workers)
		m.wall = time.Since(start)
	}
	m.requests = b.proxy.requests.Load() - before
	if err != nil {
		return m, err
	}
	// Every Deployment must have been restarted and be complete again.
	if err := b.waitRolled(ctx, nss, n, true); err != nil {
		return m, err
	}
	m.controllers = delta(ctlBefore, b.scrapeRoll(ctx))
	return m, nil
}

var rollConfig = providerBlock + `
data "k8scidr_workload_restarts" "bench" {
  namespaces     = [%s]
  started_before = %q
}

resource "k8scidr_workload_roll" "bench" {
  plan        = data.k8scidr_workload_restarts.bench
  parallelism = %d
}
`

// The roll's floor, and the provider at a parallelism high enough that the controllers, not the
// provider, set the pace (at its default of 5, 200 Deployments roll in 40 waves).
const (
	rollFloor           = "floor (client-go)"
	rollBest            = "k8scidr, parallelism 50"
	rollBestParallelism = 50
)

// rollFloor is the least any tool must do: stamp restartedAt on every Deployment at once (as many
// in flight as the shared budget lets through), then watch until every rollout is complete, as
// kubectl's rollout status judges it.
func (b *bench) rollFloor(ctx context.Context, pairs []string) error {
	kube, err := kubernetes.NewForConfig(b.proxy.restConfig(clientQPS, clientBurst))
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, p := range pairs {
		want[strings.Replace(p, " ", "/", 1)] = true
	}
	f := informers.NewSharedInformerFactory(kube, 0)
	inf := f.Apps().V1().Deployments().Informer()
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the floor's Deployment watch did not sync")
	}
	viewer, err := polymorphichelpers.StatusViewerFor(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil {
		return err
	}
	patch := restartPatch()
	err = parallel(len(pairs), 50, func(i int) error {
		ns, name, _ := strings.Cut(pairs[i], " ")
		_, err := kube.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		done := 0
		for _, o := range inf.GetStore().List() {
			d, ok := o.(*appsv1.Deployment)
			if !ok || !want[d.Namespace+"/"+d.Name] || d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
				continue
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
			if err != nil {
				return false, err
			}
			if _, complete, err := viewer.Status(&unstructured.Unstructured{Object: u}, 0); err == nil && complete {
				done++
			}
		}
		return done == len(want), nil
	})
}

// restartPatch is what `kubectl rollout restart` writes to a Deployment: its pod template's
// restartedAt annotation, now.
func restartPatch() []byte {
	return fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
}

// waitRolled waits until all n Deployments are complete (and, with restarted, carry a
// restartedAt annotation on their template), or says how many are not.
func (b *bench) waitRolled(ctx context.Context, nss []string, n int, restarted bool) error {
	left := n
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute+time.Duration(n)*300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		done := 0
		for _, ns := range nss {
			l, err := b.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, d := range l.Items {
				_, annotated := d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]
				if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 2 && d.Status.AvailableReplicas == 2 &&
					d.Status.Replicas == 2 && (annotated || !restarted) {
					done++
				}
			}
		}
		left = n - done
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d Deployments not rolled out: %w", left, n, err)
	}
	return nil
}
