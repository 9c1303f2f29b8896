// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The results' charts, as hand-written SVG: for each setting of scenario 1 the distribution of the
// per-Service unavailability of each contender (the share of Services down at most x ms, x on a
// log scale), and how many Services were routable again over time.

const (
	chartW, chartH                       = 820, 380
	padLeft, padRight, padTop, padBottom = 70, 290, 40, 50
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"}

type series struct {
	name   string
	points [][2]float64 // x, y in data units
}

type axis struct {
	label    string
	lo, hi   float64
	log      bool
	ticks    []float64
	tickText func(float64) string
}

func (a axis) pos(v float64, from, to float64) float64 {
	if a.log {
		v, a.lo, a.hi = math.Log10(math.Max(v, a.lo)), math.Log10(a.lo), math.Log10(a.hi)
	}
	if a.hi == a.lo {
		return from
	}
	return from + (v-a.lo)/(a.hi-a.lo)*(to-from)
}

// svgChart draws series as step lines on axes x and y, with a legend at the right.
func svgChart(title string, x, y axis, ss []series) string {
	var b strings.Builder
	l, r, t, btm := float64(padLeft), float64(chartW-padRight), float64(padTop), float64(chartH-padBottom)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", l, esc(title))
	for _, v := range x.ticks {
		px := x.pos(v, l, r)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			px, t, px, btm, px, btm+16, esc(x.tickText(v)))
	}
	for _, v := range y.ticks {
		py := y.pos(v, btm, t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			l, py, r, py, l-6, py+4, esc(y.tickText(v)))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", l, t, r-l, btm-t)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", (l+r)/2, chartH-12, esc(x.label))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (t+btm)/2, esc(y.label))
	for i, s := range ss {
		color := palette[i%len(palette)]
		var pts []string
		prevY := y.lo
		for _, p := range s.points {
			px, py := x.pos(p[0], l, r), y.pos(p[1], btm, t)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", px, y.pos(prevY, btm, t), px, py))
			prevY = p[1]
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		}
		ly := t + 10 + float64(i)*20
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			r+14, ly, r+34, ly, color, r+40, ly+4, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// unavailabilityChart is the share of Services (y, %) that were unavailable at most x ms.
func unavailabilityChart(title string, rows []*row) string {
	var ss []series
	hi := 10.0
	for _, r := range rows {
		w := r.windows()
		if len(w) == 0 {
			continue
		}
		s := series{name: r.who}
		for i, d := range w {
			s.points = append(s.points, [2]float64{math.Max(float64(d.Microseconds())/1000, 1), 100 * float64(i+1) / float64(len(w))})
		}
		hi = math.Max(hi, float64(w[len(w)-1].Milliseconds()))
		s.points = thin(s.points)
		ss = append(ss, s)
	}
	var ticks []float64
	for v := 1.0; v <= hi*10; v *= 10 {
		ticks = append(ticks, v)
	}
	hi = ticks[len(ticks)-1]
	x := axis{label: "unavailable per Service, ms (log scale)", lo: 1, hi: hi, log: true, ticks: ticks,
		tickText: func(v float64) string { return fmt.Sprintf("%g", v) }}
	y := axis{label: "Services, % (at most x ms)", lo: 0, hi: 100, ticks: []float64{0, 25, 50, 75, 100},
		tickText: func(v float64) string { return fmt.Sprintf("%g%%", v) }}
	return svgChart(title, x, y, ss)
}

// progressChart is how many Services were routable again at each time since the contender started
// (its first run).
func progressChart(title string, rows []*row) string {
	var ss []series
	hiX, hiY := 1.0, 1.0
	for _, r := range rows {
		if len(r.runs) == 0 || len(r.runs[0].recovered) == 0 {
			continue
		}
		rec := slices.Clone(r.runs[0].recovered)
		slices.Sort(rec)
		s := series{name: r.who}
		for i, d := range rec {
			s.points = append(s.points, [2]float64{d.Seconds(), float64(i + 1)})
		}
		hiX, hiY = math.Max(hiX, rec[len(rec)-1].Seconds()), math.Max(hiY, float64(len(rec)))
		s.points = thin(s.points)
		ss = append(ss, s)
	}
	x := axis{label: "seconds since the contender started", lo: 0, hi: niceCeil(hiX), ticks: linearTicks(niceCeil(hiX)),
		tickText: func(v float64) string { return fmt.Sprintf("%g", v) }}
	y := axis{label: "Services routable again", lo: 0, hi: niceCeil(hiY), ticks: linearTicks(niceCeil(hiY)),
		tickText: func(v float64) string { return fmt.Sprintf("%g", v) }}
	return svgChart(title, x, y, ss)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func linearTicks(hi float64) []float64 {
	var out []float64
	for i := range 6 {
		out = append(out, hi*float64(i)/5)
	}
	return out
}

// writeCharts writes the recreation scenarios' charts (1 and 4) next to the results file and returns the Markdown that
// shows them.
func (t *table) writeCharts(results string) (string, error) {
	var md strings.Builder
	base := strings.TrimSuffix(results, ".md")
	for _, sc := range []struct{ prefix, slug string }{{"1.", ""}, {"4.", "scale-"}} {
		for _, setting := range []string{settingDefaults, settingRaised} {
			if err := t.writeSettingCharts(&md, base, sc.prefix, sc.slug+strings.Fields(setting)[1], setting); err != nil {
				return "", err
			}
		}
	}
	return md.String(), nil
}

// writeSettingCharts writes the charts of one recreation scenario (by prefix) at one setting.
func (t *table) writeSettingCharts(md *strings.Builder, base, prefix, slug, setting string) error {
	var rows []*row
	for _, r := range t.rows {
		if strings.HasPrefix(r.scenario, prefix) && r.setting == setting {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	for _, c := range []struct{ kind, svg string }{
		{"unavailability", unavailabilityChart(rows[0].scenario+", "+setting+": per-Service unavailability", rows)},
		{"progress", progressChart(rows[0].scenario+", "+setting+": Services moved over time", rows)},
	} {
		file := fmt.Sprintf("%s-%s-%s.svg", base, c.kind, slug)
		if err := os.WriteFile(file, []byte(c.svg), 0o644); err != nil { //nolint:gosec // a results file for the repository
			return err
		}
		fmt.Fprintf(md, "![%s, %s](%s)\n\n", c.kind, rows[0].scenario+", "+setting, filepath.Base(file))
	}
	return nil
}

// thin keeps at most about 1,000 of a step line's points (always the last), so that a
// 10,000-Service chart stays small.
func thin(points [][2]float64) [][2]float64 {
	step := len(points)/1000 + 1
	if step == 1 {
		return points
	}
	var out [][2]float64
	for i := 0; i < len(points); i += step {
		out = append(out, points[i])
	}
	if last := points[len(points)-1]; out[len(out)-1] != last {
		out = append(out, last)
	}
	return out
}
