// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rhysd/actionlint"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/plansummary"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// planSummaryBinary is cmd/k8scidr-plan-summary, built once per test run.
var planSummaryBinary = sync.OnceValues(func() (string, error) {
	return buildBinary("k8scidr-plan-summary", "../../cmd/k8scidr-plan-summary")
})

// planScript runs examples/ci/plan.sh in the workspace as the CI job does, with the
// credentials of kubeconfig, and returns the summary it printed.
func (w *cliWorkspace) planScript(kubeconfig string, args ...string) (string, error) {
	w.t.Helper()
	summary, err := planSummaryBinary()
	if err != nil {
		w.t.Fatal(err)
	}
	script, err := filepath.Abs("../../examples/ci/plan.sh")
	if err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = w.dir
	cmd.Env = append(slices.Clone(w.env), "KUBE_CONFIG_PATH="+kubeconfig, "TERRAFORM="+terraformPath(), "K8SCIDR_PLAN_SUMMARY="+summary)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if stderr.Len() > 0 {
		w.t.Logf("plan.sh stderr:\n%s", stderr.String())
	}
	return stdout.String(), err
}

// TestAccCIKit is examples/ci's pull-request flow on examples/migration, each job on a fresh
// runner as in CI: the repository (main.tf and its committed lock file) copied into a new
// directory, the provider installed from a mirror as from the registry with `init
// -lockfile=readonly`, the state in the cluster through the example's kubernetes backend.
// A failed plan (a preflight blocker) posts a summary of its errors; the next plan job, as the
// read-only role, posts the summary in the same comment; the apply job, as the apply role with
// only the saved plan of the plan job, applies it and posts its log as a new comment; the next
// plan job finds nothing to do and edits the plan comment, never the apply's. A provider build
// the lock file does not list is refused by init. Under OpenTofu the saved plan is encrypted
// (TF_ENCRYPTION, as the workflow sets it), and the apply job cannot read it without the key.
func TestAccCIKit(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	e, seeded, _ := migrationFixture(t)
	ctx := context.Background()
	planKC, err := e.c.ServiceAccountKubeconfig(ctx, planRole)
	if err != nil {
		t.Fatal(err)
	}
	applyKC, err := e.c.ServiceAccountKubeconfig(ctx, applyRole)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.NamespacedRoles(ctx, stateRoles,
		map[string]string{"k8scidr-state-plan": "k8scidr-plan", "k8scidr-state-apply": "k8scidr-apply"}); err != nil {
		t.Fatal(err)
	}
	release := providerMirror(t, false)
	var encryption []string
	if strings.HasPrefix(filepath.Base(terraformPath()), "tofu") {
		encryption = []string{"TF_ENCRYPTION=" + planEncryption}
	}
	pr := newFakePR(t)

	// Once, before the first pull request: the lock file committed beside main.tf (here init's,
	// as `terraform providers lock` writes it), and the apply role's first init, which creates
	// the state Secret and its lock Lease (the plan role creates nothing).
	repo := t.TempDir()
	copyInto(t, repo, "../../examples/migration/main.tf", "../../examples/migration/stack.tf")
	bootstrap := ciRunner(t, release, applyKC, repo)
	bootstrap.must("init", "-input=false")
	copyInto(t, repo, filepath.Join(bootstrap.dir, ".terraform.lock.hcl"))
	if _, err := e.c.Kube.CoreV1().Secrets("k8scidr-state").Get(ctx, "tfstate-default-k8scidr-migration", metav1.GetOptions{}); err != nil {
		t.Fatalf("the apply role's first init made no state Secret: %v", err)
	}

	// planJob is the workflow's plan job on a fresh runner: init with the lock file, plan.sh as
	// the read-only role, the summary posted; it returns the runner and the summary.
	planJob := func(wantOK bool) (*cliWorkspace, string) {
		t.Helper()
		w := ciRunner(t, release, planKC, repo)
		w.env = append(w.env, encryption...)
		w.must("init", "-input=false", "-lockfile=readonly")
		out, err := w.planScript(planKC)
		if (err == nil) != wantOK {
			t.Fatalf("plan.sh: %v\n%s", err, out)
		}
		pr.post("plan", out)
		return w, out
	}
	unpin := pinToOldPool(t, e.c.Kube)
	_, out := planJob(false)
	for _, want := range []string{"**The plan failed.**", "**Error: Resource precondition failed**",
		"pods_pinned_to_old_pool on Deployment app-0/pinned"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failed plan's summary lacks %q:\n%s", want, out)
		}
	}
	unpin()

	plan, out := planJob(true)
	t.Logf("the pull-request comment of examples/migration, stage 1 (%d characters):\n%s", len(out), out)
	moves := len(seeded.ServiceIPs) - len(seeded.LoadBalancers)
	if !strings.Contains(out, fmt.Sprintf("### Service moves (%d) · `k8scidr_service_recreation.services`\n", moves)) || !strings.Contains(out, "|---|---|---|---|\n| `kube-system/kube-dns` | ClusterIP | 100.64.0.10 | 172.24.0.10 |") {
		t.Errorf("the summary does not list %d moves, kube-dns first to 172.24.0.10", moves)
	}
	for _, lb := range seeded.LoadBalancers {
		if !regexp.MustCompile("- LoadBalancer: [^\n]*`" + regexp.QuoteMeta(lb) + "`").MatchString(out) {
			t.Errorf("the LoadBalancer %s is not listed as left alone, with its reason", lb)
		}
	}
	if !strings.Contains(out, "| `k8scidr_service_cidr.new` | create | `services-172-24-0-0-15` `172.24.0.0/15` |") {
		t.Error("the summary does not show the new Service range")
	}
	if strings.Contains(out, "forbidden") || strings.Contains(out, "Not Readable") {
		t.Error("the plan role lacks a permission the plan of examples/migration uses")
	}
	if len(out) > plansummary.DefaultLimit {
		t.Errorf("summary of %d characters", len(out))
	}
	saved, err := os.ReadFile(filepath.Join(plan.dir, "tfplan"))
	if err != nil {
		t.Fatal(err)
	}
	if isZip := bytes.HasPrefix(saved, []byte("PK\x03\x04")); isZip == (encryption != nil) {
		t.Errorf("the saved plan is a plain zip file: %t, want %t (encrypted under OpenTofu)", isZip, encryption == nil)
	}

	// The apply job: a fresh runner with the repository and the plan job's artifact, the apply
	// role's credentials, the same lock file.
	apply := ciRunner(t, release, applyKC, repo, filepath.Join(plan.dir, "tfplan"))
	apply.must("init", "-input=false", "-lockfile=readonly")
	if encryption != nil {
		if out, err := apply.run("apply", "-input=false", "tfplan"); err == nil || !strings.Contains(out, "encrypt") {
			t.Errorf("the encrypted plan was applied without its key (%v):\n%s", err, out)
		}
		apply.env = append(apply.env, encryption...)
	}
	log := apply.must("apply", "-input=false", "tfplan")
	if !strings.Contains(log, "Apply complete!") {
		t.Errorf("the apply job's log:\n%s", log)
	}
	pr.post("apply", "## k8scidr apply: success\n\n```\n"+log+"```")

	// The next pull request's plan: nothing left, and the plan comment edited in place.
	next, out := planJob(true)
	if !strings.Contains(out, "Plan: no changes.") {
		t.Errorf("the plan after the apply is not empty:\n%s", out)
	}
	next.converged("-input=false")
	comments := pr.comments()
	if len(comments) != 2 || comments[0] != out+"\n"+planMarker+"\n" || !strings.HasPrefix(comments[1], "## k8scidr apply: success") {
		t.Errorf("the pull request's comments: %q\nwant the last plan's summary, then the apply's log", comments)
	}
	t.Logf("the pull request's comments, in order:\n%s", strings.Join(comments, "\n\n----\n\n"))

	// Another build of the provider than the lock file's: init refuses it.
	other := ciRunner(t, providerMirror(t, true), planKC, repo)
	if out, err := other.run("init", "-input=false", "-lockfile=readonly"); err == nil || !strings.Contains(out, "checksums") {
		t.Errorf("init installed a provider the lock file does not list (%v):\n%s", err, out)
	}
}

// planEncryption is the OpenTofu plan encryption the GitHub workflow configures (a passphrase
// from the secrets), with a fixed test passphrase.
const planEncryption = `key_provider "pbkdf2" "plan" { passphrase = "k8scidr-test-passphrase" }
method "aes_gcm" "plan" { keys = key_provider.pbkdf2.plan }
plan {
  method   = method.aes_gcm.plan
  enforced = true
}`

// providerMirror is a filesystem mirror holding the built provider as version 0.1.0, installed
// as a release is (testcluster.ProviderMirror), and returns a CLI configuration file that
// installs from it alone. altered mirrors another build.
func providerMirror(t *testing.T, altered bool) string {
	t.Helper()
	binDir, err := providerBinary()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := testcluster.ProviderMirror(terraformPath(), filepath.Join(binDir, "terraform-provider-k8scidr"), t.TempDir(), "0.1.0", altered)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// ciRunner is a CI job's fresh runner: a new directory holding the repository's files and the
// job's artifacts, the provider installed as rc says, the job's credentials in KUBE_CONFIG_PATH.
func ciRunner(t *testing.T, rc, kubeconfig, repo string, artifacts ...string) *cliWorkspace {
	t.Helper()
	w := &cliWorkspace{t: t, dir: t.TempDir(), env: append(append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0",
		"CHECKPOINT_DISABLE=1", "KUBE_CONFIG_PATH="+kubeconfig), testcluster.MigrationVars...)}
	files, err := filepath.Glob(filepath.Join(repo, "*"))
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(repo, ".terraform.lock.hcl")
	if _, err := os.Stat(lock); err == nil {
		files = append(files, lock)
	}
	copyInto(t, w.dir, append(files, artifacts...)...)
	return w
}

// copyInto copies files into dir, under their own names.
func copyInto(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// checkStageSummary checks the pull-request summary of examples/migration's plan of stage n
// (tfplan) against the plan itself, and logs it.
func checkStageSummary(t *testing.T, n int, w *cliWorkspace) {
	t.Helper()
	plan, err := plansummary.ReadPlan(bytes.NewReader(w.showRaw("tfplan")))
	if err != nil {
		t.Fatal(err)
	}
	s := plansummary.Summarize(plan, nil, plansummary.Options{Title: fmt.Sprintf("examples/migration stage %d", n)})
	t.Logf("summary of stage %d:\n%s", n, s)
	var want []string
	switch n {
	case 2:
		want = append(want, "| `k8scidr_apiserver_service.this[0]` | create | `172.24.0.0/15` `172.24.0.1` |")
	case 3:
		want = append(want, fmt.Sprintf("### Workload restarts (%d) · `k8scidr_workload_roll.moved[0]`\n", len(list(w.planned("k8scidr_workload_roll.moved[0]", "plan.workloads")))))
	case 4:
		want = append(want, "| `k8scidr_service_recreation.services` | update | bridges: `{\"",
			"old_ip_bridges: `all` → `dns`, plan.dns_bridge: `true` → `false` |",
			"| `k8scidr_apiserver_service.this[0]` | update | `172.24.0.0/15` `172.24.0.1` bridge: `true` → `false`")
	case 5:
		want = append(want, fmt.Sprintf("### Workload restarts (%d) · `k8scidr_workload_roll.pods[0]`\n", len(list(w.planned("k8scidr_workload_roll.pods[0]", "plan.workloads")))),
			"| `k8scidr_calico_ippool.new[0]` | create | `pods-172-16-0-0-13` `172.16.0.0/13` |",
			"| `k8scidr_calico_ippool.old[\"default-ipv4-ippool\"]` | import update | `default-ipv4-ippool` `100.96.0.0/11` ",
			"disabled: `false` → `true`",
			"| `k8scidr_pod_canary.new_pool[0]` | create | `172.16.0.0/13` |")
	case 6:
		want = append(want, "| `k8scidr_calico_ippool.old[\"default-ipv4-ippool\"]` | delete |")
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("the summary of stage %d lacks %q", n, w)
		}
	}
}

// TestCIKitFiles: the GitHub workflow and the Atlantis configuration are valid YAML that run
// plan.sh for the plan and apply the saved plan it wrote.
func TestCIKitFiles(t *testing.T) {
	var gh struct {
		Jobs map[string]struct {
			Environment string
			Steps       []struct{ Run string }
		}
	}
	read(t, "../../examples/ci/github/k8scidr.yml", &gh)
	runs := func(job string) string {
		var all []string
		for _, s := range gh.Jobs[job].Steps {
			all = append(all, s.Run)
		}
		return strings.Join(all, "\n")
	}
	if !strings.Contains(runs("plan"), "examples/ci/plan.sh") || !strings.Contains(runs("plan"), "examples/ci/install-summary.sh") ||
		gh.Jobs["plan"].Environment != "k8scidr-plan" {
		t.Error("the GitHub plan job does not run plan.sh with the plan role's environment")
	}
	if !strings.Contains(runs("apply"), "$TERRAFORM apply -input=false -no-color tfplan") || gh.Jobs["apply"].Environment != "k8scidr-apply" {
		t.Error("the GitHub apply job does not apply the saved plan with the apply role's environment")
	}
	if !strings.Contains(runs("plan"), "examples/ci/comment.sh\" plan") || !strings.Contains(runs("apply"), "examples/ci/comment.sh\" apply") ||
		strings.Contains(runs("plan")+runs("apply"), "--edit-last") {
		t.Error("the GitHub jobs do not post through comment.sh (the plan comment edited in place, apply logs new)")
	}
	var atlantis struct {
		Repos []struct {
			ApplyRequirements []string `json:"apply_requirements"`
		}
		Workflows map[string]struct{ Plan, Apply struct{ Steps []any } }
	}
	read(t, "../../examples/ci/atlantis/repos.yaml", &atlantis)
	wf := atlantis.Workflows["k8scidr"]
	if plan := fmt.Sprint(wf.Plan.Steps); !strings.Contains(plan, "/plan.sh") || !strings.Contains(plan, "/etc/k8scidr/plan/kubeconfig") ||
		!strings.Contains(plan, "install-summary.sh") {
		t.Errorf("the Atlantis plan steps do not run plan.sh with the plan role: %s", plan)
	}
	if apply := fmt.Sprint(wf.Apply.Steps); !strings.Contains(apply, "apply]") || !strings.Contains(apply, "/etc/k8scidr/apply/kubeconfig") {
		t.Errorf("the Atlantis apply steps do not apply with the apply role: %s", apply)
	}
	if len(atlantis.Repos) != 1 || strings.Join(atlantis.Repos[0].ApplyRequirements, ",") != "approved,mergeable,undiverged" {
		t.Errorf("Atlantis applies without approval on an undiverged branch: %+v", atlantis.Repos)
	}
	var project struct {
		Projects []struct{ Dir, Workflow string }
	}
	read(t, "../../examples/ci/atlantis/atlantis.yaml", &project)
	if len(project.Projects) != 1 || project.Projects[0].Dir != "examples/migration" || project.Projects[0].Workflow != "k8scidr" {
		t.Errorf("atlantis.yaml does not plan examples/migration with the k8scidr workflow: %+v", project)
	}
}

func read(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestCIKitComments runs examples/ci/comment.sh as the GitHub workflow does, against a fake gh
// (internal/testcluster/cmd/k8scidr-fakegh: the GitHub API's comment calls, with gh's --jq): the
// first plan creates the plan comment, an apply adds a comment of its own, and the next plan
// edits the plan comment in place, never the apply's log nor a person's comment quoting the
// marker.
func TestCIKitComments(t *testing.T) {
	pr := newFakePR(t)
	if err := os.WriteFile(pr.store, []byte(`{"next_id":1,"comments":[{"id":1,"body":"why is <!-- k8scidr-plan --> here?","user":{"login":"alice","type":"User"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pr.post("plan", "## stage 1\n\n**3** Service moves")
	pr.post("apply", "## k8scidr apply: success")
	pr.post("plan", "## stage 2\n\n**0** Service moves")
	want := []string{"why is <!-- k8scidr-plan --> here?", "## stage 2\n\n**0** Service moves\n<!-- k8scidr-plan -->\n", "## k8scidr apply: success"}
	if got := pr.comments(); !slices.Equal(got, want) {
		t.Errorf("comments %q, want %q", got, want)
	}
	calls, err := os.ReadFile(pr.store + ".log")
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := "GET repos/octo/infra/issues/7/comments\nPOST repos/octo/infra/issues/7/comments\n" +
		"POST repos/octo/infra/issues/7/comments\nGET repos/octo/infra/issues/7/comments\nPATCH repos/octo/infra/issues/comments/2\n"
	if string(calls) != wantCalls {
		t.Errorf("gh calls:\n%s\nwant:\n%s", calls, wantCalls)
	}
}

// planMarker is the marker comment.sh puts in the plan comment it edits.
const planMarker = "<!-- k8scidr-plan -->"

// fakePR is pull request 7 of octo/infra behind a fake gh (internal/testcluster/cmd/k8scidr-fakegh:
// the GitHub API's comment calls, with gh's --jq), posted to by examples/ci/comment.sh as the
// GitHub workflow runs it. Its comments are kept in store, each gh call logged in store.log.
type fakePR struct {
	t         *testing.T
	gh, store string
	dir       string
	posts     int
}

func newFakePR(t *testing.T) *fakePR {
	t.Helper()
	gh, err := buildBinary("gh", "../testcluster/cmd/k8scidr-fakegh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &fakePR{t: t, gh: gh, dir: dir, store: filepath.Join(dir, "store.json")}
}

// post runs comment.sh kind with text as the comment body.
func (p *fakePR) post(kind, text string) {
	p.t.Helper()
	p.posts++
	file := filepath.Join(p.dir, fmt.Sprintf("%s-%d.md", kind, p.posts))
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		p.t.Fatal(err)
	}
	script, err := filepath.Abs("../../examples/ci/comment.sh")
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command("bash", script, kind, file)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(p.gh)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKEGH_STORE="+p.store, "PR=7", "GITHUB_REPOSITORY=octo/infra")
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("comment.sh %s: %v\n%s", kind, err, out)
	}
}

// comments are the pull request's comment bodies, oldest first.
func (p *fakePR) comments() []string {
	p.t.Helper()
	var got struct{ Comments []struct{ Body string } }
	b, err := os.ReadFile(p.store)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		p.t.Fatal(err)
	}
	var bodies []string
	for _, c := range got.Comments {
		bodies = append(bodies, c.Body)
	}
	return bodies
}

// TestCIKitInstallSummary runs examples/ci/install-summary.sh against a release laid out as
// .goreleaser.yml lays it out, served on loopback: it installs the program of this machine's
// platform after checking it against SHA256SUMS, and refuses an archive that does not match or
// that SHA256SUMS does not list.
func TestCIKitInstallSummary(t *testing.T) {
	bin, err := planSummaryBinary()
	if err != nil {
		t.Fatal(err)
	}
	const version = "9.8.7"
	archive := fmt.Sprintf("k8scidr-plan-summary_%s_%s_%s.tar.gz", version, runtime.GOOS, runtime.GOARCH)
	release := filepath.Join(t.TempDir(), "v"+version)
	if err := os.MkdirAll(release, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-czf", filepath.Join(release, archive), "-C", filepath.Dir(bin), filepath.Base(bin)).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	sums := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(release, "terraform-provider-k8scidr_"+version+"_SHA256SUMS"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(release, archive))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	other := "0000000000000000000000000000000000000000000000000000000000000000  terraform-provider-k8scidr_" + version + "_linux_amd64.zip\n"
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(release))))
	defer srv.Close()
	install := func() (string, error) {
		dir := t.TempDir()
		cmd := exec.Command("bash", "../../examples/ci/install-summary.sh", "v"+version, dir)
		cmd.Env = append(os.Environ(), "K8SCIDR_RELEASES="+srv.URL)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()) + stderr.String(), err
	}

	sums(other + hex.EncodeToString(sum[:]) + "  " + archive + "\n")
	out, err := install()
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if help, err := exec.Command(out, "-h").CombinedOutput(); !strings.Contains(string(help), "-plan") {
		t.Errorf("the installed %s does not run as the summary program: %v\n%s", out, err, help)
	}
	sums(other + strings.Repeat("f", 64) + "  " + archive + "\n")
	if out, err := install(); err == nil || !strings.Contains(out, "does not match") {
		t.Errorf("an archive that does not match SHA256SUMS was installed: %v\n%s", err, out)
	}
	sums(other)
	if out, err := install(); err == nil || !strings.Contains(out, "is not in") {
		t.Errorf("an archive SHA256SUMS does not list was installed: %v\n%s", err, out)
	}
}

// TestCIKitActionlint lints the GitHub workflow with actionlint, as its users' CI would: its
// expressions, the actions' inputs, the jobs' needs and the event filters.
func TestCIKitActionlint(t *testing.T) {
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFile("../../examples/ci/github/k8scidr.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("actionlint: %s", e.Error())
	}
}

// atlantisStepNames are the step types Atlantis accepts (runatlantis/atlantis@0222a70,
// server/core/config/raw/step.go, validStepName), and atlantisRunOutputs a run step's outputs
// (server/core/config/valid, PostProcessRunOutputOptions).
var (
	atlantisStepNames  = []string{"init", "plan", "apply", "env", "multienv", "show", "policy_check", "import", "state_rm"}
	atlantisRunOutputs = []string{"show", "hide", "strip_refreshing", "custom_regex", "strip_refreshing_with_custom_regex"}
)

// atlantisStepProblem restates Atlantis' Step.Validate for one step as YAML decodes it: a
// built-in step's name; an env step's name with exactly one of command or value; a run step's
// command with an optional output; one key per step. It returns "" for a valid step.
func atlantisStepProblem(step any) string {
	switch s := step.(type) {
	case string:
		if !slices.Contains(atlantisStepNames, s) {
			return fmt.Sprintf("%q is not a valid step type", s)
		}
		return ""
	case map[string]any:
		if len(s) != 1 {
			return fmt.Sprintf("a step has one key, not %d", len(s))
		}
		for name, args := range s {
			if name == "run" || name == "multienv" {
				if _, ok := args.(string); ok {
					return ""
				}
			}
			m, ok := args.(map[string]any)
			if !ok {
				return fmt.Sprintf("step %s: %v is neither a command nor a map", name, args)
			}
			switch name {
			case "env":
				_, cmd := m["command"]
				_, val := m["value"]
				if _, ok := m["name"]; !ok || cmd == val || len(m) != 2 {
					return fmt.Sprintf("env step %v: name and exactly one of command or value", m)
				}
			case "run":
				if _, ok := m["command"]; !ok {
					return "run step without command"
				}
				for k, v := range m {
					if k == "output" && !slices.Contains(atlantisRunOutputs, fmt.Sprint(v)) {
						return fmt.Sprintf("run step output %v", v)
					}
					if k != "command" && k != "output" {
						return fmt.Sprintf("run step key %q", k)
					}
				}
			default:
				if _, ok := m["extra_args"]; !ok || len(m) != 1 || !slices.Contains(atlantisStepNames, name) {
					return fmt.Sprintf("built-in step %s takes only extra_args: %v", name, m)
				}
			}
		}
		return ""
	}
	return fmt.Sprintf("step %v (%T)", step, step)
}

// TestCIKitAtlantisConfig checks examples/ci/atlantis as Atlantis' config parser would (its
// module is not served here, so its rules are restated, with their source above): every step of
// the k8scidr workflow, the apply requirements, the workflows the repos allow, and the project
// file's version; and every shell command the kit runs, Atlantis' and GitHub's, parses in bash.
func TestCIKitAtlantisConfig(t *testing.T) {
	var repos struct {
		Repos []struct {
			ID                string   `json:"id"`
			ApplyRequirements []string `json:"apply_requirements"`
			AllowedWorkflows  []string `json:"allowed_workflows"`
			AllowedOverrides  []string `json:"allowed_overrides"`
		} `json:"repos"`
		Workflows map[string]map[string]struct {
			Steps []any `json:"steps"`
		} `json:"workflows"`
	}
	b, err := os.ReadFile("../../examples/ci/atlantis/repos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &repos); err != nil {
		t.Fatalf("repos.yaml: %v", err)
	}
	var scripts []string
	for name, stages := range repos.Workflows {
		for stage, s := range stages {
			if !slices.Contains([]string{"plan", "apply", "policy_check", "import", "state_rm"}, stage) {
				t.Errorf("workflow %s: %q is not a stage", name, stage)
			}
			for i, step := range s.Steps {
				if p := atlantisStepProblem(step); p != "" {
					t.Errorf("workflow %s, %s step %d: %s", name, stage, i, p)
				}
				if m, ok := step.(map[string]any); ok {
					if run, ok := m["run"].(map[string]any); ok {
						scripts = append(scripts, fmt.Sprint(run["command"]))
					}
				}
			}
		}
	}
	for _, r := range repos.Repos {
		for _, req := range r.ApplyRequirements {
			if !slices.Contains([]string{"approved", "mergeable", "undiverged", "policies_passed"}, req) {
				t.Errorf("repo %s: apply requirement %q", r.ID, req)
			}
		}
		for _, w := range r.AllowedWorkflows {
			if _, ok := repos.Workflows[w]; !ok {
				t.Errorf("repo %s allows workflow %q, which repos.yaml does not define", r.ID, w)
			}
		}
	}
	var project struct {
		Version  int `json:"version"`
		Projects []struct {
			Name     string `json:"name"`
			Dir      string `json:"dir"`
			Workflow string `json:"workflow"`
			Autoplan struct {
				WhenModified []string `json:"when_modified"`
			} `json:"autoplan"`
		} `json:"projects"`
	}
	if b, err = os.ReadFile("../../examples/ci/atlantis/atlantis.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &project); err != nil || project.Version != 3 {
		t.Errorf("atlantis.yaml: version %d, %v; want version 3 and only the keys Atlantis reads", project.Version, err)
	}
	var gh struct {
		Jobs map[string]struct{ Steps []struct{ Run string } }
	}
	read(t, "../../examples/ci/github/k8scidr.yml", &gh)
	for _, j := range gh.Jobs {
		for _, s := range j.Steps {
			if s.Run != "" {
				scripts = append(scripts, strings.NewReplacer("${{", "$(echo ", "}}", ")").Replace(s.Run))
			}
		}
	}
	if len(scripts) < 5 {
		t.Fatalf("found %d shell commands in the kit", len(scripts))
	}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", "-c", s).CombinedOutput(); err != nil {
			t.Errorf("bash cannot parse %q: %v\n%s", s, err, out)
		}
	}
}
