// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/plansummary"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccFleet runs examples/fleet's stage 1 (every Service moves, kube-dns first, behind its
// bridge) on two clusters, with the provider installed from a mirror as from the registry.
// Under OpenTofu, fleet/main.tf (a provider instance and a migration module per cluster,
// provider for_each) makes one plan whose summary has a section per cluster, with the fleet's
// state in the first cluster; under terraform, which has no provider for_each, terraform.sh
// plans a stack per cluster into one summary and applies each, each state in its own cluster.
// Then both clusters have moved and the next plan is empty.
func TestAccFleet(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	ctx := context.Background()
	names := []string{"eu", "us"}
	fleet := map[string]*testcluster.Cluster{}
	moves := map[string]int{}
	for _, name := range names {
		e, seeded, _ := migrationFixture(t)
		if err := e.c.NamespacedRoles(ctx, stateRoles, nil); err != nil {
			t.Fatal(err)
		}
		fleet[name], moves[name] = e.c, len(seeded.ServiceIPs)-len(seeded.LoadBalancers)
	}
	summaryBin, err := planSummaryBinary()
	if err != nil {
		t.Fatal(err)
	}
	rc := providerMirror(t, false)
	example, err := filepath.Abs("../../examples/fleet")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	var summary string
	if strings.HasPrefix(filepath.Base(terraformPath()), "tofu") {
		w := &cliWorkspace{t: t, dir: t.TempDir(), env: append(env, "KUBE_CONFIG_PATH="+fleet[names[0]].Kubeconfig)}
		copyInto(t, w.dir, filepath.Join(example, "main.tf"))
		if err := os.Symlink(filepath.Join(example, "cluster"), filepath.Join(w.dir, "cluster")); err != nil {
			t.Fatal(err)
		}
		clusters := map[string]any{}
		for name, c := range fleet {
			clusters[name] = map[string]any{"config_path": c.Kubeconfig, "canary_image": "pause:canary", "old_pool_name": "default-ipv4-ippool",
				"reserved": map[string]string{"tailscale": "100.64.0.0/10"}, "service_cidrs": map[string]string{"old": "100.64.0.0/13", "new": "172.24.0.0/15"},
				"pod_cidrs": map[string]string{"old": "100.96.0.0/11", "new": "172.16.0.0/13"}}
		}
		vars, err := json.Marshal(map[string]any{"clusters": clusters})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.dir, "terraform.tfvars.json"), vars, 0o600); err != nil {
			t.Fatal(err)
		}
		w.must("init", "-input=false")
		w.planFile("-input=false")
		plan, err := plansummary.ReadPlan(bytes.NewReader(w.showRaw("tfplan")))
		if err != nil {
			t.Fatal(err)
		}
		summary = plansummary.Summarize(plan, nil, plansummary.Options{Title: "examples/fleet"})
		w.applyFile()
		w.converged("-input=false")
	} else {
		clusters := t.TempDir()
		for name, c := range fleet {
			dir := filepath.Join(clusters, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			copyInto(t, dir, c.Kubeconfig)
			if err := os.Rename(filepath.Join(dir, filepath.Base(c.Kubeconfig)), filepath.Join(dir, "kubeconfig")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "terraform.tfvars"), []byte(migrationTFVars), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		script := func(cmd string) string {
			t.Helper()
			run := exec.Command("bash", filepath.Join(example, "terraform.sh"), cmd)
			run.Env = append(slices.Clone(env), "CLUSTERS="+clusters, "TERRAFORM="+terraformPath(), "K8SCIDR_PLAN_SUMMARY="+summaryBin)
			var stdout, stderr bytes.Buffer
			run.Stdout, run.Stderr = &stdout, &stderr
			if err := run.Run(); err != nil {
				t.Fatalf("terraform.sh %s: %v\n%s\n%s", cmd, err, stdout.String(), stderr.String())
			}
			return stdout.String()
		}
		summary = script("plan")
		script("apply")
		again := script("plan")
		if strings.Count(again, "Plan: no changes.") != len(names) {
			t.Errorf("the plans after the apply are not empty:\n%s", again)
		}
	}
	t.Logf("the fleet's plan summary:\n%s", summary)
	for _, name := range names {
		address := fmt.Sprintf("`module.migration[%q].k8scidr_service_recreation.services`", name)
		if !strings.HasPrefix(filepath.Base(terraformPath()), "tofu") {
			address = "`k8scidr_service_recreation.services`"
			if !strings.Contains(summary, "## k8scidr plan: "+name+"\n") {
				t.Errorf("the summary has no section for cluster %s", name)
			}
		}
		if want := fmt.Sprintf("### Service moves (%d) · %s\n", moves[name], address); !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q", want)
		}
		dns, err := fleet[name].Kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dns.Spec.ClusterIP != newDNS {
			t.Errorf("cluster %s: kube-dns is on %s, want %s", name, dns.Spec.ClusterIP, newDNS)
		}
	}
}
