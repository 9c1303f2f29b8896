// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
