// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/plansummary"
)

// Twin is what the report says about the twin the rehearsal ran on.
type Twin struct {
	Snapshot *Snapshot
	// Version is the twin's kube-apiserver (gitVersion).
	Version string
	Loaded  *Loaded
	// Setup is how long starting and loading the twin took; Total the whole rehearsal.
	Setup, Total time.Duration
}

// NotRehearsed lists what the twin cannot show: each webhook (its backend is not in the twin,
// so its decision is unknown), and what no copy of objects holds.
func (t *Twin) NotRehearsed() ([]string, error) {
	var out []string
	for _, f := range []string{"validatingwebhookconfigurations.yaml", "mutatingwebhookconfigurations.yaml"} {
		objs, err := t.Snapshot.Objects(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				hm, _ := h.(map[string]any)
				name, _ := hm["name"].(string)
				policy, _ := hm["failurePolicy"].(string)
				var resources []string
				rules, _, _ := unstructured.NestedSlice(hm, "rules")
				for _, r := range rules {
					if rm, ok := r.(map[string]any); ok {
						rs, _, _ := unstructured.NestedStringSlice(rm, "resources")
						resources = append(resources, rs...)
					}
				}
				out = append(out, fmt.Sprintf("%s %s, webhook %s (failurePolicy %s, on %s): its backend is not in the twin, so its decision is unknown: a stand-in with its rules and failurePolicy that denies and changes nothing",
					o.GetKind(), o.GetName(), name, policy, strings.Join(slices.Compact(slices.Sorted(slices.Values(resources))), ",")))
			}
		}
	}
	return append(out,
		"Cloud load balancers: LoadBalancer Services keep their recorded ingress; no cloud controller acts on them.",
		"The data plane: no kube-proxy, no DNS traffic, no packets; what a move does to connections is measured by make bench, not here.",
		"Nodes: kwok nodes with production's names, labels, taints and pod ranges; no kubelet: a node roll is their registration again (or kubelet-config's new clusterDNS) and their static pods made again, with no drain; no reboot is rehearsed.",
		"Pod addresses: the twin's pods get new addresses from the same Calico pools (IPAM blocks and handles are recorded, not copied).",
		"Secrets, and ConfigMaps other than "+strings.Join(ConfigMaps, ", ")+", are not copied.",
	), nil
}

// Markdown renders the report as the pull-request comment shows it.
func (r *Report) Markdown(title string, twin *Twin) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	if r.Failed() {
		b.WriteString("**Result: FAILED** — ")
		switch {
		case slices.ContainsFunc(r.Stages, Stage.Failed):
			i := slices.IndexFunc(r.Stages, Stage.Failed)
			fmt.Fprintf(&b, "%s failed: %s\n\n", r.Stages[i].Name, r.Stages[i].PlanError+r.Stages[i].ApplyError)
		default:
			fmt.Fprintf(&b, "the journal still holds %d Service(s) at the end\n\n", len(r.Journal))
		}
	} else {
		fmt.Fprintf(&b, "**Result: passed** — %d stage(s) planned and applied, nothing left in the journal\n\n", len(r.Stages))
	}
	if twin != nil {
		m := twin.Snapshot.Manifest
		fmt.Fprintf(&b, "Twin: Kubernetes %s (production: %s), snapshot of %s, started and loaded in %s; the whole rehearsal took %s. "+
			"Service ranges %s (%s). kube-controller-manager: %s.\n\n",
			twin.Version, m.Server.GitVersion, m.ExportedAt.Format(time.RFC3339), twin.Setup.Round(time.Second), twin.Total.Round(time.Second),
			strings.Join(m.ServiceClusterIPRanges, ","), m.RangesSource, kcmText(m))
		b.WriteString("| snapshot file | objects | loaded |\n|---|---:|---:|\n")
		for _, f := range m.Files {
			loaded := "recorded"
			if i := slices.IndexFunc(Kinds, func(k Kind) bool { return k.File == f.Name }); i >= 0 && Kinds[i].Load {
				loaded = fmt.Sprint(twin.Loaded.Objects[f.Name])
			}
			if f.Missing != "" {
				loaded = f.Missing
			}
			fmt.Fprintf(&b, "| %s | %d | %s |\n", f.Name, f.Objects, loaded)
		}
		fmt.Fprintf(&b, "\nPods running in the twin: %d.\n", twin.Loaded.Pods)
		if len(twin.Loaded.NotLoaded) > 0 {
			bullets(&b, "Not loaded (the twin refused them; what they would do is not rehearsed)", twin.Loaded.NotLoaded, 20)
		}
		nr, err := twin.NotRehearsed()
		if err != nil {
			return "", err
		}
		bullets(&b, "Not rehearsed", nr, 50)
	}
	for _, s := range r.Stages {
		fmt.Fprintf(&b, "\n### %s\n\n", s.Name)
		if s.Before != "" {
			fmt.Fprintf(&b, "Before it, outside Terraform: %s.\n\n", s.Before)
		}
		fmt.Fprintf(&b, "Plan %s", s.PlanTime.Round(100*time.Millisecond))
		if s.PlanError == "" {
			fmt.Fprintf(&b, ", apply %s", s.ApplyTime.Round(100*time.Millisecond))
		}
		b.WriteString(" on the twin.\n\n<details><summary>The saved plan, as the pull request shows it</summary>\n\n")
		b.WriteString(strings.ReplaceAll(s.Summary, "\n## ", "\n#### "))
		b.WriteString("\n</details>\n\n")
		if s.PlanError != "" {
			fmt.Fprintf(&b, "**The plan failed:** %s\n", s.PlanError)
			continue
		}
		if s.Change != "" {
			fmt.Fprintf(&b, "Apply: %s\n", s.Change)
		}
		if s.ApplyError != "" {
			fmt.Fprintf(&b, "\n**The apply failed:** %s\n", s.ApplyError)
		}
		var refused []string
		for _, d := range s.Diagnostics {
			refused = append(refused, fmt.Sprintf("%s: %s — %s", d.Severity, d.Summary, strings.ReplaceAll(strings.TrimSpace(d.Detail), "\n", " ")))
		}
		bullets(&b, "Refused, not done, or warned (the apply's diagnostics)", refused, 30)
		if len(s.Moves) > 0 {
			if len(s.Differences) == 0 {
				fmt.Fprintf(&b, "\nEvery one of the %d planned moves holds its planned IPs after the apply.\n", len(s.Moves))
			} else {
				bullets(&b, fmt.Sprintf("Differences between the plan and the result (%d of %d planned moves)", len(s.Differences), len(s.Moves)), s.Differences, 30)
			}
		}
	}
	b.WriteString("\n### The journal at the end\n\n")
	if len(r.Journal) == 0 {
		b.WriteString("Empty: every move finished.\n")
	} else {
		bullets(&b, fmt.Sprintf("%d Service(s) still journaled (the next apply restores or finishes them)", len(r.Journal)), r.Journal, 30)
	}
	return b.String(), nil
}

func kcmText(m Manifest) string {
	if len(m.ControllerManagerFlags) == 0 {
		return "production's settings unknown (" + m.ControllerManagerSource + "), the twin runs its defaults"
	}
	var taken []string
	for _, f := range m.ControllerManagerFlags {
		if slices.ContainsFunc(kcmFlags, func(p string) bool { return strings.HasPrefix(f, p) }) {
			taken = append(taken, "`"+f+"`")
		}
	}
	if len(taken) == 0 {
		return "production's defaults (from " + m.ControllerManagerSource + ")"
	}
	return "production's " + strings.Join(taken, " ") + " (from " + m.ControllerManagerSource + ")"
}

func bullets(b *strings.Builder, heading string, items []string, n int) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s:\n", heading)
	for _, it := range items[:min(n, len(items))] {
		fmt.Fprintf(b, "- %s\n", it)
	}
	if len(items) > n {
		fmt.Fprintf(b, "- … and %d more\n", len(items)-n)
	}
}

// Outcome is what the rehearsal found, without what varies from run to run (times, pod
// addresses): one line per fact, to hold a rehearsal on the twin against one on the original.
func (r *Report) Outcome() []string {
	var out []string
	for _, s := range r.Stages {
		add := func(format string, args ...any) { out = append(out, s.Name+": "+fmt.Sprintf(format, args...)) }
		if s.Before != "" {
			add("before: %s", s.Before)
		}
		// Diagnostics in a stable order: terraform logs them as its graph walk meets them.
		for _, d := range sortedDiags(s.PlanDiagnostics) {
			add("plan %s", d)
		}
		if s.PlanError != "" {
			add("plan failed: %s", s.PlanError)
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(s.Moves)) {
			add("move %s to %s", k, strings.Join(s.Moves[k], ","))
		}
		for _, k := range slices.Sorted(maps.Keys(s.Skipped)) {
			add("leave %s: %s", k, s.Skipped[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.Restarts)) {
			add("restart %s (%d pods)", k, s.Restarts[k])
		}
		for _, d := range sortedDiags(s.Diagnostics) {
			add("apply %s", d)
		}
		if s.ApplyError != "" {
			add("apply failed: %s", s.ApplyError)
		}
		add("applied: %s", s.Change)
		for _, d := range s.Differences {
			add("differs: %s", d)
		}
	}
	for _, j := range r.Journal {
		out = append(out, "journal: "+j)
	}
	return out
}

func sortedDiags(diags []plansummary.Diagnostic) []string {
	out := make([]string, len(diags))
	for i, d := range diags {
		out[i] = d.Severity + ": " + d.Summary
	}
	slices.Sort(out)
	return out
}
