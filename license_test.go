// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/licensecheck"
)

// spdxHeader opens every Go file of the repository, as the HashiCorp providers' files open with
// theirs: the licence of a file copied out of it stays known.
const spdxHeader = "// Copyright (c) The terraform-provider-k8scidr authors\n// SPDX-License-Identifier: MPL-2.0\n"

// TestLicense: LICENSE is the Mozilla Public License 2.0, whole, as a licence scanner reads it,
// and every Go file carries the SPDX header naming it.
func TestLicense(t *testing.T) {
	text, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatalf("no licence at the repository's root: %v", err)
	}
	cov := licensecheck.Scan(text)
	if len(cov.Match) != 1 || cov.Match[0].ID != "MPL-2.0" || cov.Percent < 99 {
		t.Errorf("LICENSE reads as %+v (%.1f%% covered), want MPL-2.0 whole", cov.Match, cov.Percent)
	}
	var missing []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (path == "bin" || strings.HasPrefix(d.Name(), ".")) && path != ".":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go"):
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		var head strings.Builder
		s := bufio.NewScanner(f)
		for i := 0; i < 2 && s.Scan(); i++ {
			head.WriteString(s.Text() + "\n")
		}
		if head.String() != spdxHeader {
			missing = append(missing, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("Go files without the licence header %q: %v", spdxHeader, missing)
	}
}
