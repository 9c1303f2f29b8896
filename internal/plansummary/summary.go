// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package plansummary turns a saved plan (`terraform show -json`) and, optionally, the plan's
// machine-readable log (`terraform plan -json`) into a Markdown summary for a pull-request
// comment: Service moves, workload restarts, pools and ranges touched, Services skipped by
// reason, preflight findings and warnings, each list cut to its first entries so that the whole
// stays under a size limit (GitHub refuses comments over 65,536 characters) for any plan size.
package plansummary

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
)

// DefaultLimit keeps a summary under GitHub's 65,536-character comment limit with room for a
// heading the CI job adds.
const DefaultLimit = 60000

// Options shape the output.
type Options struct {
	// Title is the first heading.
	Title string
	// Entries is the most entries shown per list (0: 50); fewer are shown when the summary
	// would exceed Limit.
	Entries int
	// Limit is the most characters of the summary.
	Limit int
}

// Diagnostic is an error or warning terraform reported while planning.
type Diagnostic struct {
	Severity, Summary, Detail, Context string
}

// ReadPlan decodes `terraform show -json` output.
func ReadPlan(r io.Reader) (*tfjson.Plan, error) {
	var p tfjson.Plan
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return nil, fmt.Errorf("reading the plan JSON (terraform show -json): %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("reading the plan JSON (terraform show -json): %w", err)
	}
	return &p, nil
}

// ReadLog returns the error and warning diagnostics of `terraform plan -json` output, once each;
// lines that are not JSON log messages (terraform's own failures before it starts logging) are
// kept as errors.
func ReadLog(r io.Reader) ([]Diagnostic, error) {
	var out []Diagnostic
	seen := map[Diagnostic]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		d, ok := diagnostic(line)
		if !ok || seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the plan log (terraform plan -json): %w", err)
	}
	return out, nil
}

// ChangeSummary is the change summary of `terraform apply -json` output ("Apply complete!
// Resources: …"), "" when there is none.
func ChangeSummary(log []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var m struct {
			Type    string `json:"type"`
			Message string `json:"@message"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Type == "change_summary" {
			return m.Message
		}
	}
	return ""
}

// Outputs is the root module's output values as an apply's -json log reports them at its end
// (a sensitive one is left out), by name.
func Outputs(log []byte) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var m struct {
			Type    string `json:"type"`
			Outputs map[string]struct {
				Sensitive bool            `json:"sensitive"`
				Value     json.RawMessage `json:"value"`
			} `json:"outputs"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Type != "outputs" {
			continue
		}
		clear(out)
		for k, v := range m.Outputs {
			if !v.Sensitive && v.Value != nil {
				out[k] = v.Value
			}
		}
	}
	return out
}

func diagnostic(line string) (Diagnostic, bool) {
	msg, err := tfjson.UnmarshalLogMessage([]byte(line))
	if err != nil {
		return Diagnostic{Severity: "error", Summary: line}, true
	}
	m, ok := msg.(tfjson.DiagnosticLogMessage)
	if !ok {
		return Diagnostic{}, false
	}
	d := Diagnostic{Severity: string(m.Severity), Summary: m.Summary, Detail: m.Detail}
	if s := m.Snippet; s != nil && s.Context != nil {
		d.Context = *s.Context
	}
	return d, true
}

// Summarize renders the summary of plan (nil when the plan failed and only its log is there).
func Summarize(plan *tfjson.Plan, diags []Diagnostic, o Options) string {
	o.Limit = cmp.Or(o.Limit, DefaultLimit)
	o.Title = cmp.Or(o.Title, "k8scidr plan")
	f := collect(plan, diags)
	var text string
	first := cmp.Or(o.Entries, 50)
	for _, n := range []int{first, 20, 10, 5, 2, 0} {
		if n > first {
			continue
		}
		if text = f.render(o.Title, n); len(text) <= o.Limit {
			return text
		}
	}
	return cut(text, o.Limit)
}

// cut keeps whole lines of text up to limit characters, with a last line saying so.
func cut(text string, limit int) string {
	const tail = "\n\n… the summary is cut here to fit a comment; the full plan is in the job's artifacts.\n"
	text = text[:limit-len(tail)]
	if i := strings.LastIndexByte(text, '\n'); i > 0 {
		text = text[:i]
	}
	return text + tail
}

// facts is what a summary shows, gathered from the plan.
type facts struct {
	failed   bool
	counts   map[string]int // planned actions of managed resources: create, update, delete, …
	moves    []move
	restarts []restart
	changes  []change // every managed resource the plan changes
	skipped  map[string][]string
	unread   []string // data sources read only at apply
	findings []string
	diags    []Diagnostic
}

// move is one Service move of the recreation owner (its resource address, with the cluster
// where the provider configuration says which).
type move struct{ owner, service, typ, old, new string }

type restart struct {
	owner, workload string
	pods            int64
}

type change struct{ address, action, detail string }

func collect(plan *tfjson.Plan, diags []Diagnostic) *facts {
	f := &facts{failed: plan == nil, counts: map[string]int{}, skipped: map[string][]string{}, diags: diags}
	if plan == nil {
		return f
	}
	pods := map[string]int64{}
	if plan.PriorState != nil && plan.PriorState.Values != nil {
		eachDataSource(plan.PriorState.Values.RootModule, func(r *tfjson.StateResource) { f.readData(r, pods) })
	}
	clusters := providerClusters(plan)
	for _, rc := range plan.ResourceChanges {
		f.readChange(rc, pods, clusters)
	}
	if len(diags) == 0 {
		f.diags = failedChecks(plan.Checks)
	}
	return f
}

func eachDataSource(m *tfjson.StateModule, fn func(*tfjson.StateResource)) {
	if m == nil {
		return
	}
	for _, r := range m.Resources {
		if r.Mode == tfjson.DataResourceMode {
			fn(r)
		}
	}
	for _, c := range m.ChildModules {
		eachDataSource(c, fn)
	}
}

// readData takes what the data sources read at plan: why Services do not move, the pods of
// each workload, the preflight findings.
func (f *facts) readData(r *tfjson.StateResource, pods map[string]int64) {
	v := r.AttributeValues
	switch r.Type {
	case "k8scidr_service_moves":
		for svc, reason := range mapOf(v["skipped"]) {
			f.skipped[str(reason)] = append(f.skipped[str(reason)], svc)
		}
	case "k8scidr_workload_restarts":
		for w, n := range mapOf(v["pods"]) {
			pods[w] = integer(n)
		}
		for w, reason := range mapOf(v["unmanaged"]) {
			f.skipped["not rolled: "+str(reason)] = append(f.skipped["not rolled: "+str(reason)], w)
		}
	case "k8scidr_preflight":
		for _, x := range listOf(v["findings"]) {
			m := mapOf(x)
			f.findings = append(f.findings, fmt.Sprintf("**%s** %s: %s", str(m["severity"]), str(m["summary"]), str(m["detail"])))
		}
	}
}

// providerClusters names, by resource address (without instance keys), the cluster of each
// resource whose provider configuration is not the default one: the provider's alias, and its
// config_context where that is a constant.
func providerClusters(plan *tfjson.Plan) map[string]string {
	out := map[string]string{}
	if plan.Config == nil || plan.Config.RootModule == nil {
		return out
	}
	for _, r := range plan.Config.RootModule.Resources {
		key := r.ProviderConfigKey
		if !strings.Contains(key, ".") {
			continue // the default configuration: one cluster, nothing to tell apart
		}
		name := "provider `" + key + "`"
		if pc := plan.Config.ProviderConfigs[key]; pc != nil {
			if e := pc.Expressions["config_context"]; e != nil && e.ConstantValue != nil {
				name += fmt.Sprintf(", context `%v`", e.ConstantValue)
			}
		}
		out[r.Address] = name
	}
	return out
}

// ownerOf is how a table names the resource it belongs to: its address, with its cluster.
func ownerOf(rc *tfjson.ResourceChange, clusters map[string]string) string {
	owner := "`" + rc.Address + "`"
	base := rc.Address
	if i := strings.IndexByte(base, '['); i >= 0 {
		base = base[:i]
	}
	if c := clusters[base]; c != "" {
		owner += " (" + c + ")"
	}
	return owner
}

func (f *facts) readChange(rc *tfjson.ResourceChange, pods map[string]int64, clusters map[string]string) {
	a := rc.Change.Actions
	if rc.Mode == tfjson.DataResourceMode {
		if a.Read() {
			f.unread = append(f.unread, rc.Address)
		}
		return
	}
	action := actionName(rc.Change)
	if action == "" {
		return
	}
	f.counts[action]++
	after := mapOf(rc.Change.After)
	switch {
	case rc.Type == "k8scidr_service_recreation" && !a.Delete():
		f.addMoves(ownerOf(rc, clusters), after)
	case rc.Type == "k8scidr_workload_roll" && !a.Delete():
		owner := ownerOf(rc, clusters)
		for _, w := range listOf(mapOf(after["plan"])["workloads"]) {
			f.restarts = append(f.restarts, restart{owner: owner, workload: str(w), pods: pods[str(w)]})
		}
	}
	f.changes = append(f.changes, change{address: rc.Address, action: action, detail: changeDetail(rc)})
}

// listed are the attributes the summary shows as lists of their own, not as changes.
var listed = map[string]bool{"moves": true, "restore": true, "first_moves": true, "workloads": true, "timeouts": true, "id": true}

// actionName is the plan's action in words, empty for no change.
func actionName(c *tfjson.Change) string {
	a := c.Actions
	var s string
	switch {
	case a.NoOp() || a.Read():
		s = ""
	case a.Replace():
		s = "replace"
	default:
		s = string(a[0])
	}
	if c.Importing != nil {
		return strings.TrimSuffix("import "+s, " ")
	}
	return s
}

// addMoves lists a recreation's moves (its plan's), the plan's `first_moves` Services in their
// order, then the others by name, and the Services it restores from the journal.
func (f *facts) addMoves(owner string, after map[string]any) {
	plan := mapOf(after["plan"])
	moves := mapOf(plan["moves"])
	order := []string{}
	for _, k := range listOf(plan["first_moves"]) {
		if _, ok := moves[str(k)]; ok && !slices.Contains(order, str(k)) {
			order = append(order, str(k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(moves)) {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for _, k := range order {
		m, err := movetext.Parse(str(moves[k]))
		if err != nil { // not from this provider version's data source: shown as it is
			f.moves = append(f.moves, move{owner: owner, service: k, typ: str(moves[k])})
			continue
		}
		f.moves = append(f.moves, move{owner: owner, service: k, typ: m.Type, old: strings.Join(m.OldIPs, ", "), new: strings.Join(m.NewIPs, ", ")})
	}
	restore := mapOf(plan["restore"])
	for _, k := range slices.Sorted(maps.Keys(restore)) {
		f.moves = append(f.moves, move{owner: owner, service: k, typ: "restored from the journal", old: "", new: join(mapOf(restore[k])["new_ips"])})
	}
}

// changedAttributes are the attributes of after that differ from before, as "name: old → new",
// leaving out the lists the summary shows apart, the plan object (see changeDetail) and unknowns.
func changedAttributes(prefix string, before, after, unknown map[string]any) []string {
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if listed[k] || k == "plan" || unknown[k] != nil {
			continue
		}
		if b, _ := json.Marshal(before[k]); string(b) != mustJSON(after[k]) {
			changed = append(changed, fmt.Sprintf("%s%s: %s → %s", prefix, k, short(before[k]), short(after[k])))
		}
	}
	return changed
}

// changeDetail says what a pool, range or other resource change is about: its name and range (for
// the apiserver Service, its range and new IPs; for a canary, the ranges it expects), and which
// top-level attributes change.
func changeDetail(rc *tfjson.ResourceChange) string {
	before, after := mapOf(rc.Change.Before), mapOf(rc.Change.After)
	var parts []string
	for _, k := range []string{"name", "cidr", "cidrs", "service_cidrs", "new_ips", "expect_cidrs"} {
		v := after[k]
		if v == nil {
			v = before[k]
		}
		if s := join(v); s != "" {
			parts = append(parts, "`"+s+"`")
		}
	}
	if rc.Change.Actions.Update() {
		changed := changedAttributes("", before, after, mapOf(rc.Change.AfterUnknown))
		// A stage's plan object: its own settings (dns_bridge, triggers), not the lists shown apart.
		changed = append(changed, changedAttributes("plan.", mapOf(before["plan"]), mapOf(after["plan"]), nil)...)
		if len(changed) > 0 {
			parts = append(parts, strings.Join(changed, ", "))
		}
	}
	return strings.Join(parts, " ")
}

func failedChecks(checks []tfjson.CheckResultStatic) []Diagnostic {
	var out []Diagnostic
	for _, c := range checks {
		for _, in := range c.Instances {
			for _, p := range in.Problems {
				out = append(out, Diagnostic{Severity: "warning", Summary: "Check " + in.Address.ToDisplay + " failed", Detail: p.Message})
			}
		}
	}
	return out
}

// integer reads a JSON number, which tfjson decodes as float64.
func integer(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case json.Number:
		i, _ := x.Int64()
		return i
	}
	return 0
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		return mustJSON(x)
	}
}

// join renders a string or a list of strings.
func join(v any) string {
	if l, ok := v.([]any); ok {
		s := make([]string, len(l))
		for i, x := range l {
			s[i] = str(x)
		}
		return strings.Join(s, ", ")
	}
	return str(v)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// short renders a value for a changed-attribute list, cut to 80 characters.
func short(v any) string {
	s := mustJSON(v)
	if x, ok := v.(string); ok {
		s = x
	}
	return "`" + clip(s, 80) + "`"
}
