package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// roll is scenario 3: restart o.rollDep two-replica Deployments, with kube-controller-manager
// at the given setting.
func (b *bench) roll(ctx context.Context, setting string) error {
	scenario := fmt.Sprintf("3. roll %d Deployments", b.o.rollDep)
	contenders := []string{"k8scidr", "kubectl rollout loop, serial", fmt.Sprintf("kubectl rollout loop, xargs -P %d", rollWorkers)}
	for round := range b.o.rounds {
		for _, who := range contenders {
			run := b.nextRun()
			logf("%s, round %d: %s", scenario, round+1, who)
			// The previous run's namespaces are still being deleted: wait, so that every
			// contender starts on a cluster doing nothing else.
			if err := waitNamespacesGone(ctx, b.kube); err != nil {
				return err
			}
			m, err := b.rollOnce(ctx, run, who)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", who, round+1, err)
			}
			b.table.add(scenario, setting, who, m)
		}
	}
	return nil
}

func (b *bench) rollOnce(ctx context.Context, run int, who string) (measure, error) {
	n := b.o.rollDep
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
	before := b.proxy.requests.Load()
	start := time.Now()
	var m measure
	switch who {
	case "k8scidr":
		var w *workspace
		w, err = newWorkspace(b.bin, b.self, b.kubeconfig, fmt.Sprintf(rollConfig, quoted(nss), stamp))
		if err != nil {
			return m, err
		}
		defer w.close()
		m.wall, m.rss, err = w.run("apply", "-auto-approve", "-input=false", "-no-color")
	default:
		workers := 1
		if strings.Contains(who, "xargs") {
			workers = rollWorkers
		}
		var path string
		if path, err = b.script("rollout-restart.sh"); err != nil {
			return m, err
		}
		cmd := exec.CommandContext(ctx, "xargs", "-P", fmt.Sprint(workers), "-n", "2", "bash", path)
		cmd.Stdin, cmd.Env = strings.NewReader(strings.Join(pairs, "\n")+"\n"), b.loopEnv()
		var out []byte
		if out, err = cmd.CombinedOutput(); err != nil {
			err = fmt.Errorf("%w\n%s", err, tail(string(out), 20))
		}
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
	return m, nil
}

var rollConfig = providerBlock + `
data "k8scidr_workload_restarts" "bench" {
  namespaces     = [%s]
  started_before = %q
}

resource "k8scidr_workload_roll" "bench" {
  workloads      = data.k8scidr_workload_restarts.bench.workloads
  started_before = data.k8scidr_workload_restarts.bench.started_before
}
`

// waitRolled waits until all n Deployments are complete (and, with restarted, carry a
// restartedAt annotation on their template), or says how many are not.
func (b *bench) waitRolled(ctx context.Context, nss []string, n int, restarted bool) error {
	left := n
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
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
