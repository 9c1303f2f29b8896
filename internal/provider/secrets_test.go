// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAccSecrets_notInTraceLogs runs the built provider under a real terraform at TF_LOG=TRACE
// through a whole workflow (plan, apply, refresh, plan, destroy of a resource and data
// sources), once with each kind of credential, and greps the log, terraform's and the
// provider's, for the token, the client key and an exec plugin's environment. The plan output
// must show them as sensitive too. The log holds the API trace, one line per request.
func TestAccSecrets_notInTraceLogs(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := testAccCluster
	const execSecret = "exec-env-secret-5f0c2a9e"
	execPlugin := writeExecPlugin(t, c.Token)
	keyBody := pemBody(string(c.ClientKey))
	secrets := map[string]string{"token": c.Token, "client_key (PEM body)": keyBody, "exec env": execSecret}
	providers := map[string]string{
		"token": fmt.Sprintf("provider \"k8scidr\" {\n  host = %q\n  token = %q\n  cluster_ca_certificate = %q\n}\n",
			c.Host, c.Token, string(c.CACert)),
		"client key": fmt.Sprintf("provider \"k8scidr\" {\n  host = %q\n  client_certificate = %q\n  client_key = %q\n  cluster_ca_certificate = %q\n}\n",
			c.Host, string(c.ClientCert), string(c.ClientKey), string(c.CACert)),
		"exec": fmt.Sprintf(`provider "k8scidr" {
  host                   = %q
  cluster_ca_certificate = %q
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %q
    args        = ["--cluster", "test"]
    env         = { K8SCIDR_TEST = "1", UNRELATED = %q }
  }
}
`, c.Host, string(c.CACert), execPlugin, execSecret),
	}
	for name, provider := range providers {
		t.Run(name, func(t *testing.T) {
			w := newCLIWorkspace(t, provider+fmt.Sprintf(`
data "k8scidr_cluster_info" "this" {}
data "k8scidr_service_cidrs" "all" {}

resource "k8scidr_service_cidr" "this" {
  name  = "secrets-%s"
  cidrs = ["172.30.%d.0/24"]
}
`, strings.ReplaceAll(name, " ", "-"), len(name)))
			logPath := filepath.Join(t.TempDir(), "trace.log")
			w.env = append(w.env, "TF_LOG=TRACE", "TF_LOG_PATH="+logPath)
			var shown strings.Builder
			for _, args := range [][]string{{"plan"}, {"apply", "-auto-approve"}, {"plan", "-refresh-only"}, {"plan", "-detailed-exitcode"}, {"destroy", "-auto-approve"}} {
				out, err := w.run(args...)
				if err != nil {
					t.Fatalf("terraform %v: %v\n%s", args, err, out)
				}
				shown.WriteString(out)
			}
			logText, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			// The control: the log does carry the provider's lines and the connection's non-secret
			// settings, so a secret logged the same way would be found.
			if !strings.Contains(string(logText), "provider.terraform-provider-k8scidr") || !strings.Contains(string(logText), c.Host) {
				t.Fatalf("the TRACE log (%d bytes) lacks the provider's lines or the API server address: the grep would prove nothing", len(logText))
			}
			// The API trace: one line per request with verb, path, status, duration and retries
			// (fields in any order); creating the ServiceCIDR is among them.
			want := []string{"Kubernetes API request: ", " verb=POST", " path=/apis/networking.k8s.io/v1/servicecidrs ", " status=201", " retries=0", " duration_ms="}
			if !slices.ContainsFunc(strings.Split(string(logText), "\n"), func(line string) bool {
				return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line+" ", w) })
			}) {
				t.Errorf("the log has no API trace line holding %q", want)
			}
			for what, secret := range secrets {
				if i := strings.Index(string(logText), secret); i >= 0 {
					t.Errorf("the TRACE log holds the %s: …%s…", what, logText[max(0, i-200):i])
				}
				if strings.Contains(shown.String(), secret) {
					t.Errorf("terraform's output shows the %s", what)
				}
			}
			t.Logf("TRACE log: %d bytes, none of %d secrets in it", len(logText), len(secrets))
		})
	}
}

// pemBody is the first line of a PEM block's base64 body: what a log would show of a key.
func pemBody(pem string) string {
	for _, line := range strings.Split(pem, "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			return line
		}
	}
	return pem
}
