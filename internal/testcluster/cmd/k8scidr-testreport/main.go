// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-testreport reads `go test -json` on stdin and prints what a person reads of a
// run: each package's result line, and the whole output of every test that failed. It fails
// (exit 1) when a test failed, when the stream holds no result for a test that started (a
// crash, a timeout), and when a test was skipped that the allow-list does not name: under
// `make test` a skip is a failure unless tools/test-skips.txt says why it is expected.
//
//	go test -json ./... | k8scidr-testreport -allow tools/test-skips.txt -step "the acceptance suite"
//
// The allow-list holds one rule a line, "<pattern> <reason>", the pattern matched against the
// whole "<package path>.<test>" with * standing for any text (e.g.
// "*/internal/provider.TestAccMatrix_*"); # starts a comment. The skips it allowed are printed with their rule, so a run's log says
// what did not run and why.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type rule struct {
	pattern *regexp.Regexp
	reason  string
}

func main() {
	allow := flag.String("allow", "", "the allow-list of expected skips")
	step := flag.String("step", "go test", "what this run is, for the summary")
	each := flag.Bool("each", false, "print a line for every test that ends (which ran, and how long)")
	flag.Parse()
	rules, err := readRules(*allow)
	if err == nil {
		err = report(os.Stdin, os.Stdout, rules, *step, *each)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8scidr-testreport:", err)
		os.Exit(1)
	}
}

func readRules(file string) ([]rule, error) {
	if file == "" {
		return nil, nil
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rules []rule
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pattern, reason, ok := strings.Cut(line, " ")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want \"<pattern> <reason>\", got %q", file, i+1, line)
		}
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$")
		rules = append(rules, rule{re, strings.TrimSpace(reason)})
	}
	return rules, nil
}

// report prints the run and returns an error naming what failed it.
func report(in io.Reader, out io.Writer, rules []rule, step string, each bool) error {
	var werr error // the first failed write to out
	say := func(format string, args ...any) {
		if werr == nil {
			_, werr = fmt.Fprintf(out, format, args...)
		}
	}
	output := map[string]*strings.Builder{} // by package.test, while it runs
	started := map[string]bool{}
	var failed, unexpected, allowed, packageFailed []string
	var took []event // top-level tests that ended, for the slowest list
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// go test's own messages (build errors) are not JSON: show them as they are.
			say("%s\n", sc.Text())
			continue
		}
		id := e.Package + "." + e.Test
		switch {
		case e.Test == "" && e.Action == "output":
			say("%s", e.Output) // the package's "ok"/"FAIL" lines, and output outside tests
		case e.Test == "":
			if e.Action == "fail" { // "skip" is a package without tests
				packageFailed = append(packageFailed, e.Package)
			}
		case e.Action == "run":
			started[id], output[id] = true, &strings.Builder{}
		case e.Action == "output":
			if b := output[id]; b != nil {
				b.WriteString(e.Output)
			}
		case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
			delete(started, id)
			text := output[id]
			delete(output, id)
			if each {
				say("--- %s: %s (%.1fs)\n", strings.ToUpper(e.Action), e.Test, e.Elapsed)
			}
			if !strings.Contains(e.Test, "/") {
				took = append(took, e)
			}
			switch e.Action {
			case "fail":
				failed = append(failed, id)
				if text != nil {
					say("%s", text.String())
				}
			case "skip":
				if r, ok := matchRule(rules, id); ok {
					allowed = append(allowed, fmt.Sprintf("%s (%s)", id, r.reason))
				} else {
					unexpected = append(unexpected, id)
					if text != nil {
						say("%s", text.String())
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	unfinished := slices.Sorted(func(yield func(string) bool) {
		for id := range started {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range unfinished {
		if text := output[id]; text != nil {
			say("%s", text.String())
		}
	}
	say("\n%s: %d test(s) failed, %d unfinished, %d skipped unexpectedly, %d skipped as allowed\n",
		step, len(failed), len(unfinished), len(unexpected), len(allowed))
	for _, a := range allowed {
		say("  allowed skip: %s\n", a)
	}
	say("%s", slowest(took, 30))
	errs := []error{werr}
	if len(failed) > 0 {
		errs = append(errs, fmt.Errorf("failed: %s", strings.Join(failed, ", ")))
	}
	if len(unfinished) > 0 {
		errs = append(errs, fmt.Errorf("started but never finished (crash or timeout): %s", strings.Join(unfinished, ", ")))
	}
	if len(unexpected) > 0 {
		errs = append(errs, fmt.Errorf("skipped, and not on the allow-list: %s (a skip under make test hides a test that did not run; "+
			"fix what made it skip, or add it to the allow-list with the reason)", strings.Join(unexpected, ", ")))
	}
	if len(failed)+len(unfinished)+len(unexpected) == 0 && len(packageFailed) > 0 {
		errs = append(errs, fmt.Errorf("package(s) failed: %s", strings.Join(packageFailed, ", ")))
	}
	return errors.Join(errs...)
}

// slowest lists the n longest tests with their share of the summed test time: where a step's
// minutes go, in every CI log (the CI budget is the suite's sum on 2 cores).
func slowest(took []event, n int) string {
	if len(took) == 0 {
		return ""
	}
	var sum float64
	for _, e := range took {
		sum += e.Elapsed
	}
	slices.SortStableFunc(took, func(a, b event) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	var b strings.Builder
	fmt.Fprintf(&b, "  slowest of %d tests (%.0fs in all):", len(took), sum)
	for _, e := range took[:min(n, len(took))] {
		fmt.Fprintf(&b, " %s %.0fs;", e.Test, e.Elapsed)
	}
	return strings.TrimSuffix(b.String(), ";") + "\n"
}

func matchRule(rules []rule, id string) (rule, bool) {
	for _, r := range rules {
		if r.pattern.MatchString(id) {
			return r, true
		}
	}
	return rule{}, false
}
