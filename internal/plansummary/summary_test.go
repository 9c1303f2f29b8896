// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package plansummary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
)

// planJSON builds `terraform show -json` output: a recreation of moves Services, a roll of
// rolls workloads, skipped Services under three reasons, and extra resources of its own.
func planJSON(t *testing.T, moves, rolls, skipped int, extra ...map[string]any) []byte {
	t.Helper()
	m := map[string]any{}
	for i := range moves {
		m[fmt.Sprintf("ns-%03d/svc-%05d", i%500, i)] = movetext.Move{UID: fmt.Sprint(i), Type: "ClusterIP",
			OldIPs: []string{fmt.Sprintf("100.64.%d.%d", i/256, i%256)}, NewIPs: []string{fmt.Sprintf("172.24.%d.%d", i/256, i%256)}}.String()
	}
	var workloads []string
	pods := map[string]int{}
	for i := range rolls {
		w := fmt.Sprintf("ns-%03d/deployment/app-%05d", i%500, i)
		workloads = append(workloads, w)
		pods[w] = 3
	}
	skips := map[string]string{}
	reasons := []string{"headless (no ClusterIP)", "ExternalName", "LoadBalancer: its cloud load balancer points at its ClusterIP"}
	for i := range skipped {
		skips[fmt.Sprintf("skip-%03d/svc-%05d", i%100, i)] = reasons[i%3]
	}
	changes := append([]map[string]any{
		{"address": "k8scidr_service_recreation.services", "mode": "managed", "type": "k8scidr_service_recreation", "name": "services",
			"change": map[string]any{"actions": []string{"update"}, "before": map[string]any{"plan": map[string]any{"moves": map[string]any{}}},
				"after": map[string]any{"plan": map[string]any{"moves": m, "first_moves": []string{"ns-001/svc-00001"}, "restore": map[string]any{}}}}},
		{"address": "k8scidr_workload_roll.pods[0]", "mode": "managed", "type": "k8scidr_workload_roll", "name": "pods",
			"change": map[string]any{"actions": []string{"create"}, "before": nil, "after": map[string]any{"plan": map[string]any{"workloads": workloads}}}},
	}, extra...)
	plan := map[string]any{
		"format_version":   "1.2",
		"resource_changes": changes,
		"prior_state": map[string]any{"format_version": "1.0", "values": map[string]any{"root_module": map[string]any{"resources": []map[string]any{
			{"address": "data.k8scidr_service_moves.services", "mode": "data", "type": "k8scidr_service_moves", "name": "services",
				"values": map[string]any{"skipped": skips}},
			{"address": "data.k8scidr_workload_restarts.pods[0]", "mode": "data", "type": "k8scidr_workload_restarts", "name": "pods",
				"values": map[string]any{"pods": pods, "unmanaged": map[string]string{"jobs/pod/batch-1": "a Job's pod: it finishes on its own"}}},
			{"address": "data.k8scidr_preflight.migration", "mode": "data", "type": "k8scidr_preflight", "name": "migration",
				"values": map[string]any{"findings": []map[string]any{{"severity": "warning", "check": "rollout_stuck",
					"summary": "rollout_stuck on Deployment app/web", "detail": "It is paused: the roll waits for nothing."}}}},
		}}}},
	}
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func summarize(t *testing.T, plan []byte, log string, o Options) string {
	t.Helper()
	p, err := ReadPlan(bytes.NewReader(plan))
	if err != nil {
		t.Fatal(err)
	}
	diags, err := ReadLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	return Summarize(p, diags, o)
}

// rows counts the table rows under a heading.
func rows(s, heading string) int {
	_, after, ok := strings.Cut(s, heading)
	if !ok {
		return -1
	}
	section, _, _ := strings.Cut(after, "\n### ")
	return strings.Count(section, "\n| `")
}

func TestSummarize_small(t *testing.T) {
	log := `{"@level":"info","@message":"Terraform 1.14.0","type":"version","terraform":"1.14.0","ui":"1.2"}
{"@level":"warning","@message":"Warning: Migration Hazard","type":"diagnostic","diagnostic":{"severity":"warning","summary":"Migration Hazard: webhook_fail_closed on ValidatingWebhookConfiguration /policy","detail":"Service creates fail\nwhile it is down.","snippet":{"context":"resource \"k8scidr_service_recreation\" \"services\"","code":"","start_line":1,"highlight_start_offset":0,"highlight_end_offset":0,"values":[]}}}
{"@level":"warning","@message":"Warning: Migration Hazard","type":"diagnostic","diagnostic":{"severity":"warning","summary":"Migration Hazard: webhook_fail_closed on ValidatingWebhookConfiguration /policy","detail":"Service creates fail\nwhile it is down.","snippet":{"context":"resource \"k8scidr_service_recreation\" \"services\"","code":"","start_line":1,"highlight_start_offset":0,"highlight_end_offset":0,"values":[]}}}
`
	pool := map[string]any{"address": "k8scidr_calico_ippool.old[\"default-ipv4-ippool\"]", "mode": "managed", "type": "k8scidr_calico_ippool", "name": "old",
		"change": map[string]any{"actions": []string{"update"}, "importing": map[string]any{"id": "default-ipv4-ippool"},
			"before": map[string]any{"name": "default-ipv4-ippool", "cidr": "100.96.0.0/11", "disabled": false, "timeouts": nil},
			"after":  map[string]any{"name": "default-ipv4-ippool", "cidr": "100.96.0.0/11", "disabled": true, "timeouts": map[string]any{}}}}
	unchanged := map[string]any{"address": "k8scidr_service_cidr.new", "mode": "managed", "type": "k8scidr_service_cidr", "name": "new",
		"change": map[string]any{"actions": []string{"no-op"}, "before": map[string]any{}, "after": map[string]any{}}}
	deferred := map[string]any{"address": "data.k8scidr_network_overlaps.now", "mode": "data", "type": "k8scidr_network_overlaps", "name": "now",
		"change": map[string]any{"actions": []string{"read"}, "before": nil, "after": map[string]any{}}}
	s := summarize(t, planJSON(t, 3, 2, 4, pool, unchanged, deferred), log, Options{})
	t.Log("\n" + s)
	for _, want := range []string{
		"**3** Service moves · **2** workloads restart · **3** resources change · **5** left alone · **1** preflight finding · **1** warning",
		"Plan: 1 to create, 1 to import update, 1 to update.",
		// first first, then by name
		"|---|---|---|---|\n| `ns-001/svc-00001` | ClusterIP | 100.64.0.1 | 172.24.0.1 |\n| `ns-000/svc-00000` |",
		"| `ns-001/deployment/app-00001` | 3 |",
		"| `k8scidr_calico_ippool.old[\"default-ipv4-ippool\"]` | import update | `default-ipv4-ippool` `100.96.0.0/11` disabled: `false` → `true` |",
		"- headless (no ClusterIP) (2): `skip-000/svc-00000`, `skip-003/svc-00003`\n",
		"- not rolled: a Job's pod: it finishes on its own (1): `jobs/pod/batch-1`",
		"- **warning** rollout_stuck on Deployment app/web: It is paused",
		"### Errors and warnings (1)\n\n- **Warning: Migration Hazard: webhook_fail_closed on ValidatingWebhookConfiguration /policy** (resource \"k8scidr_service_recreation\" \"services\"): Service creates fail while it is down.\n",
		"### Read at apply, not at plan (their values were not reviewed) (1)\n\n- `data.k8scidr_network_overlaps.now`",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	if !strings.Contains(s, "| `k8scidr_service_recreation.services` | update |  |") {
		t.Error("the recreation is not among the changes")
	}
	if few := summarize(t, planJSON(t, 30, 0, 0), "", Options{Entries: 5}); rows(few, "### Service moves (30)") != 5 || !strings.Contains(few, "… and 25 more") {
		t.Errorf("Entries 5 does not show 5 of 30 moves:\n%s", few)
	}
	if strings.Contains(s, "more") || strings.Contains(s, "k8scidr_service_cidr.new") {
		t.Error("a short plan's summary cuts a list or shows an unchanged resource")
	}
}

// TestSummarize_10000Moves: a plan of 10,000 moves and 3,000 restarts stays under the limit,
// with as many entries of each list as fit and the exact count of the rest.
func TestSummarize_10000Moves(t *testing.T) {
	plan := planJSON(t, 10000, 3000, 6000)
	var log strings.Builder
	for i := range 500 {
		fmt.Fprintf(&log, `{"@level":"warning","type":"diagnostic","diagnostic":{"severity":"warning","summary":"Migration Hazard %d","detail":"%s"}}`+"\n", i, strings.Repeat("long detail ", 100))
	}
	if len(plan) < 1_000_000 {
		t.Fatalf("the synthetic plan is only %d bytes", len(plan))
	}
	s := summarize(t, plan, log.String(), Options{})
	if len(s) > DefaultLimit {
		t.Fatalf("summary of %d characters, over %d", len(s), DefaultLimit)
	}
	t.Logf("plan JSON %d bytes, summary %d characters; its first screen:\n%s", len(plan), len(s), strings.Join(strings.SplitN(s, "\n", 41)[:40], "\n"))
	shown := rows(s, "### Service moves (10000)")
	if shown < 10 {
		t.Fatalf("only %d of 10,000 moves shown in %d characters", shown, len(s))
	}
	if !strings.Contains(s, fmt.Sprintf("\n… and %d more\n", 10000-shown)) {
		t.Errorf("no \"… and %d more\" after %d moves", 10000-shown, shown)
	}
	if r := rows(s, "### Workload restarts (3000)"); r != shown || !strings.Contains(s, fmt.Sprintf("… and %d more", 3000-r)) {
		t.Errorf("%d restarts shown, want %d and the count of the rest", r, shown)
	}
	if !regexp.MustCompile(`- headless \(no ClusterIP\) \(2000\): .*… and \d+ more\n`).MatchString(s) {
		t.Error("skipped Services are not counted by reason")
	}
	if !strings.Contains(s, "### Errors and warnings (500)") {
		t.Error("the warnings are not counted")
	}
}

// TestSummarize_anySize: whatever the plan holds, the summary fits the limit.
func TestSummarize_anySize(t *testing.T) {
	var extra []map[string]any
	for i := range 3000 {
		extra = append(extra, map[string]any{"address": fmt.Sprintf("k8scidr_service_cidr.keep[%q]", strings.Repeat("x", 300)+fmt.Sprint(i)),
			"mode": "managed", "type": "k8scidr_service_cidr", "name": "keep",
			"change": map[string]any{"actions": []string{"delete", "create"}, "before": map[string]any{}, "after": map[string]any{"cidrs": []string{"100.64.0.0/28"}}}})
	}
	for _, limit := range []int{1000, 5000, DefaultLimit} {
		s := summarize(t, planJSON(t, 100, 10, 10, extra...), "", Options{Limit: limit})
		if len(s) > limit {
			t.Errorf("limit %d: summary of %d characters", limit, len(s))
		}
		if !strings.Contains(s, "3000 to replace") {
			t.Errorf("limit %d: the plan's counts are not kept:\n%s", limit, s)
		}
	}
}

func TestSummarize_failedPlan(t *testing.T) {
	log := `{"@level":"error","@message":"Error: Resource precondition failed","type":"diagnostic","diagnostic":{"severity":"error","summary":"Resource precondition failed","detail":"pods_pinned_to_old_pool on Deployment app-0/pinned: …"}}
Error: Failed to load plugin schemas
`
	diags, err := ReadLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(nil, diags, Options{Title: "stage 1"})
	for _, want := range []string{"## stage 1\n", "**The plan failed.**", "### Errors and warnings (2)",
		"- **Error: Resource precondition failed**: pods_pinned_to_old_pool on Deployment app-0/pinned",
		"- **Error: Error: Failed to load plugin schemas**"} {
		if !strings.Contains(s, want) {
			t.Errorf("the summary lacks %q:\n%s", want, s)
		}
	}
}

func TestReadPlan_notAPlan(t *testing.T) {
	if _, err := ReadPlan(strings.NewReader(`{"format_version":"9.0"}`)); err == nil {
		t.Error("a plan of an unknown format was read")
	}
	if _, err := ReadPlan(strings.NewReader(`Error: no such file`)); err == nil {
		t.Error("text was read as a plan")
	}
}

// TestSummarize_twoClusters: two recreations, one through an aliased provider whose
// configuration names its context, get a table each, named by address and cluster; a table cut
// short opens with a rollup by namespace, and a long one is folded.
func TestSummarize_twoClusters(t *testing.T) {
	var plan map[string]any
	if err := json.Unmarshal(planJSON(t, 120, 0, 0), &plan); err != nil {
		t.Fatal(err)
	}
	prod := map[string]any{}
	for i := range 3 {
		prod[fmt.Sprintf("team-a/svc-%d", i)] = movetext.Move{UID: fmt.Sprint(i), Type: "ClusterIP",
			OldIPs: []string{fmt.Sprintf("100.64.9.%d", i)}, NewIPs: []string{fmt.Sprintf("172.24.9.%d", i)}}.String()
	}
	plan["resource_changes"] = append(plan["resource_changes"].([]any), map[string]any{
		"address": "k8scidr_service_recreation.prod", "mode": "managed", "type": "k8scidr_service_recreation", "name": "prod",
		"change": map[string]any{"actions": []string{"update"}, "before": map[string]any{},
			"after": map[string]any{"plan": map[string]any{"moves": prod, "first_moves": []string{}, "restore": map[string]any{}}}}})
	plan["configuration"] = map[string]any{
		"provider_config": map[string]any{
			"k8scidr":      map[string]any{"name": "k8scidr", "full_name": "registry.terraform.io/k8scidr/k8scidr"},
			"k8scidr.prod": map[string]any{"name": "k8scidr", "alias": "prod", "expressions": map[string]any{"config_context": map[string]any{"constant_value": "prod-eu"}}},
		},
		"root_module": map[string]any{"resources": []map[string]any{
			{"address": "k8scidr_service_recreation.services", "mode": "managed", "type": "k8scidr_service_recreation", "name": "services", "provider_config_key": "k8scidr"},
			{"address": "k8scidr_service_recreation.prod", "mode": "managed", "type": "k8scidr_service_recreation", "name": "prod", "provider_config_key": "k8scidr.prod"},
		}},
	}
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(t, b, "", Options{})
	t.Log("\n" + s)
	for _, want := range []string{
		"### Service moves (120) · `k8scidr_service_recreation.services`\n\nBy namespace (120): `ns-000` 1 · ",
		"… and 110 more namespaces\n\n<details><summary>The first 50 of 120</summary>\n\n| Service | Type | Old IPs | New IPs |",
		"| `ns-049/svc-00049` | ClusterIP | 100.64.0.49 | 172.24.0.49 |\n\n</details>",
		"\n</details>\n\n… and 70 more\n",
		"### Service moves (3) · `k8scidr_service_recreation.prod` (provider `k8scidr.prod`, context `prod-eu`)\n\n| Service |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	if strings.Count(s, "<details>") != 1 || strings.Count(s, "By namespace") != 1 {
		t.Error("a short table is folded or rolled up")
	}
}

// TestChangeSummary: the apply's last line, from its -json log.
func TestChangeSummary(t *testing.T) {
	log := `{"@level":"info","@message":"Apply complete! Resources: 3 added, 0 changed, 0 destroyed.","type":"change_summary"}
{"@level":"info","@message":"Outputs: 0","type":"outputs"}`
	if got := ChangeSummary([]byte("not json\n" + log)); got != "Apply complete! Resources: 3 added, 0 changed, 0 destroyed." {
		t.Errorf("ChangeSummary = %q", got)
	}
	if got := ChangeSummary(nil); got != "" {
		t.Errorf("ChangeSummary(nil) = %q", got)
	}
}
