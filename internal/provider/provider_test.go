// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"k8scidr": providerserver.NewProtocol6WithError(New("test")()),
}

// testAccCluster describes the cluster acceptance tests run against: started by TestMain, or
// an existing one named by K8SCIDR_TEST_KUBECONFIG.
var testAccCluster *testcluster.Cluster

// isolatedRun: this process is a test re-run in a network namespace of its own, by a parent
// that had its own cluster (it checked requireOwnCluster before it re-ran the test).
var isolatedRun bool

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// A wire test re-run in a network namespace of its own (testcluster.RerunIsolated) finds
	// only a loopback that is down: the cluster below needs it up.
	// It starts its own cluster there: the suite's would only cost the time to start it.
	if isolated, err := testcluster.Isolated(); err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests:", err)
		return 1
	} else if isolated && os.Getenv("TF_ACC") != "" {
		if err := prepareTerraform(); err != nil {
			fmt.Fprintln(os.Stderr, "acceptance tests:", err)
			return 1
		}
		testAccCluster, isolatedRun = &testcluster.Cluster{}, true
		return m.Run()
	}
	if os.Getenv("TF_ACC") == "" {
		return m.Run()
	}
	if err := prepareTerraform(); err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests:", err)
		return 1
	}
	if kc := os.Getenv("K8SCIDR_TEST_KUBECONFIG"); kc != "" {
		testAccCluster = &testcluster.Cluster{Kubeconfig: kc}
		return m.Run()
	}
	c, err := testcluster.Start(context.Background(), testcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests: starting the test cluster:", err)
		return 1
	}
	defer c.Stop()
	if err := asProvider(c); err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests:", err)
		return 1
	}
	testAccCluster = c
	return m.Run()
}

// prepareTerraform points the test framework at the repository's terraform and keeps it offline:
// a CLI config file that does not exist makes terraform print warnings that break version parsing.
func prepareTerraform() error {
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		tf := filepath.Join(testcluster.DefaultBinDir(), "terraform")
		if _, err := os.Stat(tf); err != nil {
			return fmt.Errorf("no terraform binary: set TF_ACC_TERRAFORM_PATH or run make testbin (%w)", err)
		}
		if err := os.Setenv("TF_ACC_TERRAFORM_PATH", tf); err != nil {
			return err
		}
	}
	if f := os.Getenv("TF_CLI_CONFIG_FILE"); f != "" {
		if _, err := os.Stat(f); err != nil {
			empty, err := os.CreateTemp("", "terraformrc-")
			if err != nil {
				return err
			}
			empty.Close()
			return os.Setenv("TF_CLI_CONFIG_FILE", empty.Name())
		}
	}
	return nil
}

func testAccPreCheck(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: runs with TF_ACC=1 (make test, make testacc)")
	}
	if testAccCluster == nil {
		t.Fatal("no test cluster: TestMain starts one when TF_ACC is set")
	}
}

// testAccProviderConfig is a provider block for the test cluster.
func testAccProviderConfig() string { return providerBlock(testAccCluster.Kubeconfig) }

// providerBlock is a provider block for the cluster of a kubeconfig.
func providerBlock(kubeconfig string) string {
	return fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n}\n", kubeconfig)
}

// startCluster starts a cluster of the test's own, stopped when the test ends.
func startCluster(t *testing.T, opts testcluster.Options) *testcluster.Cluster {
	t.Helper()
	c, err := testcluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := asProvider(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// asProvider points the cluster's kubeconfig, which the tests' provider blocks use, at a
// ServiceAccount bound to examples/rbac/k8scidr-apply.yaml alone when K8SCIDR_TEST_RBAC is set
// (make testacc-rbac): the suite then proves that role is all the provider needs. Fixtures keep
// the admin client.
func asProvider(c *testcluster.Cluster) error {
	if os.Getenv("K8SCIDR_TEST_RBAC") == "" {
		return nil
	}
	kc, err := c.ServiceAccountKubeconfig(context.Background(), applyRole)
	if err != nil {
		return fmt.Errorf("the provider's ServiceAccount: %w", err)
	}
	c.Kubeconfig = kc
	return nil
}

// requireOwnCluster skips tests that need credentials of a cluster started by TestMain.
func requireOwnCluster(t *testing.T) {
	t.Helper()
	if testAccCluster.Token == "" && !isolatedRun {
		t.Skip("needs the self-started test cluster's credentials (K8SCIDR_TEST_KUBECONFIG is set)")
	}
}

const clusterInfoConfig = `
data "k8scidr_cluster_info" "this" {}
`

var serverVersionCheck = statecheck.ExpectKnownValue("data.k8scidr_cluster_info.this",
	tfjsonpath.New("server_version"), knownvalue.StringRegexp(regexp.MustCompile(`^v1\.\d+\.\d+`)))

// TestAccProvider_connectionSettings connects through each way a kubernetes provider block can
// name the cluster, and reads real data through it.
func TestAccProvider_connectionSettings(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := testAccCluster
	execPlugin := writeExecPlugin(t, c.Token)
	configs := map[string]string{
		"kubeconfig context with client certificate, as copied from a kubernetes provider block": fmt.Sprintf(`provider "k8scidr" {
  config_path            = %q
  config_context         = %q
  config_context_cluster = "k8scidr-test"
  ignore_annotations     = ["^example\\.com/.*"]
  ignore_labels          = ["^team$"]
}`, c.Kubeconfig, testcluster.ContextCert),
		"config_paths": fmt.Sprintf(`provider "k8scidr" {
  config_paths = [%q]
}`, c.Kubeconfig),
		"kubeconfig user through the oidc auth-provider plugin": fmt.Sprintf(`provider "k8scidr" {
  config_path    = %q
  config_context = %q
}`, c.Kubeconfig, testcluster.ContextOIDC),
		"hashicorp/kubernetes v2 block: experiments, an empty config_paths": fmt.Sprintf(`provider "k8scidr" {
  config_path    = %q
  config_paths   = []
  config_context = %q
  experiments {
    manifest_resource = true
  }
}`, c.Kubeconfig, testcluster.ContextToken),
		"host, token and CA": fmt.Sprintf(`provider "k8scidr" {
  host                   = %q
  token                  = %q
  cluster_ca_certificate = %q
  qps                    = 20
  burst                  = 40
  field_manager          = "migration-team"
  calico_api_group       = "auto"
}`, c.Host, c.Token, string(c.CACert)),
		"host and client certificate, insecure": fmt.Sprintf(`provider "k8scidr" {
  host               = %q
  client_certificate = %q
  client_key         = %q
  insecure           = true
}`, c.Host, string(c.ClientCert), string(c.ClientKey)),
		"exec credential plugin": fmt.Sprintf(`provider "k8scidr" {
  host                   = %q
  cluster_ca_certificate = %q
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %q
    args        = ["--cluster", "test"]
    env = {
      K8SCIDR_TEST = "1"
    }
  }
}`, c.Host, string(c.CACert), execPlugin),
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:            cfg + clusterInfoConfig,
					ConfigStateChecks: []statecheck.StateCheck{serverVersionCheck},
				}},
			})
		})
	}
}

// TestAccProvider_environment configures the provider from KUBE_* variables only.
func TestAccProvider_environment(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	t.Setenv("KUBE_HOST", testAccCluster.Host)
	t.Setenv("KUBE_TOKEN", testAccCluster.Token)
	t.Setenv("KUBE_CLUSTER_CA_CERT_DATA", string(testAccCluster.CACert))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:            `provider "k8scidr" {}` + clusterInfoConfig,
			ConfigStateChecks: []statecheck.StateCheck{serverVersionCheck},
		}},
	})
}

// TestAccProvider_mistakes checks that each configuration mistake is reported on its attribute
// with what to do.
func TestAccProvider_mistakes(t *testing.T) {
	testAccPreCheck(t)
	kc := testAccCluster.Kubeconfig
	tests := map[string]struct {
		config string
		want   string
	}{
		"missing kubeconfig": {`provider "k8scidr" {
  config_path = "/nonexistent/kubeconfig"
}`, `(?s)Kubeconfig File Not Found.*config_path.*Check the path`},
		"unknown context": {fmt.Sprintf(`provider "k8scidr" {
  config_path    = %q
  config_context = "production"
}`, kc), `(?s)Kubeconfig Context Not Found.*config_context.*no context named "production"`},
		"qps zero": {fmt.Sprintf(`provider "k8scidr" {
  config_path = %q
  qps         = 0
}`, kc), `(?s)Invalid Attribute Value.*qps.*at least 0.01`},
		"malformed host": {`provider "k8scidr" {
  host = "https://[::1"
}`, `(?s)Invalid Host.*host.*Use a URL such as`},
		"both config_path and config_paths": {fmt.Sprintf(`provider "k8scidr" {
  config_path  = %q
  config_paths = [%q]
}`, kc, kc), `(?s)Invalid Attribute Combination.*config_paths`},
		"unknown calico_api_group": {`provider "k8scidr" {
  calico_api_group = "projectcalico.org/v1"
}`, `(?s)calico_api_group.*value must be one of`},
		"no cluster at all": {`provider "k8scidr" {}`, `(?s)Kubernetes Cluster Not Configured.*set config_path`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, v := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_HOST", "KUBE_CTX"} {
				t.Setenv(v, "") // Restores the variable after the test.
				if err := os.Unsetenv(v); err != nil {
					t.Fatal(err)
				}
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      tt.config + clusterInfoConfig,
					ExpectError: regexp.MustCompile(tt.want),
				}},
			})
		})
	}
}

// writeExecPlugin writes a credential plugin that prints the token, the way aws or gke plugins do.
func writeExecPlugin(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token-plugin")
	script := strings.Join([]string{
		"#!/bin/sh",
		`[ "$K8SCIDR_TEST" = 1 ] && [ "$1 $2" = "--cluster test" ] || { echo "plugin called without its env or args" >&2; exit 1; }`,
		`printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' ` + token,
	}, "\n")
	if err := os.WriteFile(path, []byte(script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}
