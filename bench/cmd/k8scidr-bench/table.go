// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// measure is one contender's run.
type measure struct {
	wall     time.Duration
	requests int64
	windows  []time.Duration // per-Service unavailability
	rss      float64         // provider peak RSS, MiB (0: not the provider)
	start    time.Duration   // the provider's recreations: from Terraform's "Creating..." to its first move's first Service write
	// clusterCPU is the processor time the cluster's processes (control plane and kwok) used
	// during a recreation: near the machine's cores times the wall time, the cluster binds.
	clusterCPU time.Duration
	lostKeys   []string // Services without a routable incarnation after the run
	notMoved   int      // Services missing or outside the target range
	planSize   int      // scenario 2: Services planned over
	// Scenario 1, per old ClusterIP: how long no Service held it with a ready endpoint (old-IP
	// bridges), and how many never got served again (every one, without bridges), of oldIPs.
	oldIPWindows       []time.Duration
	oldIPNever, oldIPs int
	journal            int64                 // journal objects written (scenario 1)
	recovered          []time.Duration       // when each Service was routable again, from the start (scenario 1)
	drainTail          time.Duration         // scenario 6: from the last pod leaving the old pool to the pool being gone
	controllers        map[metricKey]float64 // scenarios 3 and 5: the components' metrics over the run (nil: not read)
	wire               *wireRun              // scenario 7: what the wire's clients saw
}

type row struct {
	scenario, setting, who string
	runs                   []measure
}

type table struct {
	rows    []*row
	onAdd   func()   // after each measurement (main writes the partial results file)
	skipped []string // scenarios that could not run here, and why
}

func (t *table) add(scenario, setting, who string, m measure) {
	if t.onAdd != nil {
		defer t.onAdd()
	}
	for _, r := range t.rows {
		if r.scenario == scenario && r.setting == setting && r.who == who {
			r.runs = append(r.runs, m)
			return
		}
	}
	t.rows = append(t.rows, &row{scenario: scenario, setting: setting, who: who, runs: []measure{m}})
}

func (t *table) find(scenario, setting, who string) *row {
	for _, r := range t.rows {
		if strings.HasPrefix(r.scenario, scenario) && r.setting == setting && r.who == who {
			return r
		}
	}
	return nil
}

// stat is the median and range of f over the runs.
func (r *row) stat(f func(measure) float64) (med, lo, hi float64) {
	var v []float64
	for _, m := range r.runs {
		v = append(v, f(m))
	}
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0, 0, 0
	}
	med = v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return med, v[0], v[n-1]
}

func (r *row) wall() float64 {
	m, _, _ := r.stat(func(m measure) float64 { return m.wall.Seconds() })
	return m
}

// windows pools the unavailability windows of all runs.
func (r *row) windows() []time.Duration {
	return r.pool(func(m measure) []time.Duration { return m.windows })
}

func (r *row) pool(f func(measure) []time.Duration) []time.Duration {
	var all []time.Duration
	for _, m := range r.runs {
		all = append(all, f(m)...)
	}
	slices.Sort(all)
	return all
}

// oldIPColumn is the old-IP unavailability of scenario 1's rows: p50 / p99 / max of the IPs served
// again, and how many never were.
func (r *row) oldIPColumn() string {
	never, total := 0, 0
	for _, m := range r.runs {
		never, total = never+m.oldIPNever, total+m.oldIPs
	}
	if total == 0 {
		return "–"
	}
	if never == total {
		return "never served again"
	}
	w := r.pool(func(m measure) []time.Duration { return m.oldIPWindows })
	if len(w) == 0 {
		// No old IP went down and came back: the rest were never deleted (moves not made).
		return fmt.Sprintf("none went down and came back (%d of %d never served again)", never, total)
	}
	out := fmt.Sprintf("%s / %s / %s", ms(pct(w, 0.5)), ms(pct(w, 0.99)), ms(w[len(w)-1]))
	if never > 0 {
		out += fmt.Sprintf(" (%d of %d never)", never, total)
	}
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }

func (t *table) markdown(o options, took time.Duration) string {
	var b strings.Builder
	mode := fmt.Sprintf("%d rounds", o.rounds)
	if o.quick {
		mode = "BENCH_QUICK (1 round, smoke only: not for comparing)"
	}
	fmt.Fprintf(&b, "# k8scidr bench, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Loopback cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), %s, %s in all. "+
		"Every contender talks through one counting proxy holding all to %d QPS / burst %d (the provider configured with the same qps and burst); "+
		"medians with [min–max]; unavailability is per Service from its DELETE to a new Service and a ready EndpointSlice "+
		"for it, seen by an independent watcher, pooled over rounds (p50 / p99 / max); old-IP unavailability is per moved Service's old "+
		"ClusterIP, from the DELETE to any Service on that IP with a ready endpoint (an old-IP bridge), what a client that "+
		"cached the IP sees. Lost counts Services without a ready endpoint once the run settles: the floor and the kubectl "+
		"loops do not carry a selector-less Service's Endpoints over (5 of every 100 Services here), so the endpoints controller "+
		"may delete them with the old Service, a race each run wins or loses.\n\n", mode, took.Round(time.Second), clientQPS, clientBurst)
	b.WriteString("| Scenario | Setting | Contender | Wall s | API requests | Request bound s | Unavailable ms p50 / p99 / max | Old IP unavailable ms p50 / p99 / max | Provider peak RSS MiB | Lost / not moved |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range t.rows {
		wm, wl, wh := r.stat(func(m measure) float64 { return m.wall.Seconds() })
		rm, _, _ := r.stat(func(m measure) float64 { return float64(m.requests) })
		requests := fmt.Sprintf("%.0f", rm)
		if jm, _, _ := r.stat(func(m measure) float64 { return float64(m.journal) }); jm > 0 {
			requests += fmt.Sprintf(" (%.0f journal objects)", jm)
		}
		un := "–"
		if w := r.windows(); len(w) > 0 {
			un = fmt.Sprintf("%s / %s / %s", ms(pct(w, 0.5)), ms(pct(w, 0.99)), ms(w[len(w)-1]))
		}
		if strings.HasPrefix(r.scenario, "6.") {
			tm, _, _ := r.stat(func(m measure) float64 { return float64(m.drainTail.Milliseconds()) })
			un = fmt.Sprintf("pool gone %.0f ms after the last pod left", tm)
		}
		rss := "–"
		if m, _, hi := r.stat(func(m measure) float64 { return m.rss }); hi > 0 {
			rss = fmt.Sprintf("%.0f (max %.0f)", m, hi)
		}
		lost, moved := 0, 0
		for _, m := range r.runs {
			lost += len(m.lostKeys)
			moved += m.notMoved
		}
		lm, rb := "–", "–"
		if strings.HasPrefix(r.scenario, "1.") || strings.HasPrefix(r.scenario, "4.") {
			lm = fmt.Sprintf("%d / %d", lost, moved)
			rb = fmt.Sprintf("%.1f", requestBound(rm))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f [%.1f–%.1f] | %s | %s | %s | %s | %s | %s |\n", r.scenario, r.setting, r.who, wm, wl, wh, requests, rb, un, r.oldIPColumn(), rss, lm)
	}
	b.WriteString(t.rollBreakdown())
	b.WriteString(t.wireTable())
	for _, s := range t.skipped {
		fmt.Fprintf(&b, "\nNot run: %s.\n", s)
	}
	b.WriteString("\n## Targets\n\n")
	for _, c := range t.targets(o) {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	return b.String()
}

// targets checks issue 8's targets against the table; each line says met or missed.
func (t *table) targets(o options) []string {
	var out []string
	check := func(ok bool, format string, args ...any) {
		verdict := "met"
		if !ok {
			verdict = "MISSED"
		}
		out = append(out, fmt.Sprintf("%s: %s", verdict, fmt.Sprintf(format, args...)))
	}
	raised, defaults := settingRaised, settingDefaults
	if k, f := t.find("1.", raised, "k8scidr"), t.find("1.", raised, "floor (client-go)"); k != nil && f != nil {
		for _, loop := range []string{"kubectl replace --force loop", replaceParallel} {
			if l := t.find("1.", raised, loop); l != nil {
				check(l.wall() >= 5*k.wall(), "kcm raised: recreation %.1fx faster than the %s (target ≥ 5x)", l.wall()/k.wall(), loop)
			}
		}
		check(k.wall() <= 1.3*f.wall(), "kcm raised: recreation at %.2fx the floor (target ≤ 1.3x); %s", k.wall()/f.wall(), binds(k, f, 1.3))
		check(pct(k.windows(), 0.99) <= 150*time.Millisecond, "kcm raised: unavailability p99 %s ms (target ≤ 150)", ms(pct(k.windows(), 0.99)))
	}
	for _, setting := range []string{defaults, raised} {
		if k := t.find("1.", setting, withBridges); k != nil {
			w := k.pool(func(m measure) []time.Duration { return m.oldIPWindows })
			never := 0
			for _, m := range k.runs {
				never += m.oldIPNever
			}
			check(never == 0 && pct(w, 0.99) <= 250*time.Millisecond, "%s: with old-IP bridges, old IP unavailable p99 %s ms, %d never served again (target ≤ 250, none)",
				setting, ms(pct(w, 0.99)), never)
		}
	}
	if k := t.find("1.", defaults, "k8scidr"); k != nil {
		bound := sliceBound(o.services, 20)
		check(k.wall() <= 1.15*bound, "kcm defaults: recreation %.1f s vs the EndpointSlice controller's bound %.1f s (%.2fx, target ≤ 1.15x)",
			k.wall(), bound, k.wall()/bound)
		check(pct(k.windows(), 0.99) <= 250*time.Millisecond, "kcm defaults: unavailability p99 %s ms (target ≤ 250)", ms(pct(k.windows(), 0.99)))
	}
	for _, sq := range []struct {
		setting string
		qps     float64
	}{{defaults, 20}, {raised, 100}} {
		setting, qps := sq.setting, sq.qps
		if k := t.find("4.", setting, "k8scidr"); k != nil {
			bound := sliceBound(o.scaleServices, qps)
			_, _, rss := k.stat(func(m measure) float64 { return m.rss })
			floor := ""
			// The controller's QPS is not always what binds: the floor shows what any client
			// reached on the same cluster, the reader's measure of the gap that is the provider's.
			if f := t.find("4.", setting, "floor (client-go)"); f != nil {
				floor = fmt.Sprintf("; the client-go floor took %.1f s (k8scidr at %.2fx it; %s)", f.wall(), k.wall()/f.wall(), binds(k, f, 1.15))
			} else if busy := k.busy(); busy > 0 {
				floor = fmt.Sprintf("; the cluster's processes kept %.0f%% of the machine's %d processors busy", busy*100, runtime.NumCPU())
			}
			check(k.wall() <= 1.2*bound && rss <= 300, "%s: %d-Service recreation %.1f s vs the EndpointSlice controller's bound %.1f s (%.2fx, "+
				"target ≤ 1.2x), provider peak RSS %.0f MiB (target ≤ 300)%s", setting, o.scaleServices, k.wall(), bound, k.wall()/bound, rss, floor)
		}
	}
	for _, r := range t.rows {
		if sm, _, hi := r.stat(func(m measure) float64 { return m.start.Seconds() }); hi > 0 {
			check(hi <= 2, "%s, %s, %s: first move began %.2f s after Terraform began applying the resource (max %.2f; target ≤ 2 s)",
				strings.TrimSuffix(r.scenario, "."), r.setting, r.who, sm, hi)
		}
	}
	var small, large *row
	for _, r := range t.rows {
		if strings.HasPrefix(r.scenario, "2.") {
			if small == nil {
				small = r
			}
			large = r
		}
	}
	if small != nil && large != nil && small != large {
		_, _, rss := large.stat(func(m measure) float64 { return m.rss })
		check(large.wall() <= 5, "plan over %s: %.1f s (target ≤ 5 s)", large.who, large.wall())
		check(rss <= 250, "plan over %s: provider peak RSS %.0f MiB (target ≤ 250)", large.who, rss)
	}
	for _, scenario := range []string{"3.", "5."} {
		for _, setting := range []string{raised, settingUnbound} {
			f := t.find(scenario, setting, rollFloor)
			for _, who := range []string{"k8scidr", rollBest} {
				if k := t.find(scenario, setting, who); k != nil && f != nil {
					check(k.wall() <= 1.2*f.wall(), "%s %s: roll (%s) at %.2fx its floor (target ≤ 1.2x)", strings.TrimSuffix(k.scenario, "."), setting, who, k.wall()/f.wall())
				}
			}
		}
	}
	if o.quick {
		out = append(out, "(quick mode: sizes are too small for these targets to mean anything)")
	}
	return out
}

// requestBound is how long the client budget every contender shares (clientQPS, burst
// clientBurst, a token bucket that starts full) needs to admit n requests: no contender can be
// faster than the bound of its own request count.
func requestBound(n float64) float64 { return max(0, n-clientBurst) / clientQPS }

// binds says which bound keeps the provider's row k from `target` times the floor's wall time:
// its own requests, when even at the full client budget they take longer than the target
// allows; else the cluster, when its processes used most of the machine's processors during the
// run (the apiserver, not the client, sets the pace); or else its pacing (the requests would
// fit; the time goes between them).
func binds(k, floor *row, target float64) string {
	km, _, _ := k.stat(func(m measure) float64 { return float64(m.requests) })
	fm, _, _ := floor.stat(func(m measure) float64 { return float64(m.requests) })
	busy := k.busy()
	kb, fb, allowed := requestBound(km), requestBound(fm), target*floor.wall()
	verdict := "pacing binds: its requests would fit"
	switch {
	case kb > allowed:
		verdict = "requests bind: at the full client budget alone they take longer than the target allows"
	case busy >= clusterBound:
		verdict = fmt.Sprintf("the cluster binds: its requests would fit, but the cluster's processes kept %.0f%% of the machine's %d processors busy", busy*100, runtime.NumCPU())
	case busy > 0:
		verdict += fmt.Sprintf(" (the cluster's processes kept %.0f%% of the machine's %d processors busy)", busy*100, runtime.NumCPU())
	}
	return fmt.Sprintf("k8scidr's %.0f requests need %.1f s at %d QPS (the floor's %.0f need %.1f s; %.1fx the floor allows %.1f s): %s",
		km, kb, clientQPS, fm, fb, target, allowed, verdict)
}

// busy is the share of the machine's processors the cluster's processes kept busy during the
// row's runs (mean; 0 when not measured).
func (r *row) busy() float64 {
	b, _, _ := r.stat(func(m measure) float64 { return m.clusterCPU.Seconds() / m.wall.Seconds() / float64(runtime.NumCPU()) })
	return b
}

// clusterBound is the share of the machine's processors the cluster's processes must keep busy
// through a run for the cluster, not the provider, to set its pace (the rest goes to the
// provider, the bench's watchers and the proxy).
const clusterBound = 0.75

// sliceBound is how long kube-controller-manager needs, at qps, to write one EndpointSlice for
// each of n moved Services that has a selector (every 20th of the bench's has none).
func sliceBound(n int, qps float64) float64 { return float64(n-n/20) / qps }

// failed is an error when the provider lost a Service (the one result that fails the run).
func (t *table) failed() error {
	var errs []error
	for _, r := range t.rows {
		for _, m := range r.runs {
			recreation := strings.HasPrefix(r.scenario, "1.") || strings.HasPrefix(r.scenario, "4.")
			if strings.HasPrefix(r.who, "k8scidr") && recreation && (len(m.lostKeys) > 0 || m.notMoved > 0) {
				errs = append(errs, fmt.Errorf("k8scidr (%s) lost %v and left %d Services unmoved", r.setting, m.lostKeys, m.notMoved))
			}
		}
	}
	return errors.Join(errs...)
}

// rollBreakdown is where the rolls' time went, from the controller manager's and the
// scheduler's metrics over each run (means over rounds). Busy and queued times are summed over a
// component's workers; throttled is time its API clients waited on their own QPS limiter.
func (t *table) rollBreakdown() string {
	var b strings.Builder
	for _, r := range t.rows {
		if !strings.HasPrefix(r.scenario, "3.") && !strings.HasPrefix(r.scenario, "5.") {
			continue
		}
		var n float64
		sum := map[metricKey]float64{}
		for _, m := range r.runs {
			if m.controllers == nil {
				continue
			}
			n++
			for k, v := range m.controllers {
				sum[k] += v
			}
		}
		if n == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## Where the rolls' time goes\n\n" +
				"From kube-controller-manager's and kube-scheduler's /metrics, read before and after each run (means over rounds). " +
				"Queued and busy are summed over a controller's workers (5 each by default); throttled is the time the " +
				"component's own API client waited on its QPS limiter; the rest of the wall time is kwok's pod lifecycle " +
				"and the contender itself.\n\n| Scenario | Setting | Contender | Wall s |")
			for _, c := range rollSeries {
				b.WriteString(" " + c.head + " |")
			}
			b.WriteString("\n|---|---|---|---|" + strings.Repeat("---|", len(rollSeries)) + "\n")
		}
		wall, _, _ := r.stat(func(m measure) float64 { return m.wall.Seconds() })
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f |", r.scenario, r.setting, r.who, wall)
		for _, c := range rollSeries {
			v := sum[c.s] / n
			if math.IsNaN(v) {
				b.WriteString(" – |")
			} else if strings.HasSuffix(c.head, " s") {
				fmt.Fprintf(&b, " %.1f |", v)
			} else {
				fmt.Fprintf(&b, " %.0f |", v)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
