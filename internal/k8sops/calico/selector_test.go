// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package calico

import (
	"strings"
	"testing"
)

// The grammar cases of Calico's own parser tests (libcalico-go/lib/selector/parser), and the
// node selectors IPPools carry in the write-ups and Calico's docs.
var (
	goodCalicoSelectors = []string{
		``, ` `, `all()`, ` all() `, ` (all() )`, `global()`, `has(a)`, `has( b )`, `!has(a)`, `!!! has(a)`,
		`! !!has(a)`, `a == "a"`, `a == 'a'`, `a == "'"`, `a == '"'`, `a != "b"`, `a!='"'`,
		`a contains "a"`, `a starts with "a"`, `a startswith '"'`, `a ends with "a"`, `a endswith "'"`,
		`a in {"a"}`, `a in {"a", "b"}`, `a in {}`, `a in {"a",}`, `a not in {"d", "e"}`, `a notin {"d"}`,
		`a in{"a"}`, `!a in {"a"}`, `a == "b" && c == "d"`, `a == "b" || c == "d"`,
		`! (a == "b"&&! c != "d")`, `!(has(b) || !has(a))`, `!a == 'a1' && b == 'b1'`,
		`has == "x"`, `in == "x"`, `kubernetes.io/hostname == "node-1"`, `zone in {"a", "b"} && !has(edge)`,
		`topology.kubernetes.io/zone == "us-east-1a"`, strings.Repeat("l", calicoMaxLabel) + ` == "x"`,
	}
	badCalicoSelectors = []string{
		`b == b`, `b contains b`, `b starts with b`, `b ends with b`, `'b1' == b`, `b`, `a b`, `!`,
		`foo == "bar" &`, `foo == "bar" |`, `foo != ||`, `foo in {"", ||`, `foo in ""`, `"FOO`, `"FOO'`,
		`'FOO`, `(`, `(a == "foo"`, `)`, `()`, `%`, `a == "b" && %`, `a == "b" || %`, `a `,
		`has(foo) &&`, `has((`, `has(`, `has()`, `all(x)`, `a = "b"`, `a == "b" c`, `a in {"b"`,
		`a containsx "b"`, `a == "b")`, strings.Repeat("l", calicoMaxLabel+1) + ` == "x"`,
	}
)

func TestValidateCalicoSelector(t *testing.T) {
	for _, s := range goodCalicoSelectors {
		if err := ValidateCalicoSelector(s); err != nil {
			t.Errorf("ValidateCalicoSelector(%q) = %v, want valid", s, err)
		}
	}
	for _, s := range badCalicoSelectors {
		if err := ValidateCalicoSelector(s); err == nil {
			t.Errorf("ValidateCalicoSelector(%q) = nil, want an error", s)
		}
	}
}

// A valid selector stays valid when grouped, negated or combined, as in Calico's grammar.
func FuzzValidateCalicoSelector(f *testing.F) {
	for _, s := range append(goodCalicoSelectors, badCalicoSelectors...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateCalicoSelector(s) != nil || strings.TrimLeft(s, " \t") == "" {
			return
		}
		for _, w := range []string{"(" + s + ")", "!(" + s + ")", s + " && all()", "has(x) || " + s} {
			if err := ValidateCalicoSelector(w); err != nil {
				t.Fatalf("%q is valid but %q is not: %v", s, w, err)
			}
		}
	})
}

// TestCalicoSelectorMatchesCalico: every selector of Calico's own evaluation table matches the
// label sets Calico's parser matches, and no other.
func TestCalicoSelectorMatchesCalico(t *testing.T) {
	if len(calicoSelectorTests) < 50 {
		t.Fatalf("Calico's table has %d selectors: not the copied table", len(calicoSelectorTests))
	}
	for _, c := range calicoSelectorTests {
		sel, err := ParseCalicoSelector(c.sel)
		if err != nil {
			t.Errorf("%q: %v", c.sel, err)
			continue
		}
		for _, l := range c.expMatches {
			if !sel.Matches(l) {
				t.Errorf("%q does not match %v; Calico's does", c.sel, l)
			}
		}
		for _, l := range c.expNonMatches {
			if sel.Matches(l) {
				t.Errorf("%q matches %v; Calico's does not", c.sel, l)
			}
		}
	}
}
