package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
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
	binDir := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "terraform-provider-k8scidr"), "../..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the provider: %v\n%s", err, out)
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

func (w *cliWorkspace) command(extraEnv []string, args ...string) *exec.Cmd {
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		tf = filepath.Join(testcluster.DefaultBinDir(), "terraform")
	}
	cmd := exec.Command(tf, append([]string{"-chdir=" + w.dir}, args...)...)
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

func crashTestConfig(kubeconfig string) string {
	return providerBlock(kubeconfig) + `
resource "k8scidr_service_recreation" "this" {
  target_cidrs = ["172.24.0.0/15"]
  parallelism  = 10
}
`
}

// TestAccServiceRecreation_crashSafety kills terraform and the provider with SIGKILL in the
// middle of moving 240 Services, while some are deleted and not yet recreated. The next plan
// shows exactly those under restore; the next apply restores them and finishes the move: the
// same Services afterwards, equal but for their IPs, hand-made Endpoints included. Then a plan
// whose IP is taken before apply is refused without touching anything.
func TestAccServiceRecreation_crashSafety(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	client := clientFor(c)
	if _, err := k8sops.CreateServiceCIDR(ctx, client, "new", []string{"172.24.0.0/15"}); err != nil {
		t.Fatal(err)
	}
	if _, err := k8sops.WaitServiceCIDRReady(ctx, client, "new"); err != nil {
		t.Fatal(err)
	}
	f := fixture{t, c.Kube}
	f.namespace("crash")
	const n = 240
	for i := range n {
		s := ipService(fmt.Sprintf("s%03d", i), "ClusterIP", fmt.Sprintf("100.64.%d.%d", 1+i/200, 2+i%200))
		s.Labels = map[string]string{"tier": fmt.Sprint(i % 3)}
		if i%10 == 0 { // selector-less, with hand-made Endpoints the move must carry over
			s.Spec.Selector = nil
		}
		f.service("crash", s)
		if i%10 == 0 {
			_, err := c.Kube.CoreV1().Endpoints("crash").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: s.Name},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.9.0.%d", 1+i/10)}},
					Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	before := servicesIn(t, c.Kube, "crash")
	target := netip.MustParsePrefix("172.24.0.0/15")
	w := newCLIWorkspace(t, crashTestConfig(c.Kubeconfig))

	// Apply with every move held 300 ms between delete and create; kill it once 40 moved.
	cmd := w.command([]string{"K8SCIDR_FAULT_DELAY_AFTER_DELETE=300ms"}, "apply", "-auto-approve", "-no-color")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		moved, now := 0, servicesIn(t, c.Kube, "crash")
		for _, s := range now {
			if target.Contains(netip.MustParseAddr(s.Spec.ClusterIP)) {
				moved++
			}
		}
		return moved >= 40 && len(now) < n, nil // mid-batch: some deleted, not recreated
	})
	if killErr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); killErr != nil {
		t.Fatal(killErr)
	}
	_ = cmd.Wait()
	if err != nil {
		t.Fatalf("the apply did not get going: %v\n%s", err, out.String())
	}
	missing := map[string]bool{}
	now := servicesIn(t, c.Kube, "crash")
	for key := range before {
		if _, ok := now[key]; !ok {
			missing[key] = true
		}
	}
	if len(missing) == 0 || len(now) == n {
		t.Fatalf("the kill left no Service deleted (%d exist): the test proves nothing", len(now))
	}
	t.Logf("killed with %d Services deleted and not yet recreated", len(missing))

	if out, err := w.run("plan", "-out=tfplan"); err != nil {
		t.Fatalf("plan after the crash: %v\n%s", err, out)
	}
	planJSON, err := w.run("show", "-json", "tfplan")
	if err != nil {
		t.Fatalf("show: %v\n%s", err, planJSON)
	}
	restore := plannedAttr(t, planJSON, "restore")
	if keys := slices.Sorted(maps.Keys(restore)); !reflect.DeepEqual(keys, slices.Sorted(maps.Keys(missing))) {
		t.Errorf("plan restore = %v, want the deleted Services %v", keys, slices.Sorted(maps.Keys(missing)))
	}
	if out, err := w.run("apply", "tfplan"); err != nil || !strings.Contains(out, "Restored Services From an Interrupted Apply") {
		t.Fatalf("apply after the crash: %v\n%s", err, out)
	}
	after := servicesIn(t, c.Kube, "crash")
	if len(after) != len(before) {
		t.Errorf("%d Services before, %d after", len(before), len(after))
	}
	for key, old := range before {
		s, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s lost", key)
		case !target.Contains(netip.MustParseAddr(s.Spec.ClusterIP)):
			t.Errorf("%s not moved: %s", key, s.Spec.ClusterIP)
		case !reflect.DeepEqual(specWithoutIPs(old), specWithoutIPs(s)):
			t.Errorf("%s changed beyond its IPs", key)
		}
		if old.Spec.Selector == nil {
			ep, err := c.Kube.CoreV1().Endpoints("crash").Get(ctx, old.Name, metav1.GetOptions{})
			if err != nil || len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 {
				t.Errorf("%s: hand-made Endpoints lost: %v", key, err)
			}
		}
	}
	if cms, err := c.Kube.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{LabelSelector: k8sops.JournalLabel}); err != nil || len(cms.Items) > 0 {
		t.Errorf("journal left after the recovering apply: %v, %d", err, len(cms.Items))
	}
	if out, err := w.run("plan", "-detailed-exitcode"); err != nil {
		t.Errorf("plan after recovery is not empty: %v\n%s", err, out)
	}

	// A planned IP taken between plan and apply: apply refuses and touches nothing.
	late := f.service("crash", ipService("late", "ClusterIP", "100.64.30.30"))
	if out, err := w.run("plan", "-out=tfplan"); err != nil || !diagRE("Apply Re-checks This Plan Against the Cluster", "Run terraform plan again").MatchString(out) {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	planJSON, _ = w.run("show", "-json", "tfplan")
	pending := plannedAttr(t, planJSON, "pending")
	newIP := pending["crash/late"].(map[string]any)["new_ips"].([]any)[0].(string)
	if newIP != "172.24.30.30" {
		t.Fatalf("late planned to %s, want 172.24.30.30", newIP)
	}
	f.service("crash", ipService("squatter", "ClusterIP", newIP))
	out2, err := w.run("apply", "tfplan")
	// Terraform re-plans during apply and refuses the changed value itself, before the provider
	// is asked to apply anything; the plan's warning said so.
	if err == nil || !diagRE("inconsistent final plan", `.pending["crash/late"].new_ips[0]`, `was cty.StringVal("172.24.30.30")`).MatchString(out2) {
		t.Errorf("apply of a stale plan: %v\n%s", err, out2)
	}
	if s := servicesIn(t, c.Kube, "crash")["crash/late"]; s.UID != late.UID {
		t.Error("the stale apply touched crash/late")
	}
}

// plannedAttr returns an attribute of the recreation resource's planned value.
func plannedAttr(t *testing.T, planJSON, attr string) map[string]any {
	t.Helper()
	var plan struct {
		ResourceChanges []struct {
			Address string
			Change  struct {
				After map[string]any
			}
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil {
		t.Fatalf("plan JSON: %v", err)
	}
	for _, rc := range plan.ResourceChanges {
		if rc.Address == recreationAddr {
			m, _ := rc.Change.After[attr].(map[string]any)
			return m
		}
	}
	t.Fatalf("%s not in the plan", recreationAddr)
	return nil
}
