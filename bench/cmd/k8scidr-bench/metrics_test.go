package main

import "testing"

func TestSumSamples(t *testing.T) {
	text := `# HELP workqueue_adds_total [STABLE] Total number of adds handled by a workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="deployment"} 12
workqueue_adds_total{name="deployment_extra"} 100
workqueue_adds_total{name="replicaset"} 7
workqueue_adds_total_other{name="deployment"} 1000
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="GET"} 0.25
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 1.5
scheduler_scheduling_attempt_duration_seconds_count 40`
	for _, c := range []struct {
		metric, label string
		want          float64
		found         bool
	}{
		{"workqueue_adds_total", `name="deployment"`, 12, true},
		{"workqueue_adds_total", `name="replicaset"`, 7, true},
		{"rest_client_rate_limiter_duration_seconds_sum", "", 1.75, true},
		{"scheduler_scheduling_attempt_duration_seconds_count", "", 40, true},
		{"workqueue_adds_total", `name="daemonset"`, 0, false},
		{"workqueue_depth", "", 0, false},
	} {
		got, found := sumSamples(text, c.metric, c.label)
		if got != c.want || found != c.found {
			t.Errorf("sumSamples(%s, %s) = %v, %v; want %v, %v", c.metric, c.label, got, found, c.want, c.found)
		}
	}
}
