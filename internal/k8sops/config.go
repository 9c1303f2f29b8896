// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Connection settings, resolved the way the hashicorp/kubernetes provider v2 resolves them.
package k8sops

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Defaults for the client-side rate limit: client-go's 5/10 would make a migration of a
// thousand Services take minutes of self-inflicted waiting.
const (
	DefaultQPS          = 50
	DefaultBurst        = 100
	DefaultFieldManager = "k8scidr"
)

// ConnectionConfig holds what a provider block (or its KUBE_* environment) says about how to
// reach the cluster. Empty strings and nil pointers mean "not set".
type ConnectionConfig struct {
	ConfigPath            string
	ConfigPaths           []string
	ConfigContext         string
	ConfigContextAuthInfo string
	ConfigContextCluster  string
	Host                  string
	Username              string
	Password              string
	Token                 string
	ClientCertificate     string
	ClientKey             string
	ClusterCACertificate  string
	Insecure              *bool
	TLSServerName         string
	ProxyURL              string
	Exec                  *ExecConfig
	QPS                   float32
	Burst                 int

	// InCluster is set by RESTConfig when nothing named a cluster and client-go fell back to the
	// service account of the pod the provider runs in.
	InCluster bool
}

// ExecConfig is a client-go credential plugin.
type ExecConfig struct {
	APIVersion string
	Command    string
	Args       []string
	Env        map[string]string
}

// ErrNoConfiguration means neither a kubeconfig nor a host was given. It is not an error at
// configure time: plans that need no cluster still work.
var ErrNoConfiguration = errors.New("no Kubernetes cluster is configured: set config_path (or KUBE_CONFIG_PATH), " +
	"config_paths (or KUBE_CONFIG_PATHS), or host (or KUBE_HOST) with credentials in the provider block")

// Environment variables, as the hashicorp/kubernetes provider names them.
var envVars = []struct {
	name  string
	field func(*ConnectionConfig) *string
}{
	{"KUBE_CONFIG_PATH", func(c *ConnectionConfig) *string { return &c.ConfigPath }},
	{"KUBE_CTX", func(c *ConnectionConfig) *string { return &c.ConfigContext }},
	{"KUBE_CTX_AUTH_INFO", func(c *ConnectionConfig) *string { return &c.ConfigContextAuthInfo }},
	{"KUBE_CTX_CLUSTER", func(c *ConnectionConfig) *string { return &c.ConfigContextCluster }},
	{"KUBE_HOST", func(c *ConnectionConfig) *string { return &c.Host }},
	{"KUBE_USER", func(c *ConnectionConfig) *string { return &c.Username }},
	{"KUBE_PASSWORD", func(c *ConnectionConfig) *string { return &c.Password }},
	{"KUBE_TOKEN", func(c *ConnectionConfig) *string { return &c.Token }},
	{"KUBE_CLIENT_CERT_DATA", func(c *ConnectionConfig) *string { return &c.ClientCertificate }},
	{"KUBE_CLIENT_KEY_DATA", func(c *ConnectionConfig) *string { return &c.ClientKey }},
	{"KUBE_CLUSTER_CA_CERT_DATA", func(c *ConnectionConfig) *string { return &c.ClusterCACertificate }},
	{"KUBE_TLS_SERVER_NAME", func(c *ConnectionConfig) *string { return &c.TLSServerName }},
	{"KUBE_PROXY_URL", func(c *ConnectionConfig) *string { return &c.ProxyURL }},
}

// ApplyEnv fills every unset setting from its KUBE_* environment variable. Explicit settings win.
func (c *ConnectionConfig) ApplyEnv(lookup func(string) (string, bool)) error {
	for _, e := range envVars {
		if f := e.field(c); *f == "" {
			if v, ok := lookup(e.name); ok {
				*f = v
			}
		}
	}
	if len(c.ConfigPaths) == 0 && c.ConfigPath == "" {
		if v, ok := lookup("KUBE_CONFIG_PATHS"); ok && v != "" {
			c.ConfigPaths = filepath.SplitList(v)
		}
	}
	if c.Insecure == nil {
		if v, ok := lookup("KUBE_INSECURE"); ok && v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Finding{Path: At("insecure"), Summary: "Invalid KUBE_INSECURE",
					Detail: fmt.Sprintf("KUBE_INSECURE=%q is not a boolean: set it to true or false, or unset it.", v)}
			}
			c.Insecure = &b
		}
	}
	return nil
}

// RESTConfig builds the client configuration. It reads kubeconfig files but never contacts the
// cluster. It returns ErrNoConfiguration when nothing says where the cluster is.
func (c *ConnectionConfig) RESTConfig() (*rest.Config, error) {
	loader, err := c.loadingRules()
	if err != nil {
		return nil, err
	}
	overrides, err := c.overrides(loader.ExplicitPath != "" || len(loader.Precedence) > 0)
	if err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loader, overrides)
	if err := checkKubeconfigNames(cc, overrides); err != nil {
		return nil, err
	}
	named := loader.ExplicitPath != "" || len(loader.Precedence) > 0 || c.Host != ""
	cfg, err := cc.ClientConfig()
	// Nothing named a cluster, yet a configuration came: client-go's in-cluster fallback.
	c.InCluster = err == nil && !named
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, ErrNoConfiguration
		}
		return nil, Finding{Summary: "Invalid Kubernetes Client Configuration",
			Detail: "The kubeconfig and provider settings together do not form a usable client configuration: " + err.Error() +
				". Check the kubeconfig entry in use and the connection attributes that override it."}
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	return cfg, nil
}

// loadingRules names the kubeconfig files to read: config_path, else config_paths. No file is
// read implicitly (no ~/.kube/config, no KUBECONFIG), as in hashicorp/kubernetes v2.
func (c *ConnectionConfig) loadingRules() (*clientcmd.ClientConfigLoadingRules, error) {
	loader := &clientcmd.ClientConfigLoadingRules{}
	attr, paths := "config_path", []string{c.ConfigPath}
	if c.ConfigPath == "" {
		attr, paths = "config_paths", c.ConfigPaths
	}
	if len(paths) == 0 {
		return loader, nil
	}
	expanded := make([]string, 0, len(paths))
	for i, p := range paths {
		p = expandHome(p)
		if _, err := os.Stat(p); err != nil {
			at := At(attr)
			if attr == "config_paths" {
				at = at.Index(i)
			}
			return nil, Finding{Path: at, Summary: "Kubeconfig File Not Found",
				Detail: fmt.Sprintf("Cannot read the kubeconfig file %q: %v. Check the path (it may also come from "+
					"KUBE_CONFIG_PATH or KUBE_CONFIG_PATHS), or remove the setting and configure host and credentials instead.", p, err)}
		}
		expanded = append(expanded, p)
	}
	if len(expanded) == 1 {
		loader.ExplicitPath = expanded[0]
	} else {
		loader.Precedence = expanded
	}
	return loader, nil
}

// overrides carries the explicit settings, which take precedence over kubeconfig values.
// Context selection applies only when a kubeconfig is named.
func (c *ConnectionConfig) overrides(haveKubeconfig bool) (*clientcmd.ConfigOverrides, error) {
	o := &clientcmd.ConfigOverrides{}
	if haveKubeconfig {
		o.CurrentContext = c.ConfigContext
		o.Context.AuthInfo = c.ConfigContextAuthInfo
		o.Context.Cluster = c.ConfigContextCluster
	}
	if c.Insecure != nil {
		o.ClusterInfo.InsecureSkipTLSVerify = *c.Insecure
	}
	o.ClusterInfo.TLSServerName = c.TLSServerName
	o.ClusterInfo.CertificateAuthorityData = []byte(c.ClusterCACertificate)
	o.AuthInfo.ClientCertificateData = []byte(c.ClientCertificate)
	o.AuthInfo.ClientKeyData = []byte(c.ClientKey)
	o.AuthInfo.Username = c.Username
	o.AuthInfo.Password = c.Password
	o.AuthInfo.Token = c.Token
	o.ClusterDefaults.ProxyURL = c.ProxyURL
	if c.Host != "" {
		// Overrides are applied after client-go picks a default scheme, so resolve it here the way
		// client-go would: https when TLS material is given.
		defaultTLS := (c.ClusterCACertificate != "" || c.ClientCertificate != "") && !o.ClusterInfo.InsecureSkipTLSVerify
		u, err := ParseHost(c.Host, defaultTLS)
		if err != nil {
			return nil, err
		}
		o.ClusterInfo.Server = u
	}
	if c.Exec != nil {
		e := &clientcmdapi.ExecConfig{
			APIVersion:      c.Exec.APIVersion,
			Command:         c.Exec.Command,
			Args:            c.Exec.Args,
			InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
		}
		for k, v := range c.Exec.Env {
			e.Env = append(e.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
		}
		o.AuthInfo.Exec = e
	}
	return o, nil
}

// ParseHost validates a host setting and returns the server URL client-go will use.
func ParseHost(host string, defaultTLS bool) (string, error) {
	u, _, err := rest.DefaultServerURL(host, "", schema.GroupVersion{}, defaultTLS)
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "") {
		err = fmt.Errorf("scheme must be https or http and a host name or address must be present")
	}
	if err != nil {
		return "", Finding{Path: At("host"), Summary: "Invalid Host",
			Detail: fmt.Sprintf("%q is not a usable Kubernetes API server address (%v). Use a URL such as "+
				"https://203.0.113.10:6443 or a host:port pair.", host, err)}
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), nil
}

// checkKubeconfigNames reports a context, cluster or user named in the provider block (or the
// kubeconfig's own current-context) that the kubeconfig files do not contain, before client-go
// turns it into a less specific message.
func checkKubeconfigNames(cc clientcmd.ClientConfig, o *clientcmd.ConfigOverrides) error {
	raw, err := cc.RawConfig()
	if err != nil {
		return Finding{Path: At("config_path"), Summary: "Invalid Kubeconfig",
			Detail: "The kubeconfig file could not be parsed: " + err.Error()}
	}
	context, whose := o.CurrentContext, ""
	if context == "" {
		context, whose = raw.CurrentContext, " (the kubeconfig's current-context)"
	}
	checks := []struct {
		attr, name, kind string
		known            []string
	}{
		{"config_context", context, "context", slices.Sorted(maps.Keys(raw.Contexts))},
		{"config_context_auth_info", o.Context.AuthInfo, "user", slices.Sorted(maps.Keys(raw.AuthInfos))},
		{"config_context_cluster", o.Context.Cluster, "cluster", slices.Sorted(maps.Keys(raw.Clusters))},
	}
	for _, ch := range checks {
		if ch.name == "" || slices.Contains(ch.known, ch.name) {
			continue
		}
		known := strings.Join(ch.known, ", ")
		if known == "" {
			known = "none"
		}
		return Finding{Path: At(ch.attr), Summary: "Kubeconfig " + strings.ToUpper(ch.kind[:1]) + ch.kind[1:] + " Not Found",
			Detail: fmt.Sprintf("The kubeconfig has no %s named %q%s (known: %s). Set %s to one of them.",
				ch.kind, ch.name, map[bool]string{true: whose}[ch.kind == "context"], known, ch.attr)}
	}
	return nil
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}
