// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport: a run passes only when every test that started passed or was skipped by a rule;
// a failure shows its output, an unlisted skip and a test that never finished fail the run.
func TestReport(t *testing.T) {
	const pkg = "example.com/m/internal/provider"
	line := func(action, test, output string) string {
		return `{"Action":"` + action + `","Package":"` + pkg + `","Test":"` + test + `","Output":` + quote(output) + "}\n"
	}
	allow := filepath.Join(t.TempDir(), "skips")
	if err := os.WriteFile(allow, []byte("# comment\n*/provider.TestAccMatrix_* runs in the matrix step\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := readRules(allow)
	if err != nil {
		t.Fatal(err)
	}
	pass := line("run", "TestA", "") + line("output", "TestA", "quiet\n") + line("pass", "TestA", "") +
		line("run", "TestAccMatrix_x", "") + line("skip", "TestAccMatrix_x", "") +
		`{"Action":"output","Package":"` + pkg + `","Output":"ok  \t` + pkg + `\t1.0s\n"}` + "\n" +
		`{"Action":"pass","Package":"` + pkg + `"}` + "\n" + `{"Action":"skip","Package":"example.com/m/notests"}` + "\n"
	for _, c := range []struct {
		name, stream string
		fails        string // "" when the run passes
		shows        string
	}{
		{"passes and an allowed skip", pass, "", "allowed skip: " + pkg + ".TestAccMatrix_x (runs in the matrix step)"},
		{"a package that fails outside its tests", pass + `{"Action":"fail","Package":"` + pkg + `"}` + "\n", "package(s) failed", ""},
		{"a failure", pass + line("run", "TestB", "") + line("output", "TestB", "boom at line 3\n") + line("fail", "TestB", ""),
			"failed: " + pkg + ".TestB", "boom at line 3"},
		{"a skip not on the list", pass + line("run", "TestC", "") + line("output", "TestC", "needs root\n") + line("skip", "TestC", ""),
			"not on the allow-list: " + pkg + ".TestC", "needs root"},
		{"a test that never finished", pass + line("run", "TestD", "") + line("output", "TestD", "panic: timeout\n"),
			"never finished (crash or timeout): " + pkg + ".TestD", "panic: timeout"},
	} {
		var out strings.Builder
		err := report(strings.NewReader(c.stream), &out, rules, "step", false)
		switch {
		case c.fails == "" && err != nil:
			t.Errorf("%s: failed the run: %v", c.name, err)
		case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.fails)
		}
		if !strings.Contains(out.String(), c.shows) {
			t.Errorf("%s: the report lacks %q:\n%s", c.name, c.shows, out.String())
		}
		if strings.Contains(out.String(), "quiet") {
			t.Errorf("%s: a passing test's output is shown:\n%s", c.name, out.String())
		}
	}
	var out strings.Builder
	stream := line("run", "TestFast", "") + `{"Action":"pass","Package":"` + pkg + `","Test":"TestFast","Elapsed":1.5}` + "\n" +
		line("run", "TestSlow", "") + `{"Action":"pass","Package":"` + pkg + `","Test":"TestSlow/sub","Elapsed":70}` + "\n" +
		`{"Action":"fail","Package":"` + pkg + `","Test":"TestSlow","Elapsed":80}` + "\n"
	_ = report(strings.NewReader(stream), &out, rules, "step", false)
	if want := "slowest of 2 tests (82s in all): TestSlow 80s; TestFast 2s\n"; !strings.Contains(out.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, out.String())
	}
	if _, err := readRules(writeFile(t, "TestX\n")); err == nil {
		t.Error("a rule without a reason is accepted")
	}
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(s) + `"`
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
