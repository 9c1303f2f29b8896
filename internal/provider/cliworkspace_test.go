// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// cliWorkspace runs the BUILT provider under a real terraform CLI (dev override), as a user
// does: killing terraform then kills a separate provider process, which the in-process test
// server would survive.
type cliWorkspace struct {
	t   *testing.T
	dir string
	env []string
}

func newCLIWorkspace(t *testing.T, config string) *cliWorkspace {
	t.Helper()
	dir := t.TempDir()
	binDir, err := providerBinary()
	if err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(dir, "terraformrc")
	rcText := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"k8scidr/k8scidr\" = %q\n  }\n  direct {}\n}\n", binDir)
	if err := os.WriteFile(rc, []byte(rcText), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &cliWorkspace{t: t, dir: filepath.Join(dir, "config"),
		env: append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1")}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.write(config)
	return w
}

func (w *cliWorkspace) write(config string) {
	w.t.Helper()
	full := "terraform {\n  required_providers {\n    k8scidr = { source = \"k8scidr/k8scidr\" }\n  }\n}\n" + config
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(full), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// terraformPath is the CLI under test: TF_ACC_TERRAFORM_PATH, else make testbin's terraform.
func terraformPath() string {
	if tf := os.Getenv("TF_ACC_TERRAFORM_PATH"); tf != "" {
		return tf
	}
	return filepath.Join(testcluster.DefaultBinDir(), "terraform")
}

func (w *cliWorkspace) command(extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.Command(terraformPath(), append([]string{"-chdir=" + w.dir}, args...)...)
	cmd.Env = append(slices.Clone(w.env), extraEnv...)
	// Its own process group, so terraform and the provider it starts die together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs terraform to completion and returns its combined output.
func (w *cliWorkspace) run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := w.command(nil, append(args, "-no-color")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// must runs terraform to completion and returns its combined output; a failure fails the test.
func (w *cliWorkspace) must(args ...string) string {
	w.t.Helper()
	out, err := w.run(args...)
	if err != nil {
		w.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// start runs terraform with args in the background, with extraEnv; its combined output
// collects in the buffer returned, to read once the command has ended.
func (w *cliWorkspace) start(extraEnv []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	w.t.Helper()
	var out bytes.Buffer
	cmd := w.command(extraEnv, append(args, "-no-color")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	return cmd, &out
}

// Stage resources plan from data sources and empty their inputs on refresh (the converged
// value), so right after an apply a plan without refresh shows a harmless update:
// terraform-plugin-testing's step flow fails on that by design. Tests that apply them run the
// CLI as a user does instead: plan to a file, apply that file, then a refreshing plan that must
// be empty.

// planFile plans into tfplan (refreshing, unless args say otherwise) and returns terraform's
// output; a failed plan fails the test.
func (w *cliWorkspace) planFile(args ...string) string {
	w.t.Helper()
	out, err := w.run(append([]string{"plan", "-out=tfplan"}, args...)...)
	if err != nil {
		w.t.Fatalf("terraform plan: %v\n%s", err, out)
	}
	return out
}

// applyFile applies the saved plan tfplan; a failed apply fails the test.
func (w *cliWorkspace) applyFile() string {
	w.t.Helper()
	out, err := w.run("apply", "tfplan")
	if err != nil {
		w.t.Fatalf("terraform apply tfplan: %v\n%s", err, out)
	}
	return out
}

// converged fails the test unless a refreshing plan (with args) is empty.
func (w *cliWorkspace) converged(args ...string) {
	w.t.Helper()
	if out, err := w.run(append([]string{"plan", "-detailed-exitcode"}, args...)...); err != nil {
		w.t.Fatalf("the plan after the apply is not empty (%v):\n%s", err, out)
	}
}

// showRaw is the output of `terraform show -json [file]`.
func (w *cliWorkspace) showRaw(file ...string) []byte {
	w.t.Helper()
	cmd := w.command(nil, append([]string{"show", "-json"}, file...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		w.t.Fatalf("terraform show -json: %v\n%s", err, stderr.String())
	}
	return stdout.Bytes()
}

// showJSON is `terraform show -json [file]`, decoded with numbers kept as json.Number, the way
// knownvalue checks expect them.
func (w *cliWorkspace) showJSON(file ...string) map[string]any {
	w.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(w.showRaw(file...)))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		w.t.Fatalf("terraform show -json: %v", err)
	}
	return v
}

// planned is an attribute's planned value in tfplan (nil when unknown or absent); attr may
// name a nested attribute with dots (plan.moves).
func (w *cliWorkspace) planned(addr, attr string) any {
	w.t.Helper()
	return dig(changeAfter(w.t, w.showJSON("tfplan"), addr), strings.Split(attr, ".")...)
}

// readAtPlan is an attribute of a data source as the plan in tfplan read it; attr may name a
// nested attribute with dots.
func (w *cliWorkspace) readAtPlan(addr, attr string) any {
	w.t.Helper()
	for _, r := range list(dig(w.showJSON("tfplan"), "prior_state", "values", "root_module", "resources")) {
		m, _ := r.(map[string]any)
		if m["address"] == addr {
			return dig(m["values"], strings.Split(attr, ".")...)
		}
	}
	w.t.Fatalf("%s was not read at plan", addr)
	return nil
}

// plannedUnknown reports whether an attribute (plan.moves: nested) is unknown in tfplan, by
// itself or as part of an unknown object.
func (w *cliWorkspace) plannedUnknown(addr, attr string) bool {
	w.t.Helper()
	for _, rc := range list(w.showJSON("tfplan")["resource_changes"]) {
		m, _ := rc.(map[string]any)
		if m["address"] == addr {
			v := dig(m, "change", "after_unknown")
			for _, k := range strings.Split(attr, ".") {
				if v == true {
					return true
				}
				v = dig(v, k)
			}
			return v == true
		}
	}
	w.t.Fatalf("%s is not in the plan", addr)
	return false
}

// stateValue is an attribute of a resource or data source in the state; attr may name a
// nested attribute with dots (plan.moves).
func (w *cliWorkspace) stateValue(addr, attr string) any {
	w.t.Helper()
	for _, r := range list(dig(w.showJSON(), "values", "root_module", "resources")) {
		m, _ := r.(map[string]any)
		if m["address"] == addr {
			return dig(m["values"], strings.Split(attr, ".")...)
		}
	}
	w.t.Fatalf("%s is not in the state", addr)
	return nil
}

// expect fails the test unless v passes check.
func expect(t *testing.T, what string, v any, check knownvalue.Check) {
	t.Helper()
	if err := check.CheckValue(v); err != nil {
		t.Errorf("%s: %v (value %v)", what, err, v)
	}
}

func changeAfter(t *testing.T, plan map[string]any, addr string) map[string]any {
	t.Helper()
	for _, rc := range list(plan["resource_changes"]) {
		m, _ := rc.(map[string]any)
		if m["address"] == addr {
			after, _ := dig(m, "change", "after").(map[string]any)
			return after
		}
	}
	t.Fatalf("%s is not in the plan", addr)
	return nil
}

// plannedActions is the actions the plan in tfplan takes on addr, e.g. [update].
func (w *cliWorkspace) plannedActions(addr string) []string {
	w.t.Helper()
	for _, rc := range list(w.showJSON("tfplan")["resource_changes"]) {
		m, _ := rc.(map[string]any)
		if m["address"] == addr {
			var out []string
			for _, a := range list(dig(m, "change", "actions")) {
				out = append(out, fmt.Sprint(a))
			}
			return out
		}
	}
	return nil
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// providerBinary is the provider built once for every CLI workspace of the test run, with the
// fault-injection hook the crash, kill and fault suites drive (fault_hook.go); it returns the
// binary's directory.
var providerBinary = sync.OnceValues(func() (string, error) {
	bin, err := buildBinary("terraform-provider-k8scidr", "../..", "-tags", "k8scidr_faults")
	return filepath.Dir(bin), err
})

// buildBinary builds the package pkg into a temporary directory as name and returns its path.
func buildBinary(name, pkg string, flags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "k8scidr-"+name+"-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// cliWarnings are the summaries of the warnings in terraform's output, but the one the test's
// dev override causes on every command.
func cliWarnings(out string) []string {
	var summaries []string
	for _, m := range regexp.MustCompile(`(?m)^Warning: (.+)$`).FindAllStringSubmatch(out, -1) {
		if !strings.Contains(m[1], "development overrides") {
			summaries = append(summaries, m[1])
		}
	}
	return summaries
}

// faultGate is a barrier at a point of every move of the provider's applies (AFTER_DELETE,
// BEFORE_DELETE; see fault_hook.go): env holds each move there, open lets them all go on. The
// test opens it once it has made its change, so the change lands inside the window by
// construction, not by timing.
func faultGate(t *testing.T, point string) (env string, open func()) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "gate-"+point)
	return "K8SCIDR_FAULT_GATE_" + point + "=" + file, func() {
		t.Helper()
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// gateReached says whether a move is held at the fault gate env (of faultGate).
func gateReached(env string) bool {
	_, file, _ := strings.Cut(env, "=")
	_, err := os.Stat(file + ".reached")
	return err == nil
}

// assertGone fails the test unless err, a Get's, says the object does not exist: another error
// (a timeout, a refusal) is no proof that it was deleted.
func assertGone(t *testing.T, err error, what string) {
	t.Helper()
	if err := goneErr(err, what); err != nil {
		t.Error(err)
	}
}

func goneErr(err error, what string) error {
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: still there or not readable (%v); want it deleted", what, err)
	}
	return nil
}

// planDiagnostic is a diagnostic of terraform plan -json.
type planDiagnostic struct {
	Severity, Summary, Detail, Address string
}

// planDiagnostics runs terraform plan -json and returns its diagnostics; a failed plan fails
// the test. The human-readable output folds warnings of one summary into "and one more similar
// warning elsewhere", so it cannot tell which resources warned.
func (w *cliWorkspace) planDiagnostics() []planDiagnostic {
	w.t.Helper()
	out, err := w.run("plan", "-json", "-input=false")
	if err != nil {
		w.t.Fatalf("plan: %v\n%s", err, out)
	}
	var diags []planDiagnostic
	for _, line := range strings.Split(out, "\n") {
		var msg struct {
			Type       string         `json:"type"`
			Diagnostic planDiagnostic `json:"diagnostic"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Type == "diagnostic" {
			diags = append(diags, msg.Diagnostic)
		}
	}
	return diags
}

// warnedAt is the addresses of the plan's warnings titled summary.
func (w *cliWorkspace) warnedAt(summary string) []string {
	w.t.Helper()
	var at []string
	for _, d := range w.planDiagnostics() {
		if d.Severity == "warning" && d.Summary == summary {
			at = append(at, d.Address)
		}
	}
	return at
}

// TestGoneErr: only NotFound proves a deletion; a Get that found the object, or could not read
// it, does not.
func TestGoneErr(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	for _, c := range []struct {
		err  error
		gone bool
	}{
		{apierrors.NewNotFound(gr, "kube-dns-legacy"), true},
		{nil, false}, // the Get found it
		{apierrors.NewForbidden(gr, "kube-dns-legacy", errors.New("no get")), false},
		{apierrors.NewTimeoutError("etcd", 1), false},
	} {
		if got := goneErr(c.err, "the bridge") == nil; got != c.gone {
			t.Errorf("goneErr(%v) says gone = %t, want %t", c.err, got, c.gone)
		}
	}
}
