// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-bench is `make bench`: on its own loopback cluster it measures the provider
// against the write-ups' kubectl loops and a minimal client-go floor, side by side, with the
// contenders in alternation and every one given the same fresh state and client budget, and
// prints one Markdown table (also written to bench/results/<date>.md).
//
//	k8scidr-bench [-quick] [-rounds 3] [-root .]
//
// BENCH_QUICK=1 (or -quick) is the smoke mode `make test` runs: 40 Services, 10 Deployments,
// one round.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

func main() {
	if len(os.Args) > 3 && os.Args[1] == "rss-wrap" {
		os.Exit(rssWrap(os.Args[2], os.Args[3], os.Args[4:]))
	}
	o := options{}
	flag.BoolVar(&o.quick, "quick", os.Getenv("BENCH_QUICK") == "1", "smoke mode: 40 Services, 10 Deployments, 1 round")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of each scenario (contenders alternate within a round)")
	flag.StringVar(&o.root, "root", ".", "repository root (bin/ holds the binaries)")
	flag.StringVar(&o.scenarios, "scenarios", "", "scenarios to run, comma-separated: recreation, wire, roll, plan, scale, drain (default all; quick mode recreation, roll, plan)")
	flag.StringVar(&o.out, "out", "", "results file; default bench/results/<date>.md (none in quick mode)")
	flag.StringVar(&o.scaleOnly, "scale-only", "", "run only the scale runs (scenarios 4 and 5) whose \"setting/contender\" matches this regular expression (default all; scenario 5's contenders are \"roll <name>\"), e.g. 'raised.*/k8scidr$'")
	flag.StringVar(&o.only, "only", "", "run only the recreation contenders (scenarios 1 and 7) whose name matches this regular expression (default all), e.g. '^(k8scidr|floor)'")
	flag.IntVar(&o.scaleSize, "scale-services", 0, "Services in scenario 4 (default 10000), to look at a scale effect in less time")
	flag.DurationVar(&o.timeout, "timeout", 0, "give up after this long, with every goroutine's stack (default 5h; 20m in quick mode)")
	flag.Parse()
	if o.timeout == 0 {
		o.timeout = 5 * time.Hour
		if o.quick {
			o.timeout = 20 * time.Minute
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	watchdog(o.timeout, cancel)
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "k8scidr-bench:", err)
		os.Exit(1)
	}
}

// watchdog ends a run that takes longer than timeout: it prints where every goroutine is (a run
// that hangs says where), cancels the run, and exits if the run does not stop within a minute.
// The cluster's processes die with this one (Pdeathsig).
func watchdog(timeout time.Duration, cancel context.CancelFunc) {
	time.AfterFunc(timeout, func() {
		logf("k8scidr-bench: no result after %v; the goroutines:", timeout)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		cancel()
		time.AfterFunc(time.Minute, func() {
			logf("k8scidr-bench: still running a minute after the timeout; exiting")
			os.Exit(2)
		})
	})
}

type options struct {
	quick             bool
	only              string // recreation contenders to run (a regular expression; "" all)
	scaleOnly         string // scale runs to make, by "setting/contender" (a regular expression; "" all)
	timeout           time.Duration
	settle            time.Duration // how long a run's Services may take to come back before counting as lost
	rounds            int
	root, scenarios   string
	out               string
	services, rollDep int
	planSizes         [][2]int // Services, pods
	// scaleServices and scaleRoll are the sizes of scenarios 4 and 5; drainPods of scenario 6.
	scaleServices, scaleRoll, drainPods int
	scaleSize                           int // -scale-services
}

func run(ctx context.Context, o options) error {
	o.services, o.rollDep, o.planSizes, o.settle = 1000, 200, [][2]int{{1000, 2000}, {10000, 20000}}, 30*time.Second
	o.scaleServices, o.scaleRoll, o.drainPods = 10000, 1000, 5000
	if o.quick {
		// Small enough that the smoke run costs make test about two minutes: it proves the
		// bench runs, every contender and table included; the numbers mean nothing.
		o.settle = 5 * time.Second
		o.rounds, o.services, o.rollDep, o.planSizes = 1, 40, 10, [][2]int{{40, 80}, {80, 160}}
		o.scaleServices, o.scaleRoll, o.drainPods = 200, 30, 200
	}
	if o.scaleSize > 0 {
		o.scaleServices = o.scaleSize
	}
	if o.scenarios == "" {
		o.scenarios = "recreation,wire,roll,plan,scale,drain"
		if o.quick {
			o.scenarios = "recreation,roll,plan"
		}
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b := &bench{o: o, bin: filepath.Join(root, "bin"), self: self, table: &table{}}
	// The wire needs a network namespace of the bench's own: the bench runs again in one (root
	// only; elsewhere scenario 7 says why it did not run). Every scenario then runs there, on
	// the namespace's loopback as on the host's.
	if slices.Contains(strings.Split(o.scenarios, ","), "wire") {
		if b.isolated, err = testcluster.Reexec(); err != nil {
			return err
		}
	}
	maxPods := 0
	for _, s := range o.planSizes {
		maxPods = max(maxPods, s[1])
	}
	started := time.Now()
	logf("starting a loopback cluster (%d kwok nodes; Services default range %s)", maxPods/100+20, target)
	kcmMetrics, schedMetrics, urls, err := metricsFlags()
	if err != nil {
		return err
	}
	b.metricsURLs = urls
	b.c, err = testcluster.Start(ctx, testcluster.Options{
		Nodes: maxPods/100 + 20, ServiceCIDRs: []string{target}, BinDir: b.bin,
		ControllerManagerFlags: append(slices.Clone(kcmDefaults), kcmMetrics...),
		SchedulerFlags:         append([]string{"--kube-api-qps=1000", "--kube-api-burst=2000"}, schedMetrics...),
	})
	if err != nil {
		return err
	}
	defer b.c.Stop()
	fast := *b.c.RESTConfig // the harness's own client: setup and checks, outside the budget
	fast.QPS, fast.Burst = 1000, 2000
	fast.WarningHandler = rest.NoWarnings{} // writing Endpoints (selector-less Services) warns each time
	if b.kube, err = kubernetes.NewForConfig(&fast); err != nil {
		return err
	}
	if b.proxy, err = startProxy(b.c.RESTConfig, clientQPS, clientBurst); err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(b.c.Dir, "proxy.kubeconfig")
	if err := b.proxy.kubeconfig(b.kubeconfig); err != nil {
		return err
	}
	if o.out == "" && !o.quick {
		o.out = filepath.Join(root, "bench", "results", time.Now().UTC().Format("2006-01-02")+".md")
	}
	// The results file holds every row as soon as it is measured, so a run cut short (the
	// full bench takes hours) still leaves its numbers; the finished run overwrites it.
	b.table.onAdd = func() {
		if o.out == "" {
			return
		}
		partial := "> PARTIAL: the run had not finished when this was written; no charts, targets on what ran.\n\n" +
			b.table.markdown(o, time.Since(started))
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err == nil {
			_ = os.WriteFile(o.out, []byte(partial), 0o644) //nolint:gosec // a results file for the repository
		}
	}
	for _, s := range strings.Split(o.scenarios, ",") {
		var err error
		switch s {
		case "recreation":
			if err = b.recreation(ctx, settingDefaults, false); err == nil {
				if err = b.c.RestartControllerManager(ctx, kcmRaised...); err == nil {
					err = b.recreation(ctx, settingRaised, true)
				}
			}
		case "roll":
			// At qps 100 the ReplicaSet controller's own writes (about a dozen per rollout)
			// bound every contender; unbound shows what the contenders themselves cost. The
			// smoke mode runs the same code at one setting only.
			if err = b.c.RestartControllerManager(ctx, kcmRaised...); err == nil {
				if err = b.roll(ctx, settingRaised); err == nil && !b.o.quick {
					if err = b.c.RestartControllerManager(ctx, kcmUnbound...); err == nil {
						err = b.roll(ctx, settingUnbound)
					}
				}
			}
		case "wire":
			err = b.wireScenarioRun(ctx)
		case "plan":
			err = b.planCost(ctx)
		case "scale":
			err = b.scale(ctx)
		case "drain":
			err = b.drain(ctx)
		default:
			err = fmt.Errorf("unknown scenario %q", s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	report := b.table.markdown(o, time.Since(started))
	chartsAt := o.out
	if chartsAt == "" { // quick mode: drawn all the same, into the cluster's directory
		chartsAt = filepath.Join(b.c.Dir, "quick.md")
	}
	if err := os.MkdirAll(filepath.Dir(chartsAt), 0o755); err != nil {
		return err
	}
	charts, err := b.table.writeCharts(chartsAt)
	if err != nil {
		return err
	}
	if charts != "" {
		report += "\n## Charts\n\n" + charts
	}
	fmt.Println(report)
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil { //nolint:gosec // a results file for the repository
			return err
		}
		logf("wrote %s", o.out)
	}
	return b.table.failed()
}

const (
	target = "172.24.0.0/15"
	old    = "100.64.0.0/13"
	// clientQPS and clientBurst are the client budget every contender gets (the provider through
	// its qps and burst settings). At the provider's defaults (50/100) both the provider and the
	// floor are bound by the budget alone (about 2.4 and 2 requests per Service), which hides
	// what this benchmark measures: how close each comes to kube-controller-manager's pace.
	clientQPS   = 100
	clientBurst = 200
	parallelism = 10 // the provider's default recreation parallelism, also the floor's
	rollWorkers = 5  // the provider's default roll parallelism, also the xargs -P loop's
)

// kube-controller-manager settings and how the table names them.
var (
	kcmDefaults = []string{"--kube-api-qps=20", "--kube-api-burst=30"}
	kcmRaised   = []string{"--kube-api-qps=100", "--kube-api-burst=200"}
	kcmUnbound  = []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}
)

const (
	settingDefaults = "kcm defaults (qps 20)"
	settingRaised   = "kcm raised (qps 100)"
	settingUnbound  = "kcm unbound (qps 1000)"
)

type bench struct {
	o          options
	bin, self  string
	c          *testcluster.Cluster
	kube       kubernetes.Interface
	proxy      *proxy
	kubeconfig string
	table      *table
	runs       int
	// metricsURLs are the controller manager's and the scheduler's /metrics, by component.
	metricsURLs map[string]string
	// isolated: the bench runs in a network namespace of its own, where the wire can run; wire
	// is the wire while scenario 7 runs (recreateOnce then starts its clients).
	isolated bool
	wire     *testcluster.Wire
}

func (b *bench) nextRun() int {
	b.runs++
	return b.runs
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
