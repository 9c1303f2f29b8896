package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
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
		text, err := getMetrics(ctx, url)
		if err != nil {
			logf("metrics of %s: %v", c, err)
			return nil
		}
		for _, r := range rollSeries {
			if r.s.component == c {
				v, ok := sumSamples(text, r.s.metric, r.s.label)
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

func getMetrics(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b.String(), sc.Err()
}

// sumSamples adds up the samples of metric (Prometheus text format) whose labels contain label,
// and says whether there were any.
func sumSamples(text, metric, label string) (float64, bool) {
	var sum float64
	found := false
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') || !strings.Contains(rest, label) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
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
