// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// docExampleStubs declare, for an example that refers to what another example or the guide
// declares, the smallest block of that address, in a fresh cluster's terms. A reference no
// example and no stub declares fails the test: every example must plan.
var docExampleStubs = map[string]string{
	"data.k8scidr_service_moves.this":     "data \"k8scidr_service_moves\" \"this\" {\n  target_cidrs = [\"172.24.0.0/15\"]\n}\n",
	"data.k8scidr_cluster_info.this":      "data \"k8scidr_cluster_info\" \"this\" {}\n",
	"data.k8scidr_service_moves.services": "data \"k8scidr_service_moves\" \"services\" {\n  target_cidrs = [\"172.24.0.0/15\"]\n}\n",
	"data.k8scidr_workload_restarts.pods": "data \"k8scidr_workload_restarts\" \"pods\" {\n  pod_cidrs = [\"100.96.0.0/11\"]\n}\n",
	"k8scidr_service_cidr.new":            "resource \"k8scidr_service_cidr\" \"new\" {\n  name  = \"services-172-24\"\n  cidrs = [\"172.24.0.0/15\"]\n}\n",
	"k8scidr_service_cidr.keep": "resource \"k8scidr_service_cidr\" \"keep\" {\n  for_each = toset(data.k8scidr_service_moves.this.keep_cidrs)\n" +
		"  name     = \"keep-${replace(each.value, \"/\", \"-\")}\"\n  cidrs    = [each.value]\n}\n",
	"k8scidr_calico_ippool.new": "resource \"k8scidr_calico_ippool\" \"new\" {\n  name         = \"pods-172-16\"\n  cidr         = \"172.16.0.0/13\"\n" +
		"  ipip_mode    = \"Always\"\n  nat_outgoing = true\n}\n",
	"k8scidr_calico_ippool.old": "import {\n  to = k8scidr_calico_ippool.old\n  id = \"default-ipv4-ippool\"\n}\n\n" +
		"resource \"k8scidr_calico_ippool\" \"old\" {\n  name       = \"default-ipv4-ippool\"\n  cidr       = \"100.96.0.0/11\"\n" +
		"  disabled   = true\n  depends_on = [k8scidr_calico_ippool.new]\n}\n",
}

// docImportsPlanned are the import examples of objects a fresh kOps cluster has (its default
// Calico pool and ServiceCIDR); they plan with their resource's example. The others import
// what this provider wrote (a policy, a recreation), which a fresh cluster does not hold.
var docImportsPlanned = map[string]bool{"k8scidr_calico_ippool": true, "k8scidr_service_cidr": true}

var (
	declaredRE   = regexp.MustCompile(`(?m)^\s*(resource|data)\s+"(k8scidr_[a-z_]+)"\s+"([A-Za-z0-9_-]+)"`)
	referenceRE  = regexp.MustCompile(`\b(data\.)?(k8scidr_[a-z_]+)\.([A-Za-z_][A-Za-z0-9_-]*)`)
	docFencedRE  = regexp.MustCompile("(?s)```terraform\n(.*?)```")
	docTestHosts = strings.NewReplacer(`"https://203.0.113.10"`, `"https://127.0.0.1:1"`) // never leave loopback
)

// docExample is one configuration a user would copy: a file of examples/, a doc page's example
// files together, or a terraform block of a hand-written doc page.
type docExample struct {
	name, hcl string
	// ownProvider: the example has its provider block, and reads ~/.kube/config.
	ownProvider bool
}

// docExamples collects every example of examples/ (examples/migration and examples/ci have
// their own tests) and every terraform block of docs/ that is not a copy of one of them.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	root := "../.."
	var out []docExample
	files := map[string]bool{} // the examples' text, to recognize the generated docs' copies
	add := func(name string, paths ...string) {
		var b strings.Builder
		for _, p := range paths {
			text, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSpace(string(text))] = true
			b.Write(text)
			b.WriteString("\n")
		}
		out = append(out, docExample{name: name, hcl: b.String(), ownProvider: strings.Contains(b.String(), `provider "k8scidr"`)})
	}
	for _, kind := range []string{"data-sources", "functions"} {
		dirs, _ := filepath.Glob(filepath.Join(root, "examples", kind, "*"))
		for _, dir := range dirs {
			tfs, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
			for _, tf := range tfs {
				rel, _ := filepath.Rel(root, tf)
				add(rel, rel)
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "examples", "resources", "*"))
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		paths := []string{filepath.Join(rel, "resource.tf")}
		if imp := filepath.Join(rel, "import-by-string-id.tf"); docImportsPlanned[filepath.Base(dir)] {
			paths = append(paths, imp)
		} else if text, err := os.ReadFile(filepath.Join(root, imp)); err == nil {
			files[strings.TrimSpace(string(text))] = true // not planned: see docImportsPlanned
		}
		add(rel, paths...)
	}
	add("examples/provider/provider.tf", "examples/provider/provider.tf")
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	more, _ := filepath.Glob(filepath.Join(root, "docs", "*", "*.md"))
	for _, page := range append(pages, more...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, m := range docFencedRE.FindAllStringSubmatch(string(text), -1) {
			if files[strings.TrimSpace(m[1])] {
				continue
			}
			out = append(out, docExample{name: rel + "#" + string(rune('1'+i)), hcl: m[1], ownProvider: strings.Contains(m[1], `provider "k8scidr"`)})
		}
	}
	return out
}

// withStubs adds, for each k8scidr address hcl refers to but does not declare, its stub, and
// the stubs those need; it names the references nothing declares.
func withStubs(hcl string) (string, []string) {
	declared := map[string]bool{}
	var missing []string
	for {
		for _, m := range declaredRE.FindAllStringSubmatch(hcl, -1) {
			addr := m[2] + "." + m[3]
			if m[1] == "data" {
				addr = "data." + addr
			}
			declared[addr] = true
		}
		added := false
		for _, m := range referenceRE.FindAllStringSubmatch(hcl, -1) {
			addr := m[1] + m[2] + "." + m[3]
			if declared[addr] || slices.Contains(missing, addr) {
				continue
			}
			stub, ok := docExampleStubs[addr]
			if !ok {
				missing = append(missing, addr)
				continue
			}
			hcl += "\n" + stub
			declared[addr], added = true, true
		}
		if !added {
			return hcl, missing
		}
	}
}

// TestAccDocExamples plans every example of examples/ and docs/ on the fresh kOps cluster of
// the write-ups, as a user who copies one does: each must plan without an error.
func TestAccDocExamples(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	e, _, _ := migrationFixture(t)
	examples := docExamples(t)
	if len(examples) < 20 {
		t.Fatalf("found %d examples: the walk of examples/ and docs/ is broken", len(examples))
	}
	// ~/.kube/config with a context "production": the provider example's own settings.
	home := t.TempDir()
	cfg, err := clientcmd.LoadFromFile(e.c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts["production"] = cfg.Contexts[cfg.CurrentContext]
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	var ca []byte
	for _, c := range cfg.Clusters {
		ca = c.CertificateAuthorityData
	}
	for _, ex := range examples {
		hcl, missing := withStubs(docTestHosts.Replace(ex.hcl))
		if len(missing) > 0 {
			t.Errorf("%s refers to %v, which neither it nor a stub declares", ex.name, missing)
			continue
		}
		var w *cliWorkspace
		if ex.ownProvider {
			// It configures the provider itself; a data source makes the plan reach the cluster.
			w = newCLIWorkspace(t, hcl+"\ndata \"k8scidr_cluster_info\" \"reached\" {}\n")
			w.env = append(w.env, "HOME="+home)
			if err := os.WriteFile(filepath.Join(w.dir, "ca.pem"), ca, 0o600); err != nil {
				t.Fatal(err)
			}
		} else {
			w = newCLIWorkspace(t, providerBlock(e.c.Kubeconfig)+hcl)
		}
		if out, err := w.run("plan"); err != nil || strings.Contains(out, "Error:") {
			t.Errorf("%s does not plan on a fresh cluster (%v):\n%s\n--- configuration:\n%s", ex.name, err, out, hcl)
		} else {
			t.Logf("%s plans", ex.name)
		}
	}
}
