// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccInstall: from a clone to `init` of examples/migration as a user types it, without a
// registry and without any CLI configuration: `make install` (tools/install.sh) puts the
// provider in the implicit local mirror of a home of its own, and terraform (and tofu, where
// make testbin built it) init examples/migration there, with its kubernetes backend on a
// loopback cluster and its version constraint met; the lock file records the provider.
func TestAccInstall(t *testing.T) {
	testAccPreCheck(t)
	c := startCluster(t, testcluster.Options{})
	// README's step before init: `kubectl apply -f examples/rbac/k8scidr-state.yaml` makes the
	// backend's namespace (the test must not lean on another test having made it).
	if err := c.NamespacedRoles(context.Background(), stateRoles, nil); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	install := exec.Command("bash", "../../tools/install.sh")
	// The build keeps the user's Go caches; only the plugins go to the new home.
	install.Env = append(os.Environ(), "TF_PLUGINS_DIR="+filepath.Join(home, ".terraform.d", "plugins"))
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	clis := []string{terraformPath()}
	if tofu := filepath.Join(testcluster.DefaultBinDir(), "tofu"); fileExists(tofu) {
		clis = append(clis, tofu)
	}
	for _, cli := range clis {
		t.Run(filepath.Base(cli), func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"main.tf", "stack.tf"} {
				text, err := os.ReadFile(filepath.Join("../../examples/migration", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), text, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// Nothing of the test's own CLI configuration: a user's machine has none.
			var env []string
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "TF_") && k != "HOME" && !strings.HasPrefix(k, "KUBE") {
					env = append(env, kv)
				}
			}
			env = append(env, "HOME="+home, "KUBE_CONFIG_PATH="+c.Kubeconfig, "CHECKPOINT_DISABLE=1")
			cmd := exec.Command(cli, "-chdir="+dir, "init", "-input=false", "-no-color")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("init of examples/migration after make install: %v\n%s", err, out)
			}
			lock, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
			if err != nil || !strings.Contains(string(lock), `/k8scidr/k8scidr"`) || !strings.Contains(string(lock), `version     = "0.1.0"`) {
				t.Errorf("the lock file after init: %v\n%s\ninit said:\n%s", err, lock, out)
			}
			if !strings.Contains(string(out), `Successfully configured the backend "kubernetes"`) {
				t.Errorf("init did not configure the kubernetes backend:\n%s", out)
			}
		})
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
