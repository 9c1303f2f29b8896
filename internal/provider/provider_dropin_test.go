// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// otherProviders matches references to the cloud and kind resources hashicorp/kubernetes'
// examples take the cluster's address and credentials from.
var otherProviders = regexp.MustCompile(`\b(data\.)?(azurerm_kubernetes_cluster|kind_cluster|aws_eks_cluster_auth|aws_eks_cluster|google_container_cluster|google_client_config)\.([a-z_]+)\b`)

// TestAccProvider_kubernetesDocBlocks runs every provider block of hashicorp/kubernetes' own
// documentation and examples (testdata/kubernetes-provider-blocks, copied verbatim) through
// terraform validate and plan with only the provider name changed, and checks each reached the
// test cluster. What the blocks point at outside themselves is made to be the test cluster:
// the cloud resources they read become locals with the same attributes, the files they name
// exist in a temporary HOME, hosts written as literals are the test cluster's, and the `aws`
// of the EKS exec blocks is a script on PATH that prints the cluster's token.
func TestAccProvider_kubernetesDocBlocks(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := testAccCluster
	ns, err := c.Kube.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/kubernetes-provider-blocks/*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no provider blocks in testdata (%v)", err)
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	hostOnly := strings.TrimPrefix(c.Host, "https://")
	stand := map[string]string{
		"azurerm_kubernetes_cluster": fmt.Sprintf(`{ kube_config = [{ host = %q, client_certificate = %q, client_key = %q, cluster_ca_certificate = %q }] }`,
			c.Host, b64(c.ClientCert), b64(c.ClientKey), b64(c.CACert)),
		"kind_cluster": fmt.Sprintf(`{ endpoint = %q, cluster_ca_certificate = %q, client_certificate = %q, client_key = %q }`,
			c.Host, c.CACert, c.ClientCert, c.ClientKey),
		"aws_eks_cluster":          fmt.Sprintf(`{ endpoint = %q, certificate_authority = [{ data = %q }] }`, c.Host, b64(c.CACert)),
		"aws_eks_cluster_auth":     fmt.Sprintf(`{ token = %q }`, c.Token),
		"google_container_cluster": fmt.Sprintf(`{ endpoint = %q, master_auth = [{ cluster_ca_certificate = %q }] }`, hostOnly, b64(c.CACert)),
		"google_client_config":     fmt.Sprintf(`{ access_token = %q }`, c.Token),
	}
	variables := fmt.Sprintf(`
variable "cluster_endpoint" { default = %q }
variable "cluster_ca_cert" { default = %q }
variable "cluster_name" { default = "test" }
variable "kube_config_file" { default = %q }
data "k8scidr_cluster_info" "this" {}
output "cluster_id" { value = data.k8scidr_cluster_info.this.cluster_id }
`, c.Host, b64(c.CACert), c.Kubeconfig)

	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			home := docBlockHome(t, c.Kubeconfig, c.Token, c.ClientCert, c.ClientKey, c.CACert)
			block := strings.Replace(string(src), `provider "kubernetes"`, `provider "k8scidr"`, 1)
			for _, lit := range []string{"https://104.196.242.174", "https://cluster_endpoint:port"} {
				block = strings.ReplaceAll(block, lit, c.Host)
			}
			block = strings.NewReplacer(`"/my/kube/`, `"`+home+`/my/kube/`, `"/path/to/`, `"`+home+`/path/to/`).Replace(block)
			locals := map[string]string{}
			block = otherProviders.ReplaceAllStringFunc(block, func(ref string) string {
				m := otherProviders.FindStringSubmatch(ref)
				name := strings.TrimSuffix(m[1], ".") + "_" + m[2] + "_" + m[3]
				name = strings.TrimPrefix(name, "_")
				locals[name] = stand[m[2]]
				return "local." + name
			})
			var l strings.Builder
			for name, v := range locals {
				fmt.Fprintf(&l, "locals {\n  %s = %s\n}\n", name, v)
			}
			w := newCLIWorkspace(t, block+variables+l.String())
			w.env = append(w.env, "HOME="+home, "PATH="+home+"/bin:"+os.Getenv("PATH"))
			if !regexp.MustCompile(`\b(host|config_path|config_paths)\s*=`).MatchString(block) {
				// A block that names no cluster: the user's KUBE_CONFIG_PATH does.
				w.env = append(w.env, "KUBE_CONFIG_PATH="+c.Kubeconfig)
			}
			if out, err := w.run("validate"); err != nil {
				t.Fatalf("terraform validate:\n%s\n%s", block, out)
			}
			out, err := w.run("plan", "-input=false")
			if err != nil || !strings.Contains(out, fmt.Sprintf("cluster_id = %q", ns.UID)) {
				t.Fatalf("terraform plan (%v) did not read the test cluster %s:\n%s\n%s", err, ns.UID, block, out)
			}
			t.Logf("plans unchanged:\n%s", src)
		})
	}
}

// docBlockHome is a HOME holding what the documentation's blocks name: ~/.kube/config (with
// the context "my-context"), the PEM files, /path/to/config_{a,b}.yaml and /my/kube/config
// under it, and bin/aws, which prints the cluster's token as `aws eks get-token` would.
func docBlockHome(t *testing.T, kubeconfig, token string, cert, key, ca []byte) string {
	t.Helper()
	home := t.TempDir()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts["my-context"] = cfg.Contexts[cfg.CurrentContext]
	empty := *cfg
	empty.Contexts, empty.CurrentContext = nil, ""
	files := map[string][]byte{
		".kube/client-cert.pem":     cert,
		".kube/client-key.pem":      key,
		".kube/cluster-ca-cert.pem": ca,
		"bin/aws": []byte("#!/bin/sh\n[ \"$1 $2\" = \"eks get-token\" ] || exit 1\n" +
			`printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' ` + token + "\n"),
	}
	for _, f := range []string{".kube/config", "my/kube/config", "path/to/config_a.yaml"} {
		if files[f], err = clientcmd.Write(*cfg); err != nil {
			t.Fatal(err)
		}
	}
	if files["path/to/config_b.yaml"], err = clientcmd.Write(empty); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		path := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return home
}
