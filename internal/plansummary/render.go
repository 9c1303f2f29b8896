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

func (f *facts) renderMoves(b *strings.Builder, n int) {
	table(b, "Service moves", []string{"Service", "Type", "Old IPs", "New IPs"}, f.moves, n, func(m move) []string {
		return []string{"`" + cell(m.service) + "`", cell(m.typ), cell(m.old), cell(m.new)}
	})
}

func (f *facts) renderRestarts(b *strings.Builder, n int) {
	table(b, "Workload restarts", []string{"Workload", "Pods matching now"}, f.restarts, n, func(r restart) []string {
		return []string{"`" + cell(r.workload) + "`", fmt.Sprint(r.pods)}
	})
}

func (f *facts) renderChanges(b *strings.Builder, n int) {
	table(b, "Resource changes", []string{"Resource", "Action", "What"}, f.changes, n, func(c change) []string {
		return []string{"`" + cell(c.address) + "`", c.action, cell(c.detail)}
	})
}

// table is a Markdown table of the first n rows, under a heading that counts them all.
func table[T any](b *strings.Builder, heading string, columns []string, rows []T, n int, cells func(T) []string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### %s (%d)\n\n| %s |\n|%s\n", heading, len(rows), strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
	for _, r := range rows[:min(n, len(rows))] {
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells(r), " | "))
	}
	more(b, len(rows), n)
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
