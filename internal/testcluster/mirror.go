// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
)

// ProviderMirror lays out a filesystem mirror in dir holding the provider binary as version of
// k8scidr/k8scidr for this platform, the way a release is installed: unlike a dev override,
// `init` installs it, records its checksum in the lock file and checks it against one, and
// honours the configuration's version constraint. It returns a CLI configuration file that
// installs from the mirror alone. The mirror's host is the registry terraform (a terraform or
// tofu binary) names for k8scidr/k8scidr: the two CLIs' differ. altered appends a byte to the
// binary: another build, whose checksum no lock file of the real one lists.
func ProviderMirror(terraform, binary, dir, version string, altered bool) (string, error) {
	probe, err := os.MkdirTemp("", "k8scidr-providers-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(probe) }()
	req := "terraform {\n  required_providers {\n    k8scidr = { source = \"k8scidr/k8scidr\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(probe, "main.tf"), []byte(req), 0o600); err != nil {
		return "", err
	}
	out, err := exec.Command(terraform, "-chdir="+probe, "providers", "-no-color").CombinedOutput()
	m := regexp.MustCompile(`provider\[([^/\]]+)/k8scidr/k8scidr\]`).FindSubmatch(out)
	if err != nil || m == nil {
		return "", fmt.Errorf("%s providers: %v\n%s", terraform, err, out)
	}
	platform := filepath.Join(dir, string(m[1]), "k8scidr", "k8scidr", version, runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(platform, 0o755); err != nil {
		return "", err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	if altered {
		bin = append(bin, 0)
	}
	if err := os.WriteFile(filepath.Join(platform, "terraform-provider-k8scidr_v"+version), bin, 0o755); err != nil { //nolint:gosec // an executable
		return "", err
	}
	rc := filepath.Join(dir, "terraformrc")
	text := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", dir)
	return rc, os.WriteFile(rc, []byte(text), 0o600)
}
