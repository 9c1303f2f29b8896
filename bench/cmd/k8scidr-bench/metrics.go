// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Where a roll's time goes: kube-controller-manager and kube-scheduler serve /metrics on
// loopback (self-signed, anonymous, the path always allowed), and each roll reads them before
// and after. The sums are busy time over all of a component's workers, not wall time.

// metricKey is one quantity read from a component's /metrics: the sum of every sample of metric
// whose labels contain label ("" for all).
type metricKey struct{ component, metric, label string }

// rollSeries are the quantities the roll's breakdown reports, in its column order.
var rollSeries = []struct {
	head string
	s    metricKey
}{
	{"deployment syncs", metricKey{"kcm", "workqueue_adds_total", `name="deployment"`}},
	{"deployment queued s", metricKey{"kcm", "workqueue_queue_duration_seconds_sum", `name="deployment"`}},
	{"deployment busy s", metricKey{"kcm", "workqueue_work_duration_seconds_sum", `name="deployment"`}},
	{"replicaset queued s", metricKey{"kcm", "workqueue_queue_duration_seconds_sum", `name="replicaset"`}},
	{"replicaset busy s", metricKey{"kcm", "workqueue_work_duration_seconds_sum", `name="replicaset"`}},
	{"kcm client throttled s", metricKey{"kcm", "rest_client_rate_limiter_duration_seconds_sum", ""}},
	{"scheduling attempts", metricKey{"scheduler", "scheduler_scheduling_attempt_duration_seconds_count", ""}},
	{"scheduling busy s", metricKey{"scheduler", "scheduler_scheduling_attempt_duration_seconds_sum", ""}},
	{"scheduler client throttled s", metricKey{"scheduler", "rest_client_rate_limiter_duration_seconds_sum", ""}},
}

// metricsFlags picks free loopback ports for the controller manager's and the scheduler's
// metrics, and the flags that serve them there.
func metricsFlags() (kcm, sched []string, urls map[string]string, err error) {
	urls = map[string]string{}
	flags := map[string][]string{}
	for _, c := range []string{"kcm", "scheduler"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		addr, err := netip.ParseAddrPort(l.Addr().String())
		_ = l.Close()
		if err != nil {
			return nil, nil, nil, err
		}
		port := int(addr.Port())
		flags[c] = []string{"--secure-port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"}
		urls[c] = fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	}
	return flags["kcm"], flags["scheduler"], urls, nil
}

// metricsClient reads the components' self-signed loopback endpoints.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, a self-signed serving cert made at start
}}

// scrapeRoll reads rollSeries from the components; a component that does not answer leaves its
// columns empty (nil map) rather than failing the run.
func (b *bench) scrapeRoll(ctx context.Context) map[metricKey]float64 {
	out := map[metricKey]float64{}
	for c, url := range b.metricsURLs {
		families, err := getMetrics(ctx, url)
		if err != nil {
			logf("metrics of %s: %v", c, err)
			return nil
		}
		for _, r := range rollSeries {
			if r.s.component == c {
				v, ok := sumSamples(families, r.s.metric, r.s.label)
				if !ok { // renamed or gone in this release: shown as such, never as a zero
					logf("metrics of %s: no %s{%s}", c, r.s.metric, r.s.label)
					v = math.NaN()
				}
				out[r.s] = v
			}
		}
	}
	return out
}

// getMetrics reads and parses a component's /metrics with Prometheus' own text parser.
func getMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// sumSamples adds up the samples of metric whose labels include label (name="value", or ""
// for any), and says whether there were any. metric may name a histogram's or summary's _sum
// or _count series, as the text format shows them.
func sumSamples(families map[string]*dto.MetricFamily, metric, label string) (float64, bool) {
	value := func(m *dto.Metric) (float64, bool) {
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
		return 0, false
	}
	family := families[metric]
	if family == nil {
		for suffix, part := range map[string]func(*dto.Metric) (float64, bool){
			"_sum":   func(m *dto.Metric) (float64, bool) { return histogramOrSummary(m, true) },
			"_count": func(m *dto.Metric) (float64, bool) { return histogramOrSummary(m, false) },
		} {
			if base, ok := strings.CutSuffix(metric, suffix); ok && families[base] != nil {
				family, value = families[base], part
			}
		}
	}
	if family == nil {
		return 0, false
	}
	name, want, _ := strings.Cut(label, "=")
	want = strings.Trim(want, `"`)
	var sum float64
	found := false
	for _, m := range family.Metric {
		if label != "" && !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == want }) {
			continue
		}
		if v, ok := value(m); ok {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// histogramOrSummary is the sample sum (or count) of a histogram or summary metric.
func histogramOrSummary(m *dto.Metric, sum bool) (float64, bool) {
	switch {
	case m.Histogram != nil && sum:
		return m.Histogram.GetSampleSum(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	case m.Summary != nil && sum:
		return m.Summary.GetSampleSum(), true
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount()), true
	}
	return 0, false
}

// delta is after minus before, per series; nil when either read failed.
func delta(before, after map[metricKey]float64) map[metricKey]float64 {
	if before == nil || after == nil {
		return nil
	}
	d := map[metricKey]float64{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}
