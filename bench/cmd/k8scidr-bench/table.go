package main

import (
	"errors"
	"fmt"
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
	lostKeys []string        // Services without a routable incarnation after the run
	notMoved int             // Services missing or outside the target range
	planSize int             // scenario 2: Services planned over
	// Scenario 1, per old ClusterIP: how long no Service held it with a ready endpoint (old-IP
	// bridges), and how many never got served again (every one, without bridges), of oldIPs.
	oldIPWindows       []time.Duration
	oldIPNever, oldIPs int
}

type row struct {
	scenario, setting, who string
	runs                   []measure
}

type table struct{ rows []*row }

func (t *table) add(scenario, setting, who string, m measure) {
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
		"cached the IP sees.\n\n", mode, took.Round(time.Second), clientQPS, clientBurst)
	b.WriteString("| Scenario | Setting | Contender | Wall s | API requests | Unavailable ms p50 / p99 / max | Old IP unavailable ms p50 / p99 / max | Provider peak RSS MiB | Lost / not moved |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range t.rows {
		wm, wl, wh := r.stat(func(m measure) float64 { return m.wall.Seconds() })
		rm, _, _ := r.stat(func(m measure) float64 { return float64(m.requests) })
		un := "–"
		if w := r.windows(); len(w) > 0 {
			un = fmt.Sprintf("%s / %s / %s", ms(pct(w, 0.5)), ms(pct(w, 0.99)), ms(w[len(w)-1]))
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
		lm := "–"
		if strings.HasPrefix(r.scenario, "1.") {
			lm = fmt.Sprintf("%d / %d", lost, moved)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f [%.1f–%.1f] | %.0f | %s | %s | %s | %s |\n", r.scenario, r.setting, r.who, wm, wl, wh, rm, un, r.oldIPColumn(), rss, lm)
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
		if l := t.find("1.", raised, "kubectl replace --force loop"); l != nil {
			check(l.wall() >= 5*k.wall(), "kcm raised: recreation %.1fx faster than the kubectl replace loop (target ≥ 5x)", l.wall()/k.wall())
		}
		check(k.wall() <= 1.5*f.wall(), "kcm raised: recreation at %.2fx the floor (target ≤ 1.5x)", k.wall()/f.wall())
		check(pct(k.windows(), 0.99) <= 250*time.Millisecond, "kcm raised: unavailability p99 %s ms (target ≤ 250)", ms(pct(k.windows(), 0.99)))
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
		// Every moved selector Service needs one new EndpointSlice from the controller at 20 QPS.
		bound := float64(o.services-o.services/20) / 20
		check(k.wall() <= 1.2*bound, "kcm defaults: recreation %.1f s vs the EndpointSlice controller's bound %.1f s (%.2fx, target ≤ 1.2x)",
			k.wall(), bound, k.wall()/bound)
		check(pct(k.windows(), 0.99) <= 250*time.Millisecond, "kcm defaults: unavailability p99 %s ms (target ≤ 250)", ms(pct(k.windows(), 0.99)))
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
		check(large.wall() <= 10, "plan over %s: %.1f s (target ≤ 10 s)", large.who, large.wall())
		check(rss <= 300, "plan over %s: provider peak RSS %.0f MiB (target ≤ 300)", large.who, rss)
		check(large.wall() <= 12*small.wall(), "plan %s / %s: %.1fx (target ≤ 12x)", large.who, small.who, large.wall()/small.wall())
	}
	for _, setting := range []string{raised, settingUnbound} {
		if k, s := t.find("3.", setting, "k8scidr"), t.find("3.", setting, "kubectl rollout loop, serial"); k != nil && s != nil {
			check(s.wall() >= 3*k.wall(), "%s: roll %.1fx faster than the serial kubectl loop (target ≥ 3x)", setting, s.wall()/k.wall())
		}
	}
	if o.quick {
		out = append(out, "(quick mode: sizes are too small for these targets to mean anything)")
	}
	return out
}

// failed is an error when the provider lost a Service (the one result that fails the run).
func (t *table) failed() error {
	var errs []error
	for _, r := range t.rows {
		for _, m := range r.runs {
			if strings.HasPrefix(r.who, "k8scidr") && strings.HasPrefix(r.scenario, "1.") && (len(m.lostKeys) > 0 || m.notMoved > 0) {
				errs = append(errs, fmt.Errorf("k8scidr (%s) lost %v and left %d Services unmoved", r.setting, m.lostKeys, m.notMoved))
			}
		}
	}
	return errors.Join(errs...)
}
