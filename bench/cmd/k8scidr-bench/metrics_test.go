// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"strings"
	"testing"
)

func TestSumSamples(t *testing.T) {
	text := `# HELP workqueue_adds_total [STABLE] Total number of adds handled by a workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="deployment"} 12
workqueue_adds_total{name="deployment_extra"} 100
workqueue_adds_total{name="replicaset"} 7
workqueue_adds_total_other{name="deployment"} 1000
# TYPE rest_client_rate_limiter_duration_seconds histogram
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="GET",le="+Inf"} 3
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="GET"} 0.25
rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="GET"} 3
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="PUT",le="+Inf"} 5
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 1.5
rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 5
scheduler_scheduling_attempt_duration_seconds_count 40`
	families, err := parseMetrics(strings.NewReader(text + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		metric, label string
		want          float64
		found         bool
	}{
		{"workqueue_adds_total", `name="deployment"`, 12, true},
		{"workqueue_adds_total", `name="replicaset"`, 7, true},
		{"rest_client_rate_limiter_duration_seconds_sum", "", 1.75, true},
		{"rest_client_rate_limiter_duration_seconds_count", `verb="PUT"`, 5, true},
		{"rest_client_rate_limiter_duration_seconds_count", `verb="DELETE"`, 0, false},
		{"scheduler_scheduling_attempt_duration_seconds_count", "", 40, true},
		{"workqueue_adds_total", `name="daemonset"`, 0, false},
		{"workqueue_depth", "", 0, false},
	} {
		got, found := sumSamples(families, c.metric, c.label)
		if got != c.want || found != c.found {
			t.Errorf("sumSamples(%s, %s) = %v, %v; want %v, %v", c.metric, c.label, got, found, c.want, c.found)
		}
	}
}
