// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rule of internal/k8sops (README's "Layout"): the shared core imports no stage,
// a stage imports the core only, preflight (which reads across stages) the core and the
// stages, and nothing here reaches Terraform. Only non-test imports count: a stage's test may
// set up what another stage makes.
const module = "github.com/k8scidr/terraform-provider-k8scidr"

var stagePackages = []string{"calico", "recreation", "servicecidr", "workloadroll"}

// allowedImports are the packages of this module each package under internal/k8sops may import.
func allowedImports(pkg string) []string {
	core := module + "/internal/k8sops"
	switch rel := strings.TrimPrefix(strings.TrimPrefix(pkg, core), "/"); {
	case rel == "":
		return nil
	case rel == "preflight":
		allowed := []string{core}
		for _, s := range stagePackages {
			allowed = append(allowed, core+"/"+s)
		}
		return allowed
	case slices.Contains(stagePackages, rel):
		return []string{core}
	default:
		return nil // a new package: say where it belongs by adding it above
	}
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestPackageLayout(t *testing.T) {
	pkgs := listPackages(t, "./...")
	if len(pkgs) < 1+len(stagePackages)+1 {
		t.Fatalf("go list found %d packages under internal/k8sops, want the core, %d stages and preflight", len(pkgs), len(stagePackages))
	}
	for _, p := range pkgs {
		for _, problem := range layoutProblems(p) {
			t.Error(problem)
		}
	}
}

// TestLayoutProblems: the rule itself, on imports no package has (the one that would be a
// cross-stage shortcut).
func TestLayoutProblems(t *testing.T) {
	core := module + "/internal/k8sops"
	for _, tc := range []struct {
		pkg     listedPackage
		problem bool
	}{
		{listedPackage{ImportPath: core + "/calico", Imports: []string{core, "k8s.io/client-go/dynamic"}}, false},
		{listedPackage{ImportPath: core + "/calico", Imports: []string{core, core + "/servicecidr"}}, true},
		{listedPackage{ImportPath: core, Imports: []string{core + "/recreation"}}, true},
		{listedPackage{ImportPath: core + "/preflight", Imports: []string{core + "/recreation", core + "/calico"}}, false},
		{listedPackage{ImportPath: core + "/recreation", Deps: []string{"github.com/hashicorp/terraform-exec/tfexec"}}, true},
		{listedPackage{ImportPath: core + "/somethingnew", Imports: []string{core}}, true},
	} {
		if got := len(layoutProblems(tc.pkg)) > 0; got != tc.problem {
			t.Errorf("%s importing %v: problem %v, want %v", tc.pkg.ImportPath, tc.pkg.Imports, got, tc.problem)
		}
	}
}

func layoutProblems(p listedPackage) []string {
	var out []string
	allowed := allowedImports(p.ImportPath)
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, module+"/") && !slices.Contains(allowed, imp) {
			out = append(out, p.ImportPath+" imports "+imp+": the core imports no stage, a stage only the core, preflight the core and the stages")
		}
	}
	for _, dep := range p.Deps {
		if strings.HasPrefix(dep, "github.com/hashicorp/terraform-") {
			out = append(out, p.ImportPath+" depends on "+dep+": internal/k8sops never imports Terraform packages")
			break
		}
	}
	return out
}

func listPackages(t *testing.T, pattern string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Imports,Deps", pattern)
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Fatalf("go list %s: %v\n%s", pattern, err, exitErr.Stderr)
	} else if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
