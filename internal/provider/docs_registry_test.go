// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// registryDocLeaks are what a page rendered by the Terraform Registry must not say: the reader
// there has no clone, so a relative path of this repository, a make target, a test's name or a
// write-up's number in the project's notes leads nowhere. Links (absolute URLs) may name any
// path of the repository.
var registryDocLeaks = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile("`make [a-z]|\\bmake (test|demo|bench|install|lint|rehearse)"), "a make target"},
	{regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9]*(_[A-Za-z0-9]*)?\b`), "a test's name"},
	{regexp.MustCompile("(^|[\\s(`'\"])(examples|internal|tools|templates|docs)/"), "a path in the repository"},
	{regexp.MustCompile(`(?i)\bin the repository\b|\bREADME\b|\bDESIGN\.md\b`), "a file of the repository"},
	{regexp.MustCompile(`(?i)\bwrite-up [0-9]+\b`), "a write-up by its number"},
}

var docURLRE = regexp.MustCompile(`https?://[^\s)>\]]+`)

func TestDocs_noRepositoryReferences(t *testing.T) {
	root := "../../docs"
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(text), "\n") {
			line = docURLRE.ReplaceAllString(line, "<url>")
			for _, leak := range registryDocLeaks {
				if m := leak.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %s (%q): the Registry's reader has no clone; name it in words or link it by URL (edit templates/ or the schema's description, then go generate)",
						path, i+1, leak.what, strings.TrimSpace(m))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// changelogSections are the sections of a release in the HashiCorp providers' CHANGELOG.md.
var changelogSections = map[string]bool{"BREAKING CHANGES:": true, "NOTES:": true, "FEATURES:": true,
	"ENHANCEMENTS:": true, "BUG FIXES:": true}

// TestChangelog_format: releases as `## X.Y.Z (date or Unreleased)`, each with the HashiCorp
// sections, and every entry one short bullet (the Registry and release notes show them whole);
// like docs/, no path, make target or test name of the repository.
func TestChangelog_format(t *testing.T) {
	text, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	release := regexp.MustCompile(`^## [0-9]+\.[0-9]+\.[0-9]+ \((Unreleased|[A-Z][a-z]+ [0-9]{1,2}, [0-9]{4})\)$`)
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	if !release.MatchString(lines[0]) {
		t.Errorf("CHANGELOG.md:1: %q is not a release heading (## 0.1.0 (Unreleased))", lines[0])
	}
	section, bullets := "", 0
	for i, line := range lines {
		at := i + 1
		switch {
		case line == "":
		case strings.HasPrefix(line, "## "):
			if !release.MatchString(line) {
				t.Errorf("CHANGELOG.md:%d: %q is not a release heading", at, line)
			}
			section = ""
		case changelogSections[line]:
			section = line
		case strings.HasPrefix(line, "* "):
			bullets++
			if section == "" {
				t.Errorf("CHANGELOG.md:%d: an entry outside a section", at)
			}
			if len(line) > 240 {
				t.Errorf("CHANGELOG.md:%d: an entry of %d characters: one short sentence (at most 240), the details in the docs", at, len(line))
			}
			stripped := docURLRE.ReplaceAllString(line, "<url>")
			for _, leak := range registryDocLeaks {
				if m := leak.re.FindString(stripped); m != "" {
					t.Errorf("CHANGELOG.md:%d: %s (%q)", at, leak.what, strings.TrimSpace(m))
				}
			}
		default:
			t.Errorf("CHANGELOG.md:%d: %q is neither a release, a section (%v) nor a `* ` entry", at, line, slices.Sorted(maps.Keys(changelogSections)))
		}
	}
	if bullets == 0 {
		t.Error("CHANGELOG.md has no entry")
	}
}
