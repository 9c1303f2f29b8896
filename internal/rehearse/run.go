// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/plansummary"
)

// Target is the cluster a rehearsal applies the configuration to: the twin, or (to hold a
// rehearsal against the real thing, as the tests do) the original.
type Target struct {
	Host      string
	CACert    []byte
	Token     string
	ClusterID string // kube-system's UID: the provider refuses any other cluster
	Kube      kubernetes.Interface
	// ServiceCIDRs are kube-apiserver's --service-cluster-ip-range now.
	ServiceCIDRs []string
	// RestartAPIServer restarts kube-apiserver on new ranges, as the guide's step between the
	// Service stages does (kOps' serviceClusterIPRange and a control-plane roll).
	RestartAPIServer func(ctx context.Context, serviceCIDRs []string) error
}

// RunOptions say what to rehearse and how.
type RunOptions struct {
	// Config is the root module's directory: its .tf files, variable files and lock file are
	// linked into the workspace, beside an override that points the provider at the target and
	// the state at a local file.
	Config string
	// Work is the workspace directory (made; kept for inspection).
	Work      string
	Terraform string
	// StageVar is the configuration's stage variable; Stages its values, applied in order.
	// No stages: one plan and apply.
	StageVar string
	Stages   []string
	// VarFiles are passed to every plan as -var-file.
	VarFiles []string
	// RestartBefore is the stage before which kube-apiserver restarts on the new Service range;
	// the range is APIServerRanges, else the configuration's output kops_steps' service_range.
	RestartBefore   string
	APIServerRanges []string
	// RollNodesBefore is the stage before which the nodes roll, as the guide's step after the
	// DNS move does (rollNodes): kubeadm's kubelet-config names the DNS Service's new IP, or
	// (kOps) the nodes are replaced and register anew; the kubelets restart their static pods,
	// which no controller restarts, so the rehearsal makes their mirror pods again. "": never.
	RollNodesBefore string
	// Env is added to terraform's environment (TF_CLI_CONFIG_FILE, TF_VAR_…); the KUBE_*
	// variables are removed from it, so that nothing reaches another cluster.
	Env []string
	// Log receives terraform's output.
	Log io.Writer
}

// Stage is one stage's outcome.
type Stage struct {
	Name string
	// Before is what happened before the stage outside Terraform.
	Before string
	// Summary is the saved plan's pull-request summary.
	Summary   string
	PlanError string
	// Moves are the Services the plan moves, "namespace/name" to new IPs; Skipped the Services
	// it leaves, with the reason; Restarts the workloads it restarts, with their pods.
	Moves    map[string][]string
	Skipped  map[string]string
	Restarts map[string]int64
	// Change is the apply's change summary; Diagnostics its warnings and errors: what was
	// refused or not done, and why.
	Change      string
	Diagnostics []plansummary.Diagnostic
	ApplyError  string
	// Differences are planned moves whose Service does not have the planned IPs after the apply.
	Differences         []string
	PlanTime, ApplyTime time.Duration
	PlanDiagnostics     []plansummary.Diagnostic
}

// Failed says whether the stage failed.
func (s Stage) Failed() bool { return s.PlanError != "" || s.ApplyError != "" }

// Report is a rehearsal's outcome.
type Report struct {
	Stages []Stage
	// Journal lists the recreation journal's entries left at the end, "namespace/name".
	Journal []string
}

// Failed: a stage failed, or the journal still holds Services (a move not finished).
func (r *Report) Failed() bool {
	return len(r.Journal) > 0 || slices.ContainsFunc(r.Stages, Stage.Failed)
}

// Rehearse applies the configuration to t stage by stage as the pipeline would (plan to a
// file, then apply that saved plan), with kube-apiserver restarted on the new range where the
// guide restarts it. It stops at the first stage that fails. The error is for the rehearsal's
// own failures; the configuration's are in the report.
func Rehearse(ctx context.Context, t Target, o RunOptions) (*Report, error) {
	w, err := newWorkspace(t, o)
	if err != nil {
		return nil, err
	}
	if err := w.run(ctx, nil, "init", "-input=false", "-no-color"); err != nil {
		return nil, fmt.Errorf("terraform init: %w", err)
	}
	stages := o.Stages
	if len(stages) == 0 {
		stages = []string{""}
	}
	r := &Report{}
	for _, st := range stages {
		s := Stage{Name: "apply"}
		var args []string
		if st != "" {
			s.Name = "stage " + st
			args = append(args, fmt.Sprintf("-var=%s=%s", o.StageVar, st))
		}
		for _, f := range o.VarFiles {
			args = append(args, "-var-file="+f)
		}
		if st != "" && st == o.RestartBefore && t.RestartAPIServer != nil {
			ranges, err := w.newServiceRanges(ctx, o.APIServerRanges, t.ServiceCIDRs)
			if err != nil {
				return r, err
			}
			if err := t.RestartAPIServer(ctx, ranges); err != nil {
				return r, fmt.Errorf("restarting kube-apiserver on %s: %w", strings.Join(ranges, ","), err)
			}
			t.ServiceCIDRs = ranges
			did, err := flagAPIServerPods(ctx, t.Kube, ranges)
			if err != nil {
				return r, fmt.Errorf("kube-apiserver's mirror pods on %s: %w", strings.Join(ranges, ","), err)
			}
			s.Before = join(s.Before, "kube-apiserver restarted with --service-cluster-ip-range="+strings.Join(ranges, ","))
			if did != "" {
				s.Before += ", " + did
			}
		}
		if st != "" && st == o.RollNodesBefore {
			did, err := rollNodes(ctx, t.Kube)
			if err != nil {
				return r, fmt.Errorf("the nodes' roll: %w", err)
			}
			s.Before = join(s.Before, did)
		}
		w.stage(ctx, &s, t.Kube, args)
		r.Stages = append(r.Stages, s)
		if s.Failed() {
			break
		}
	}
	r.Journal, err = journal(ctx, t.Kube)
	return r, err
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// workspace is the configuration linked into a directory with the rehearsal's override.
type workspace struct {
	dir, terraform string
	env            []string
	log            io.Writer
}

// overrideFile points the provider at the target whatever the configuration says: the override
// replaces each connection attribute and the exec block (with one printing the target's token),
// and pins cluster_id to the target's, so that the provider refuses any other cluster. The
// state goes to a local file: the configuration's backend (production's state) is not read.
const overrideFile = "k8scidr_rehearse_override.tf"

func newWorkspace(t Target, o RunOptions) (*workspace, error) {
	if err := CheckConfig(o.Config); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Work, 0o700); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(o.Config)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		keep := strings.HasSuffix(n, ".tf") || strings.HasSuffix(n, ".tf.json") || strings.HasSuffix(n, ".tfvars") || n == ".terraform.lock.hcl"
		if e.IsDir() || !keep {
			continue
		}
		src, err := filepath.Abs(filepath.Join(o.Config, n))
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(o.Work, n)
		_ = os.Remove(dst)
		if err := os.Symlink(src, dst); err != nil {
			return nil, err
		}
	}
	cred, err := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]any{"token": t.Token}})
	if err != nil {
		return nil, err
	}
	credFile := filepath.Join(o.Work, "credential.json")
	if err := os.WriteFile(credFile, cred, 0o600); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# Written by k8scidr-rehearse: the rehearsal's target and a local state, whatever the configuration says.\n")
	fmt.Fprintf(&b, "terraform {\n  backend \"local\" {\n    path = %q\n  }\n}\n\n", filepath.Join(o.Work, "rehearsal.tfstate"))
	b.WriteString("provider \"k8scidr\" {\n")
	for _, a := range []string{"config_path", "config_paths", "config_context", "config_context_auth_info", "config_context_cluster",
		"username", "password", "token", "client_certificate", "client_key", "insecure", "tls_server_name", "proxy_url"} {
		fmt.Fprintf(&b, "  %s = null\n", a)
	}
	fmt.Fprintf(&b, "  host = %q\n  cluster_ca_certificate = %q\n  cluster_id = %q\n", t.Host, string(t.CACert), t.ClusterID)
	fmt.Fprintf(&b, "  exec {\n    api_version = \"client.authentication.k8s.io/v1\"\n    command = \"cat\"\n    args = [%q]\n  }\n}\n", credFile)
	if err := os.WriteFile(filepath.Join(o.Work, overrideFile), []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KUBE_") || strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "K8SCIDR_CLUSTER_ID=") ||
			strings.HasPrefix(kv, "TF_DATA_DIR=") || strings.HasPrefix(kv, "TF_WORKSPACE=")
	})
	env = append(env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	env = append(env, o.Env...)
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	return &workspace{dir: o.Work, terraform: o.Terraform, env: env, log: log}, nil
}

// run runs terraform in the workspace; its output goes to the log, and with capture stdout
// goes there instead. A failure's error ends with the output's last lines.
func (w *workspace) run(ctx context.Context, capture *bytes.Buffer, args ...string) error {
	if _, err := fmt.Fprintf(w.log, "\n$ terraform %s\n", strings.Join(args, " ")); err != nil {
		return err
	}
	var text bytes.Buffer
	cmd := exec.CommandContext(ctx, w.terraform, append([]string{"-chdir=" + w.dir}, args...)...)
	// Cancelled (Ctrl-C), terraform is interrupted as at a terminal: it stops the provider
	// gracefully and saves the state.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	cmd.Env, cmd.Stdout, cmd.Stderr = w.env, io.MultiWriter(w.log, &text), io.MultiWriter(w.log, &text)
	if capture != nil {
		cmd.Stdout = capture
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("terraform %s: %w\n%s", args[0], err, lastLines(text.String(), 20))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stage plans to a file, summarizes the saved plan, applies it, and compares the result with
// the plan.
func (w *workspace) stage(ctx context.Context, s *Stage, kube kubernetes.Interface, args []string) {
	start := time.Now()
	var jsonLog bytes.Buffer
	err := w.run(ctx, &jsonLog, append([]string{"plan", "-input=false", "-json", "-out=stage.tfplan"}, args...)...)
	s.PlanTime = time.Since(start)
	s.PlanDiagnostics, _ = plansummary.ReadLog(bytes.NewReader(jsonLog.Bytes()))
	var plan *tfjson.Plan
	if err == nil {
		var planJSON bytes.Buffer
		if err = w.run(ctx, &planJSON, "show", "-json", "stage.tfplan"); err == nil {
			plan, err = plansummary.ReadPlan(&planJSON)
		}
	}
	s.Summary = plansummary.Summarize(plan, s.PlanDiagnostics, plansummary.Options{Title: "Plan of " + s.Name, Entries: 20, Limit: 20000})
	if err != nil {
		s.PlanError = errorText(err, s.PlanDiagnostics)
		return
	}
	s.Moves = plannedMoves(plan)
	s.Skipped, s.Restarts = planData(plan)
	start = time.Now()
	jsonLog.Reset()
	err = w.run(ctx, &jsonLog, "apply", "-input=false", "-json", "stage.tfplan")
	s.ApplyTime = time.Since(start)
	s.Diagnostics, _ = plansummary.ReadLog(bytes.NewReader(jsonLog.Bytes()))
	s.Change = plansummary.ChangeSummary(jsonLog.Bytes())
	if err != nil {
		s.ApplyError = errorText(err, s.Diagnostics)
	}
	s.Differences = differences(ctx, kube, s.Moves)
}

// errorText is the first error diagnostic's summary, else the command's failure.
func errorText(err error, diags []plansummary.Diagnostic) string {
	for _, d := range diags {
		if d.Severity == "error" {
			return d.Summary
		}
	}
	return strings.SplitN(err.Error(), "\n", 2)[0]
}

// plannedMoves are the moves of every k8scidr_service_recreation in the plan.
func plannedMoves(plan *tfjson.Plan) map[string][]string {
	out := map[string][]string{}
	for _, rc := range plan.ResourceChanges {
		if rc.Type != "k8scidr_service_recreation" || rc.Change == nil {
			continue
		}
		after, _ := rc.Change.After.(map[string]any)
		p, _ := after["plan"].(map[string]any)
		moves, _ := p["moves"].(map[string]any)
		for k, v := range moves {
			text, _ := v.(string)
			if m, err := movetext.Parse(text); err == nil {
				out[k] = m.NewIPs
			}
		}
	}
	return out
}

// planData reads what the plan's data sources found: the Services k8scidr_service_moves leaves
// alone, and the pods of each workload k8scidr_workload_restarts restarts.
func planData(plan *tfjson.Plan) (map[string]string, map[string]int64) {
	skipped, restarts := map[string]string{}, map[string]int64{}
	if plan.PriorState == nil || plan.PriorState.Values == nil {
		return skipped, restarts
	}
	var walk func(m *tfjson.StateModule)
	walk = func(m *tfjson.StateModule) {
		for _, r := range m.Resources {
			if r.Mode != tfjson.DataResourceMode {
				continue
			}
			switch r.Type {
			case "k8scidr_service_moves":
				m, _ := r.AttributeValues["skipped"].(map[string]any)
				for k, v := range m {
					skipped[k], _ = v.(string)
				}
			case "k8scidr_workload_restarts":
				m, _ := r.AttributeValues["pods"].(map[string]any)
				for k, v := range m {
					switch n := v.(type) {
					case float64:
						restarts[k] = int64(n)
					case json.Number:
						restarts[k], _ = n.Int64()
					}
				}
			}
		}
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	walk(plan.PriorState.Values.RootModule)
	return skipped, restarts
}

// differences are the planned moves whose Service, after the apply, does not hold the planned IPs.
func differences(ctx context.Context, kube kubernetes.Interface, moves map[string][]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(moves)) {
		ns, name, _ := strings.Cut(k, "/")
		s, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: planned %s, now %v", k, strings.Join(moves[k], ","), err))
		case !slices.Equal(s.Spec.ClusterIPs, moves[k]):
			out = append(out, fmt.Sprintf("%s: planned %s, has %s", k, strings.Join(moves[k], ","), strings.Join(s.Spec.ClusterIPs, ",")))
		}
	}
	return out
}

// journal lists the recreation journal's entries in every namespace.
func journal(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	l, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: recreation.JournalLabel})
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	var out []string
	for _, cm := range l.Items {
		for _, v := range cm.Data {
			var entries []recreation.JournalEntry
			if json.Unmarshal([]byte(v), &entries) != nil {
				out = append(out, cm.Namespace+"/"+cm.Name+" (unreadable)")
				continue
			}
			for _, e := range entries {
				out = append(out, e.Key)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// newServiceRanges are the ranges kube-apiserver restarts on: given, else the configuration's
// output kops_steps' service_range step (serviceClusterIPRange), replacing the range of its
// family in the current ones (the other family's stays).
func (w *workspace) newServiceRanges(ctx context.Context, given, current []string) ([]string, error) {
	if len(given) > 0 {
		return given, nil
	}
	var out bytes.Buffer
	if err := w.run(ctx, &out, "output", "-json", "kops_steps"); err != nil {
		return nil, fmt.Errorf("the new Service range: not given (-apiserver-range) and no output kops_steps: %w", err)
	}
	return rangesFromSteps(out.Bytes(), current)
}

// rangesFromSteps reads kops_networking's steps (JSON) for service_range's serviceClusterIPRange
// and puts it in place of the current range of its family.
func rangesFromSteps(stepsJSON []byte, current []string) ([]string, error) {
	var steps []struct{ Name, YAML string }
	if err := json.Unmarshal(stepsJSON, &steps); err != nil {
		return nil, fmt.Errorf("reading the output kops_steps: %w", err)
	}
	re := regexp.MustCompile(`serviceClusterIPRange:\s*"?([0-9a-fA-F.:/]+)`)
	for _, s := range steps {
		m := re.FindStringSubmatch(s.YAML)
		if s.Name != "service_range" || m == nil {
			continue
		}
		p, err := netip.ParsePrefix(m[1])
		if err != nil {
			return nil, fmt.Errorf("kops_steps' service_range: %w", err)
		}
		ranges := slices.Clone(current)
		for i, c := range ranges {
			if q, err := netip.ParsePrefix(c); err == nil && q.Addr().Is4() == p.Addr().Is4() {
				ranges[i] = p.String()
				return ranges, nil
			}
		}
		return append(ranges, p.String()), nil
	}
	return nil, errors.New("the new Service range: not given (-apiserver-range) and the output kops_steps has no service_range step")
}
