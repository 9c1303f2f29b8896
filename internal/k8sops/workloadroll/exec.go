// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Workload roll execution: `kubectl rollout restart` for each planned workload (kubectl's own
// restarter), waiting by kubectl's rollout-status rules, `first` before the rest.
package workloadroll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/kubectl/pkg/polymorphichelpers"
	"k8s.io/kubectl/pkg/scheme"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// RollExecOptions shape ExecuteRoll.
type RollExecOptions struct {
	Parallelism     int  // concurrent rollouts after First; default 5
	Wait            bool // wait for each rollout by kubectl's rollout-status rules
	ContinueOnError bool
	Log             func(format string, args ...any)
}

// Rolled is the outcome of one workload's restart.
type Rolled struct {
	Key      string
	Duration time.Duration
	Err      error
}

// ExecuteRoll restarts the steps' workloads: First one after another, each waited for, then the
// rest with Parallelism at a time. Without ContinueOnError the first failure stops new
// restarts. Bare pods (PodKeys) are evicted last, so PodDisruptionBudgets hold.
func ExecuteRoll(ctx context.Context, c *k8sops.Client, p RollSteps, o RollExecOptions) ([]Rolled, error) {
	if o.Parallelism <= 0 {
		o.Parallelism = 5
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	var firsts, rest, pods []string
	for _, key := range p.Order {
		_, _, isPod := parsePodKey(key)
		switch {
		case isPod:
			pods = append(pods, key)
		case slices.Contains(p.First, key):
			firsts = append(firsts, key)
		default:
			rest = append(rest, key)
		}
	}
	var out []Rolled
	var mu sync.Mutex
	failed := false
	record := func(r Rolled) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, r)
		if r.Err != nil {
			failed = true
		}
	}
	stop := func() bool { mu.Lock(); defer mu.Unlock(); return failed && !o.ContinueOnError }
	for _, key := range firsts {
		if stop() {
			break
		}
		record(rollOne(ctx, c, key, o))
	}
	sem := make(chan struct{}, o.Parallelism)
	var wg sync.WaitGroup
	for _, key := range rest {
		if stop() || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if !stop() {
				record(rollOne(ctx, c, key, o))
			}
		})
	}
	wg.Wait()
	evicted := map[string][]string{} // namespace → names
	for _, pod := range pods {
		if stop() {
			break
		}
		r := evict(ctx, c, pod)
		record(r)
		if ns, name, _ := parsePodKey(pod); r.Err == nil {
			evicted[ns] = append(evicted[ns], name)
		}
	}
	if o.Wait {
		for ns, names := range evicted {
			if err := waitTerminated(ctx, c, ns, func(p *corev1.Pod, _ map[string]string) bool { return slices.Contains(names, p.Name) }, o.Log); err != nil {
				record(Rolled{Key: "pods in " + ns, Err: err})
			}
		}
	}
	slices.SortFunc(out, func(a, b Rolled) int { return strings.Compare(a.Key, b.Key) })
	var errs []error
	for _, r := range out {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Key, r.Err))
		}
	}
	return out, errors.Join(errs...)
}

func rollOne(ctx context.Context, c *k8sops.Client, key string, o RollExecOptions) Rolled {
	start := time.Now()
	r := Rolled{Key: key}
	ns, kind, name, err := ParseWorkloadKey(key)
	var generation int64 // the workload's generation with the restart in it
	if err == nil {
		var stamp string // the restartedAt the first attempt wrote, should its answer be lost
		err = k8sops.RetryWrite(ctx, func(again bool) error {
			var err error
			generation, err = restart(ctx, c, ns, kind, name, again, &stamp)
			return err
		})
	}
	if err == nil && o.Wait {
		o.Log("waiting for %s to roll out", key)
		err = waitRollout(ctx, c, ns, kind, name, generation)
	}
	if err == nil && o.Wait {
		err = waitTerminated(ctx, c, ns, func(p *corev1.Pod, rsOwner map[string]string) bool {
			k, _ := podWorkload(p, rsOwner)
			return k == key
		}, o.Log)
	}
	r.Duration, r.Err = time.Since(start), err
	o.Log("%s restarted in %s (error: %v)", key, r.Duration.Round(time.Millisecond), err)
	return r
}

// restart is `kubectl rollout restart`: kubectl's restarter sets the restartedAt annotation on
// the pod template, sent as a strategic merge patch of the difference. stamp is the value
// written; when again, a template that already has it was restarted by the earlier attempt.
// It returns the workload's generation that holds the restart.
func restart(ctx context.Context, c *k8sops.Client, ns, kind, name string, again bool, stamp *string) (int64, error) {
	apps := c.Kube.AppsV1()
	var obj runtime.Object
	var err error
	switch kind {
	case KindDeployment:
		obj, err = apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	case KindStatefulSet:
		obj, err = apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	default:
		obj, err = apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return 0, err
	}
	before, err := runtime.Encode(scheme.DefaultJSONEncoder(), obj)
	if err != nil {
		return 0, err
	}
	if again && *stamp != "" && restartedAt(before) == *stamp {
		return generationOf(obj), nil
	}
	after, err := polymorphichelpers.ObjectRestarterFn(obj.DeepCopyObject())
	if err != nil {
		return 0, err
	}
	*stamp = restartedAt(after)
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, obj)
	if err != nil {
		return 0, err
	}
	opts := metav1.PatchOptions{FieldManager: c.FieldManager}
	switch kind {
	case KindDeployment:
		obj, err = apps.Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
	case KindStatefulSet:
		obj, err = apps.StatefulSets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
	default:
		obj, err = apps.DaemonSets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
	}
	if err != nil {
		return 0, err
	}
	return generationOf(obj), nil
}

func generationOf(obj runtime.Object) int64 {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetGeneration()
	}
	return 0
}

// restartedAt is the `kubectl rollout restart` annotation of a workload's pod template, from
// the workload's JSON.
func restartedAt(workload []byte) string {
	var w struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	if json.Unmarshal(workload, &w) != nil {
		return ""
	}
	return w.Spec.Template.Metadata.Annotations["kubectl.kubernetes.io/restartedAt"] // kubectl's restarter writes it
}

// waitRollout watches the workload, as `kubectl rollout status` does, until kubectl's status
// viewer reports it done: each rollout ends the moment its last status update arrives. A
// Deployment past its progress deadline fails at once; otherwise ctx bounds the wait, and the
// error then says where the rollout stands and which pods are not ready. Objects older than
// generation are not judged: the watch's first list can come from the apiserver's cache from
// before the restart, where the previous rollout looks complete.
func waitRollout(ctx context.Context, c *k8sops.Client, ns, kind, name string, generation int64) error {
	viewer, err := polymorphichelpers.StatusViewerFor(schema.GroupKind{Group: "apps", Kind: kind})
	if err != nil {
		return err
	}
	api := c.Dynamic.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: strings.ToLower(kind) + "s"}).Namespace(ns)
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return api.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return api.Watch(ctx, o)
		},
	}
	var msg string
	_, err = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(e watch.Event) (bool, error) {
		switch e.Type {
		case watch.Deleted:
			return false, fmt.Errorf("%s %s/%s was deleted during its rollout", kind, ns, name)
		case watch.Added, watch.Modified:
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				return false, fmt.Errorf("unexpected watch object %T", e.Object)
			}
			if u.GetGeneration() < generation {
				return false, nil
			}
			status, done, err := viewer.Status(u, 0)
			msg = status
			return done, err
		}
		return false, nil
	})
	if err == nil || ctx.Err() == nil {
		return err
	}
	stuck := notReadyPods(context.WithoutCancel(ctx), c, ns, kind, name)
	return fmt.Errorf("no rollout progress before the timeout: %s; pods not ready: %s", strings.TrimSpace(msg), stuck)
}

// terminatingSlack is how long past a terminating pod's own grace period the roll waits for it
// before it leaves it to the next stage's checks.
const terminatingSlack = 15 * time.Second

// waitTerminated waits until no pod of namespace ns that mine picks is terminating. A rollout is
// complete while the pods it replaced still terminate, and a terminating pod runs until its
// containers exit, with the resolv.conf, KUBERNETES_SERVICE_HOST and Service IPs it started
// with: the bridges' removal (stage 4) counts it as their user, and would refuse, or cut off its
// shutdown. So the roll is done once they are gone. Each is waited for at most its grace period
// and terminatingSlack more (a pod of a lost node terminates for ever); what is left then is
// logged, for the next stage's checks to name. mine gets the namespace's ReplicaSet owners.
func waitTerminated(ctx context.Context, c *k8sops.Client, ns string, mine func(*corev1.Pod, map[string]string) bool, log func(string, ...any)) error {
	until := map[string]time.Time{} // pod → the end of its wait, from when it was first seen terminating
	var left, stuck []string
	var listErr error // a failed list is tried again until ctx ends
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left, stuck, listErr = terminating(ctx, c, ns, mine, until)
		return listErr == nil && len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the replaced pods in %s to terminate (%s): %w", ns, strings.Join(left, ", "), errors.Join(err, listErr))
	}
	if len(stuck) > 0 {
		log("pods in %s still terminating past their grace period, left to the next checks: %s", ns, strings.Join(stuck, ", "))
	}
	return nil
}

// terminating names the pods of ns that mine picks and that are terminating: those still
// waited for (left), and those past the end of their wait (stuck), which until records.
func terminating(ctx context.Context, c *k8sops.Client, ns string, mine func(*corev1.Pod, map[string]string) bool, until map[string]time.Time) (left, stuck []string, err error) {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	rss, err := c.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	rsOwner := replicaSetOwners(rss.Items)
	now := time.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil || !mine(p, rsOwner) {
			continue
		}
		if _, ok := until[p.Name]; !ok {
			grace := 30 * time.Second // the API's default
			if p.DeletionGracePeriodSeconds != nil {
				grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
			}
			until[p.Name] = now.Add(grace + terminatingSlack)
		}
		if now.Before(until[p.Name]) {
			left = append(left, p.Name)
		} else {
			stuck = append(stuck, p.Name)
		}
	}
	return left, stuck, nil
}

// notReadyPods names the workload's pods (one list of the namespace's pods and ReplicaSets) that are not Ready, with their phase and the first
// waiting reason.
func notReadyPods(ctx context.Context, c *k8sops.Client, ns, kind, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	rss, err := c.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	rsOwner := replicaSetOwners(rss.Items)
	key := WorkloadKey(ns, kind, name)
	var out []string
	for _, pod := range pods.Items {
		if k, _ := podWorkload(&pod, rsOwner); k != key || podReady(&pod) {
			continue
		}
		desc := fmt.Sprintf("%s (%s", pod.Name, pod.Status.Phase)
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				desc += ", " + cs.State.Waiting.Reason
				break
			}
		}
		out = append(out, desc+")")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func podReady(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// evict deletes a bare pod (its PodKey) through the Eviction API, so PodDisruptionBudgets hold.
func evict(ctx context.Context, c *k8sops.Client, key string) Rolled {
	start := time.Now()
	ns, name, _ := parsePodKey(key)
	err := k8sops.RetryWrite(ctx, func(bool) error {
		return c.Kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if apierrors.IsTooManyRequests(err) {
		err = fmt.Errorf("a PodDisruptionBudget refuses the eviction now (%w); retry later", err)
	}
	return Rolled{Key: key, Duration: time.Since(start), Err: err}
}
