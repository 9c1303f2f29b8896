// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig with contexts "one" (current) and "two" on two clusters.
func writeKubeconfig(t *testing.T, name string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c1"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.Clusters["c2"] = &clientcmdapi.Cluster{Server: "https://127.0.0.2:6443", TLSServerName: "two.example"}
	cfg.AuthInfos["u1"] = &clientcmdapi.AuthInfo{Token: "token-one"}
	cfg.AuthInfos["u2"] = &clientcmdapi.AuthInfo{Token: "token-two"}
	cfg.Contexts["one"] = &clientcmdapi.Context{Cluster: "c1", AuthInfo: "u1"}
	cfg.Contexts["two"] = &clientcmdapi.Context{Cluster: "c2", AuthInfo: "u2"}
	cfg.CurrentContext = "one"
	path := filepath.Join(t.TempDir(), name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestRESTConfig_precedence(t *testing.T) {
	kc := writeKubeconfig(t, "config")
	tests := []struct {
		name      string
		cfg       ConnectionConfig
		env       map[string]string
		wantHost  string
		wantToken string
		wantQPS   float32
	}{
		{"current context", ConnectionConfig{ConfigPath: kc}, nil, "https://127.0.0.1:6443", "token-one", DefaultQPS},
		{"config_context", ConnectionConfig{ConfigPath: kc, ConfigContext: "two"}, nil, "https://127.0.0.2:6443", "token-two", DefaultQPS},
		{"auth info override", ConnectionConfig{ConfigPath: kc, ConfigContextAuthInfo: "u2"}, nil, "https://127.0.0.1:6443", "token-two", DefaultQPS},
		{"cluster override", ConnectionConfig{ConfigPath: kc, ConfigContextCluster: "c2"}, nil, "https://127.0.0.2:6443", "token-one", DefaultQPS},
		{"explicit host and token win over kubeconfig", ConnectionConfig{ConfigPath: kc, Host: "https://10.1.2.3:443", Token: "explicit"}, nil,
			"https://10.1.2.3:443", "explicit", DefaultQPS},
		{"KUBE_CONFIG_PATH and KUBE_CTX", ConnectionConfig{}, map[string]string{"KUBE_CONFIG_PATH": kc, "KUBE_CTX": "two"},
			"https://127.0.0.2:6443", "token-two", DefaultQPS},
		{"attribute beats environment", ConnectionConfig{ConfigPath: kc, ConfigContext: "one"}, map[string]string{"KUBE_CTX": "two"},
			"https://127.0.0.1:6443", "token-one", DefaultQPS},
		{"host only, from environment", ConnectionConfig{}, map[string]string{"KUBE_HOST": "https://127.0.0.9:8443", "KUBE_TOKEN": "env"},
			"https://127.0.0.9:8443", "env", DefaultQPS},
		{"host gets https with a CA", ConnectionConfig{Host: "127.0.0.9:8443", ClusterCACertificate: "pem"}, nil,
			"https://127.0.0.9:8443", "", DefaultQPS},
		{"qps", ConnectionConfig{ConfigPath: kc, QPS: 7, Burst: 9}, nil, "https://127.0.0.1:6443", "token-one", 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			if err := c.ApplyEnv(envMap(tt.env)); err != nil {
				t.Fatal(err)
			}
			rc, err := c.RESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tt.wantHost || rc.BearerToken != tt.wantToken || rc.QPS != tt.wantQPS {
				t.Errorf("got host %q token %q qps %v, want %q %q %v", rc.Host, rc.BearerToken, rc.QPS, tt.wantHost, tt.wantToken, tt.wantQPS)
			}
		})
	}
}

func TestRESTConfig_configPathsMerge(t *testing.T) {
	first := writeKubeconfig(t, "first")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c3"] = &clientcmdapi.Cluster{Server: "https://127.0.0.3:6443"}
	cfg.AuthInfos["u3"] = &clientcmdapi.AuthInfo{Token: "token-three"}
	cfg.Contexts["three"] = &clientcmdapi.Context{Cluster: "c3", AuthInfo: "u3"}
	second := filepath.Join(t.TempDir(), "second")
	if err := clientcmd.WriteToFile(*cfg, second); err != nil {
		t.Fatal(err)
	}
	c := ConnectionConfig{}
	if err := c.ApplyEnv(envMap(map[string]string{"KUBE_CONFIG_PATHS": first + string(os.PathListSeparator) + second, "KUBE_CTX": "three"})); err != nil {
		t.Fatal(err)
	}
	rc, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.3:6443" || rc.BearerToken != "token-three" {
		t.Errorf("merged config gave host %q token %q", rc.Host, rc.BearerToken)
	}
}

func TestRESTConfig_noImplicitKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "config"))
	c := ConnectionConfig{}
	_, err := c.RESTConfig()
	if !errors.Is(err, ErrNoConfiguration) {
		t.Fatalf("got %v, want ErrNoConfiguration: KUBECONFIG must not be read implicitly", err)
	}
}

func TestRESTConfig_mistakes(t *testing.T) {
	kc := writeKubeconfig(t, "config")
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name      string
		cfg       ConnectionConfig
		env       map[string]string
		attribute string
		index     int
		detail    string
	}{
		{"missing config_path", ConnectionConfig{ConfigPath: missing}, nil, "config_path", -1, "Cannot read the kubeconfig file"},
		{"missing KUBE_CONFIG_PATH", ConnectionConfig{}, map[string]string{"KUBE_CONFIG_PATH": missing}, "config_path", -1, "KUBE_CONFIG_PATH"},
		{"missing second config_paths entry", ConnectionConfig{ConfigPaths: []string{kc, missing}}, nil, "config_paths", 1, missing},
		{"unknown context", ConnectionConfig{ConfigPath: kc, ConfigContext: "three"}, nil, "config_context", -1, `no context named "three" (known: one, two)`},
		{"unknown user", ConnectionConfig{ConfigPath: kc, ConfigContextAuthInfo: "u9"}, nil, "config_context_auth_info", -1, `no user named "u9"`},
		{"unknown cluster", ConnectionConfig{ConfigPath: kc, ConfigContextCluster: "c9"}, nil, "config_context_cluster", -1, `no cluster named "c9"`},
		{"malformed host", ConnectionConfig{Host: "https://[::1"}, nil, "host", -1, "not a usable Kubernetes API server address"},
		{"host with a path but no scheme", ConnectionConfig{Host: "example.com/path"}, nil, "host", -1, "not a usable"},
		{"host with an odd scheme", ConnectionConfig{Host: "ftp://example.com"}, nil, "host", -1, "scheme must be https or http"},
		{"bad KUBE_INSECURE", ConnectionConfig{}, map[string]string{"KUBE_INSECURE": "maybe"}, "insecure", -1, "not a boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			err := c.ApplyEnv(envMap(tt.env))
			if err == nil {
				_, err = c.RESTConfig()
			}
			var f Finding
			if !errors.As(err, &f) {
				t.Fatalf("got %v, want a Finding", err)
			}
			want := At(tt.attribute)
			if tt.index >= 0 {
				want = want.Index(tt.index)
			}
			if f.Path.String() != want.String() || !strings.Contains(f.Detail, tt.detail) {
				t.Errorf("got %s %q, want %s containing %q", f.Path, f.Detail, want, tt.detail)
			}
		})
	}
}

func TestRESTConfig_exec(t *testing.T) {
	c := ConnectionConfig{Host: "https://127.0.0.1:6443", Exec: &ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1beta1", Command: "aws", Args: []string{"eks", "get-token"},
		Env: map[string]string{"AWS_PROFILE": "prod"},
	}}
	rc, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	e := rc.ExecProvider
	if e == nil || e.Command != "aws" || len(e.Args) != 2 || len(e.Env) != 1 || e.Env[0].Name != "AWS_PROFILE" || e.Env[0].Value != "prod" {
		t.Errorf("exec provider not carried over: %+v", e)
	}
}

func TestApplyEnv_explicitWins(t *testing.T) {
	insecure := false
	c := ConnectionConfig{Host: "https://a", Insecure: &insecure}
	if err := c.ApplyEnv(envMap(map[string]string{"KUBE_HOST": "https://b", "KUBE_INSECURE": "true", "KUBE_TOKEN": "t"})); err != nil {
		t.Fatal(err)
	}
	if c.Host != "https://a" || *c.Insecure || c.Token != "t" {
		t.Errorf("got host %q insecure %v token %q", c.Host, *c.Insecure, c.Token)
	}
}

func TestRESTConfig_incompleteCredentialsNameNoSingleAttribute(t *testing.T) {
	c := ConnectionConfig{Host: "https://127.0.0.1:6443", ClientCertificate: "cert without a key"}
	_, err := c.RESTConfig()
	var f Finding
	if !errors.As(err, &f) || len(f.Path.Steps) != 0 || !strings.Contains(f.Detail, "client-key") {
		t.Fatalf("got %#v, want a Finding on no single attribute that mentions the missing key", err)
	}
}
