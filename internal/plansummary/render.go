// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Markdown rendering of a plan's facts, with each list cut to its first entries.
package plansummary

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxItem bounds one list entry (a warning's detail, a long reason): the summary's size then
// depends on the number of entries shown, never on what one object holds.
const maxItem = 400

func (f *facts) render(title string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	if f.failed {
		b.WriteString("**The plan failed.** Nothing can be applied until it succeeds.\n\n")
	} else {
		fmt.Fprintf(&b, "%s\n\n", f.headline())
	}
	f.renderMoves(&b, n)
	f.renderRestarts(&b, n)
	f.renderChanges(&b, n)
	f.renderSkipped(&b, n)
	section(&b, "Preflight findings", f.findings, n)
	f.renderDiagnostics(&b, n)
	if len(f.unread) > 0 {
		section(&b, "Read at apply, not at plan (their values were not reviewed)", code(f.unread), n)
	}
	return b.String()
}

func (f *facts) headline() string {
	skipped := 0
	for _, s := range f.skipped {
		skipped += len(s)
	}
	parts := []string{
		count(len(f.moves), "Service moves", "Service move"),
		count(len(f.restarts), "workloads restart", "workload restarts"),
		count(len(f.changes), "resources change", "resource changes"),
		count(skipped, "left alone", "left alone"),
		count(len(f.findings), "preflight findings", "preflight finding"),
		count(f.warnings(), "warnings", "warning"),
	}
	var actions []string
	for _, a := range slices.Sorted(maps.Keys(f.counts)) {
		actions = append(actions, fmt.Sprintf("%d to %s", f.counts[a], a))
	}
	if len(actions) == 0 {
		actions = []string{"no changes"}
	}
	return strings.Join(parts, " · ") + "\n\nPlan: " + strings.Join(actions, ", ") + "."
}

func (f *facts) warnings() int {
	n := 0
	for _, d := range f.diags {
		if d.Severity == "warning" {
			n++
		}
	}
	return n
}

func count(n int, plural, singular string) string {
	if n == 1 {
		return "**1** " + singular
	}
	return fmt.Sprintf("**%d** %s", n, plural)
}

// renderMoves shows each recreation's moves in a table of its own, named by its address.
func (f *facts) renderMoves(b *strings.Builder, n int) {
	for _, group := range byOwner(f.moves, func(m move) string { return m.owner }) {
		table(b, "Service moves", group[0].owner, []string{"Service", "Type", "Old IPs", "New IPs"}, group, n,
			func(m move) string { return m.service }, func(m move) []string {
				return []string{"`" + cell(m.service) + "`", cell(m.typ), cell(m.old), cell(m.new)}
			})
	}
}

func (f *facts) renderRestarts(b *strings.Builder, n int) {
	for _, group := range byOwner(f.restarts, func(r restart) string { return r.owner }) {
		table(b, "Workload restarts", group[0].owner, []string{"Workload", "Pods matching now"}, group, n,
			func(r restart) string { return r.workload }, func(r restart) []string {
				return []string{"`" + cell(r.workload) + "`", fmt.Sprint(r.pods)}
			})
	}
}

func (f *facts) renderChanges(b *strings.Builder, n int) {
	table(b, "Resource changes", "", []string{"Resource", "Action", "What"}, f.changes, n, nil, func(c change) []string {
		return []string{"`" + cell(c.address) + "`", c.action, cell(c.detail)}
	})
}

// byOwner splits rows by owner, keeping the order in which owners first appear.
func byOwner[T any](rows []T, owner func(T) string) [][]T {
	var out [][]T
	index := map[string]int{}
	for _, r := range rows {
		i, ok := index[owner(r)]
		if !ok {
			i = len(out)
			index[owner(r)] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// foldAt is how many rows a table shows open; a longer one is folded into <details>, so that
// a comment of 10,000 moves still opens on its counts.
const foldAt = 10

// table is a Markdown table of the first n rows, under a heading that counts them all and names
// the resource they belong to (owner, when given). A table cut short gets a rollup by namespace
// (the part of key before "/") first, and a long one is folded.
func table[T any](b *strings.Builder, heading, owner string, columns []string, rows []T, n int, key func(T) string, cells func(T) []string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### %s (%d)", heading, len(rows))
	if owner != "" {
		fmt.Fprintf(b, " · %s", owner)
	}
	b.WriteString("\n\n")
	if key != nil && len(rows) > n {
		b.WriteString(rollup(rows, key) + "\n\n")
	}
	shown := rows[:min(n, len(rows))]
	folded := len(shown) > foldAt
	if folded {
		fmt.Fprintf(b, "<details><summary>The first %d of %d</summary>\n\n", len(shown), len(rows))
	}
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
	for _, r := range shown {
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells(r), " | "))
	}
	if folded {
		b.WriteString("\n</details>\n")
	}
	more(b, len(rows), n)
}

// rollupShown is how many namespaces a rollup names.
const rollupShown = 10

// rollup counts rows per namespace, the largest first: "By namespace (500): `a` 20 · `b` 20 · …".
func rollup[T any](rows []T, key func(T) string) string {
	per := map[string]int{}
	for _, r := range rows {
		ns, _, _ := strings.Cut(key(r), "/")
		per[ns]++
	}
	names := slices.SortedFunc(maps.Keys(per), func(a, b string) int {
		if d := per[b] - per[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, ns := range names[:min(rollupShown, len(names))] {
		parts = append(parts, fmt.Sprintf("`%s` %d", clip(ns, 80), per[ns]))
	}
	if k := len(names) - rollupShown; k > 0 {
		parts = append(parts, fmt.Sprintf("… and %d more namespaces", k))
	}
	return fmt.Sprintf("By namespace (%d): %s", len(names), strings.Join(parts, " · "))
}

// renderSkipped lists what is left alone by reason, the largest group first.
func (f *facts) renderSkipped(b *strings.Builder, n int) {
	if len(f.skipped) == 0 {
		return
	}
	reasons := slices.SortedFunc(maps.Keys(f.skipped), func(a, b string) int {
		if d := len(f.skipped[b]) - len(f.skipped[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var lines []string
	for _, r := range reasons {
		names := slices.Sorted(slices.Values(f.skipped[r]))
		head := fmt.Sprintf("%s (%d): ", clip(r, maxItem/2), len(names))
		size := len(head) + len(", … and 000000 more")
		var shown []string
		for _, name := range names[:min(n, len(names))] {
			if size += len(name) + 4; size > maxItem {
				break
			}
			shown = append(shown, "`"+name+"`")
		}
		if k := len(names) - len(shown); k > 0 {
			shown = append(shown, fmt.Sprintf("… and %d more", k))
		}
		line := head + strings.Join(shown, ", ")
		lines = append(lines, line)
	}
	section(b, "Left alone, by reason", lines, n)
}

func (f *facts) renderDiagnostics(b *strings.Builder, n int) {
	var lines []string
	for _, d := range f.diags {
		line := fmt.Sprintf("**%s: %s**", strings.ToUpper(d.Severity[:1])+d.Severity[1:], d.Summary)
		if d.Context != "" {
			line += " (" + d.Context + ")"
		}
		if d.Detail != "" {
			line += ": " + strings.Join(strings.Fields(d.Detail), " ")
		}
		lines = append(lines, line)
	}
	section(b, "Errors and warnings", lines, n)
}

// section is a bulleted list of its first n entries.
func section(b *strings.Builder, heading string, items []string, n int) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "### %s (%d)\n\n", heading, len(items))
	for _, s := range items[:min(n, len(items))] {
		fmt.Fprintf(b, "- %s\n", clip(s, maxItem))
	}
	more(b, len(items), n)
}

func more(b *strings.Builder, total, n int) {
	if k := total - n; k > 0 {
		fmt.Fprintf(b, "\n… and %d more\n", k)
	}
	b.WriteString("\n")
}

func code(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = "`" + x + "`"
	}
	return out
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return clip(strings.ReplaceAll(s, "|", `\|`), maxItem)
}

// clip cuts s to at most n bytes on a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
