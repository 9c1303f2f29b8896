// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"embed"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

//go:embed scripts/*.sh
var scripts embed.FS

// recreation is scenario 1: move o.services Services from old to target, each contender on a
// fresh namespace set per round, in alternation.
func (b *bench) recreation(ctx context.Context, setting string, withLoops bool) error {
	contenders := []string{"k8scidr", withBridges, "floor (client-go)"}
	if withLoops {
		contenders = append(contenders, "kubectl replace --force loop", replaceParallel, "kubectl delete + apply loop")
	}
	return b.recreationRounds(ctx, fmt.Sprintf("1. recreate %d Services", b.o.services), setting, contenders)
}

// recreationRounds moves o.services Services with each of contenders (those -only picks), in
// alternation, o.rounds times, each on a fresh namespace set, and adds each run to scenario.
func (b *bench) recreationRounds(ctx context.Context, scenario, setting string, contenders []string) error {
	contenders, err := b.onlyThose(contenders)
	if err != nil {
		return err
	}
	for round := range b.o.rounds {
		for _, who := range contenders {
			run := b.nextRun()
			logf("%s, %s, round %d: %s", scenario, setting, round+1, who)
			// The previous run's namespaces are still being deleted: wait, so that every
			// contender starts on a cluster doing nothing else.
			if err := waitNamespacesGone(ctx, b.kube); err != nil {
				return err
			}
			m, err := b.recreateOnce(ctx, run, who, b.o.services, nil)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", who, round+1, err)
			}
			b.table.add(scenario, setting, who, m)
		}
	}
	return nil
}

// onlyThose are the contenders -only picks (all without it).
func (b *bench) onlyThose(contenders []string) ([]string, error) {
	if b.o.only == "" {
		return contenders, nil
	}
	only, err := regexp.Compile(b.o.only)
	if err != nil {
		return nil, fmt.Errorf("-only: %w", err)
	}
	return slices.DeleteFunc(contenders, func(who string) bool { return !only.MatchString(who) }), nil
}

// recreateOnce moves n Services with one contender. With moveFlags, the Services are built
// with kube-controller-manager as it runs (scenario 4 runs it unbound for that) and it is
// restarted with moveFlags for the move alone: at its defaults, 10,000 Services' slices take
// longer to create than to move.
func (b *bench) recreateOnce(ctx context.Context, run int, who string, n int, moveFlags []string) (measure, error) {
	kube := b.kube
	// A range of old per run, a /20 or as much larger as n needs. Not the same CIDR each time:
	// kube-apiserver keys its allocators by CIDR, and one that served an earlier ServiceCIDR
	// object stays allocatable while a later object of the same CIDR is Terminating (v1.34
	// MetaAllocator.syncAllocators).
	bits, size := 20, 4096
	for size < n+16 {
		bits, size = bits-1, size*2
	}
	oldRun := netip.PrefixFrom(addrAt(netip.MustParsePrefix(old), run%(1<<(bits-13))*size), bits)
	rangeName := fmt.Sprintf("bench-old-%d", run)
	if err := oldRange(ctx, kube, rangeName, oldRun.String()); err != nil {
		return measure{}, err
	}
	nss, keys, err := serviceSet(ctx, kube, fmt.Sprintf("b%d", run), n, oldRun, 1)
	if err != nil {
		return measure{}, err
	}
	defer deleteNamespaces(context.WithoutCancel(ctx), kube, nss)
	w, err := watchOutages(ctx, kube, keys)
	if err != nil {
		return measure{}, err
	}
	allReady := func(timeout time.Duration) error {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			return w.ready() == n, nil
		})
		if err != nil {
			return fmt.Errorf("only %d of %d Services have endpoints before the move: %w", w.ready(), n, err)
		}
		return nil
	}
	if err := allReady(5*time.Minute + time.Duration(n)*20*time.Millisecond); err != nil {
		return measure{}, err
	}
	if moveFlags != nil {
		if err := b.c.RestartControllerManager(ctx, moveFlags...); err != nil {
			return measure{}, err
		}
		// Back to building speed for the teardown and the next contender's set-up.
		defer b.c.RestartControllerManager(context.WithoutCancel(ctx), kcmUnbound...) //nolint:errcheck // the next set-up fails loudly if it did not come back
		// The restarted controllers list everything again; let them settle before the clock.
		time.Sleep(10 * time.Second)
		if err := allReady(time.Minute); err != nil {
			return measure{}, err
		}
	}
	// KEP-1880: the old range is deleted and stays Terminating while its IPs are in use; new
	// IPs are no longer allocated from it, so every contender's new Services land in target.
	// The provider plans its new IPs in target, and its bridges (old-IP bridges, and with
	// old_ip_bridges = "dns" the hand-over's until the DNS answers expire) take the old IPs
	// again, which a Terminating range does not give: it goes after the run, as a migration
	// retires it after the moves (the wire showed old IPs unserved from the move on otherwise).
	if strings.HasPrefix(who, "k8scidr") {
		defer kube.NetworkingV1().ServiceCIDRs().Delete(context.WithoutCancel(ctx), rangeName, metav1.DeleteOptions{}) //nolint:errcheck // tidying up
	} else if err := retireRange(ctx, kube, rangeName, nss[0]); err != nil {
		return measure{}, err
	}
	oldIPs, err := keysIPs(ctx, kube, nss)
	if err != nil {
		return measure{}, err
	}
	cl, interval, err := b.startWireClients(ctx, keys)
	if err != nil {
		return measure{}, err
	}
	if cl != nil {
		defer cl.Stop() // a run that fails; Stop may be called again
	}
	ow, err := watchOldIPs(ctx, kube, nss, oldIPs)
	if err != nil {
		return measure{}, err
	}
	before, journalBefore, cpuBefore := b.proxy.requests.Load(), b.proxy.journalWrites.Load(), b.c.CPUTime()
	start := time.Now()
	var m measure
	switch who {
	case "k8scidr", withBridges:
		m.wall, m.rss, m.start, err = b.k8scidrRecreate(nss, who == withBridges)
	case "floor (client-go)":
		err = b.floor(ctx, nss)
		m.wall = time.Since(start)
	case "kubectl replace --force loop":
		err = b.loop(ctx, "replace-force.sh", keys)
		m.wall = time.Since(start)
	case replaceParallel:
		err = b.xargsLoop(ctx, "replace-force-one.sh", keys, parallelism)
		m.wall = time.Since(start)
	case "kubectl delete + apply loop":
		err = b.loop(ctx, "delete-apply.sh", keys)
		m.wall = time.Since(start)
	}
	m.requests, m.clusterCPU = b.proxy.requests.Load()-before, b.c.CPUTime()-cpuBefore
	b.proxy.dumpKinds()
	if err != nil {
		return m, err
	}
	m.journal = b.proxy.journalWrites.Load() - journalBefore
	m.windows, m.lostKeys = w.settle(ctx, b.o.settle)
	for _, t := range w.recoveredAt() {
		m.recovered = append(m.recovered, t.Sub(start))
	}
	m.oldIPWindows, m.oldIPNever = ow.settle()
	if cl != nil {
		m.wire = &wireRun{report: cl.Stop(), interval: interval}
		logf("%s: what the wire's clients saw:\n%s", who, m.wire.report)
	}
	m.oldIPs = len(oldIPs)
	m.notMoved, err = notMoved(ctx, kube, nss, keys)
	return m, err
}

// withBridges is the provider with old_ip_bridges = "all"; replaceParallel the replace loop as
// operators run it, under xargs -P at the provider's parallelism.
const (
	withBridges     = "k8scidr, old-IP bridges"
	replaceParallel = "kubectl replace --force, xargs -P 10"
)

// retireRange deletes the old range and waits until the apiserver no longer allocates from it
// (its allocator learns of the deletion from a watch, and picks among ranges at random): twenty
// probe Services in a row must land in target.
func retireRange(ctx context.Context, kube kubernetes.Interface, name, ns string) error {
	if err := kube.NetworkingV1().ServiceCIDRs().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	tp := netip.MustParsePrefix(target)
	inRow := 0
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		got, err := kube.CoreV1().Services(ns).Create(ctx, probe, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		if err := kube.CoreV1().Services(ns).Delete(ctx, got.Name, metav1.DeleteOptions{}); err != nil {
			return false, err
		}
		if ip, err := netip.ParseAddr(got.Spec.ClusterIP); err == nil && tp.Contains(ip) {
			inRow++
		} else {
			inRow = 0
		}
		return inRow == 20, nil
	})
}

var recreationConfig = providerBlock + `
data "k8scidr_service_moves" "bench" {
  target_cidrs = [%[1]q]
  namespaces   = [%[2]s]
}

resource "k8scidr_service_recreation" "bench" {
  plan           = data.k8scidr_service_moves.bench
  old_ip_bridges = %[3]q
}
`

func quoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// k8scidrRecreate applies the recreation and returns its wall time, the provider's peak RSS
// and how long after Terraform began applying the resource (its "Creating...") its first move
// began (isServiceWrite).
func (b *bench) k8scidrRecreate(nss []string, bridges bool) (wall time.Duration, rss float64, start time.Duration, err error) {
	setting := "dns"
	if bridges {
		setting = "all"
	}
	w, err := newWorkspace(b.bin, b.self, b.kubeconfig, fmt.Sprintf(recreationConfig, target, quoted(nss), setting))
	if err != nil {
		return 0, 0, 0, err
	}
	defer w.close()
	b.proxy.resetStart()
	w.onApplyStart = func(t time.Time) { b.proxy.applyBegan.Store(t.UnixNano()) }
	if debug { // the trace as soon as the first move began, not only at the end
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for b.proxy.firstServiceWrite.Load() == 0 {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			time.Sleep(time.Second)
			b.proxy.dumpStart(time.Unix(0, b.proxy.firstServiceWrite.Load()))
		}()
	}
	wall, rss, err = w.run("apply", "-auto-approve", "-input=false", "-no-color")
	if first := b.proxy.firstServiceWrite.Load(); first != 0 && !w.applyStarted.IsZero() {
		start = time.Unix(0, first).Sub(w.applyStarted)
	}
	return wall, rss, start, err
}

// floor is the least any tool must do: list the Services, then one delete and one create per
// Service, parallelism at a time, through the same proxy and client budget.
func (b *bench) floor(ctx context.Context, nss []string) error {
	kube, err := kubernetes.NewForConfig(b.proxy.restConfig(clientQPS, clientBurst))
	if err != nil {
		return err
	}
	var all []corev1.Service
	for _, ns := range nss {
		l, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		all = append(all, l.Items...)
	}
	return parallel(len(all), parallelism, func(i int) error {
		s := all[i]
		uid := s.UID
		if err := kube.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			return err
		}
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		s.ResourceVersion, s.UID, s.CreationTimestamp, s.ManagedFields = "", "", metav1.Time{}, nil
		s.Status = corev1.ServiceStatus{}
		_, err := kube.CoreV1().Services(s.Namespace).Create(ctx, &s, metav1.CreateOptions{})
		return err
	})
}

// loop runs one of the write-ups' shell loops over keys with kubectl through the proxy.
func (b *bench) loop(ctx context.Context, script string, keys []string) error {
	return b.runOverKeys(ctx, script, keys, script, func(path string) []string { return []string{"bash", path} })
}

// xargsLoop runs a one-Service script over keys, workers at a time, as `xargs -P` does.
func (b *bench) xargsLoop(ctx context.Context, script string, keys []string, workers int) error {
	return b.runOverKeys(ctx, script, keys, fmt.Sprintf("xargs -P %d %s", workers, script), func(path string) []string {
		return []string{"xargs", "-P", fmt.Sprint(workers), "-n", "2", "bash", path}
	})
}

// runOverKeys writes script out and runs the command argv(path) with "namespace name" per key
// on its standard input, kubectl pointed at the proxy.
func (b *bench) runOverKeys(ctx context.Context, script string, keys []string, what string, argv func(path string) []string) error {
	path, err := b.script(script)
	if err != nil {
		return err
	}
	var in strings.Builder
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		fmt.Fprintf(&in, "%s %s\n", ns, name)
	}
	args := argv(path)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Env = strings.NewReader(in.String()), b.loopEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", what, err, tail(string(out), 20))
	}
	return nil
}

func (b *bench) loopEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+b.kubeconfig, "KUBECTL="+filepath.Join(b.bin, "kubectl"),
		"JQ="+filepath.Join(b.bin, "tools", "gojq"))
}

// script writes an embedded script to the cluster's directory and returns its path.
func (b *bench) script(name string) (string, error) {
	data, err := scripts.ReadFile("scripts/" + name)
	if err != nil {
		return "", err
	}
	path := filepath.Join(b.c.Dir, name)
	return path, os.WriteFile(path, data, 0o700) //nolint:gosec // a script to run
}

// notMoved counts Services that are missing or not in target after a run.
func notMoved(ctx context.Context, kube kubernetes.Interface, nss, keys []string) (int, error) {
	tp := netip.MustParsePrefix(target)
	in := map[string]bool{}
	where := map[string]string{}
	for _, ns := range nss {
		l, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, s := range l.Items {
			ip, err := netip.ParseAddr(s.Spec.ClusterIP)
			in[s.Namespace+"/"+s.Name] = err == nil && tp.Contains(ip)
			where[s.Namespace+"/"+s.Name] = s.Spec.ClusterIP
		}
	}
	bad := 0
	for _, k := range keys {
		if !in[k] {
			if bad < 5 {
				logf("not moved: %s at %q", k, where[k])
			}
			bad++
		}
	}
	return bad, nil
}
