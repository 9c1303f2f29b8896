// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The k8scidr provider: schema, configuration and the client handed to resources.
package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

var (
	_ provider.Provider                   = (*k8scidrProvider)(nil)
	_ provider.ProviderWithValidateConfig = (*k8scidrProvider)(nil)
	_ provider.ProviderWithFunctions      = (*k8scidrProvider)(nil)
)

type k8scidrProvider struct {
	version string
}

// New returns the provider factory that providerserver.Serve and the tests use.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &k8scidrProvider{version: version} }
}

func (p *k8scidrProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "k8scidr"
	resp.Version = p.version
}

func (p *k8scidrProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	str := func(desc string, sensitive bool) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Sensitive: sensitive, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Moves a live Kubernetes cluster's Service and pod CIDRs, stage by stage. " +
			"The connection attributes and `KUBE_*` environment variables are those of the `hashicorp/kubernetes` provider, " +
			"so an existing `kubernetes` provider block can be copied unchanged.",
		Attributes: map[string]schema.Attribute{
			"config_path": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Path to the kubeconfig file. Environment: `KUBE_CONFIG_PATH`. No kubeconfig is read unless named here or in `config_paths`. " +
					"Unset, `KUBE_CONFIG_PATH` applies, else `config_paths`.",
			},
			"config_paths": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				MarkdownDescription: "Paths to kubeconfig files, merged as `KUBECONFIG` would be. Environment: `KUBE_CONFIG_PATHS` (separated like `PATH`). " +
					"An empty list is the same as leaving it unset, as in `hashicorp/kubernetes`; a non-empty list conflicts with `config_path`. " +
					"Unset, `KUBE_CONFIG_PATHS` applies when neither `config_path` nor `KUBE_CONFIG_PATH` names a file.",
				Validators: []validator.List{noNulls("must be a kubeconfig file's path")},
			},
			"config_context": str("Context to use from the kubeconfig. Environment: `KUBE_CTX`. Unset, `KUBE_CTX` applies, else the kubeconfig's `current-context`.", false),
			"config_context_auth_info": str("User (auth info) to use from the kubeconfig. Environment: `KUBE_CTX_AUTH_INFO`. "+
				"Unset, `KUBE_CTX_AUTH_INFO` applies, else the user the context names.", false),
			"config_context_cluster": str("Cluster to use from the kubeconfig. Environment: `KUBE_CTX_CLUSTER`. "+
				"Unset, `KUBE_CTX_CLUSTER` applies, else the cluster the context names.", false),
			"host": str("API server address (`https://host:port`). Overrides the kubeconfig. Environment: `KUBE_HOST`. "+
				"Unset, `KUBE_HOST` applies, else the kubeconfig cluster's `server`; with no kubeconfig either, the provider "+
				"uses the service account of the pod it runs in, if it runs in one.", false),
			"username": str("Username for HTTP basic authentication. Environment: `KUBE_USER`. Unset, `KUBE_USER` applies, else the kubeconfig user's, if any.", false),
			"password": str("Password for HTTP basic authentication. Environment: `KUBE_PASSWORD`. Unset, `KUBE_PASSWORD` applies, else the kubeconfig user's, if any.", true),
			"token":    str("Bearer token. Environment: `KUBE_TOKEN`. Unset, `KUBE_TOKEN` applies, else the kubeconfig user's, if any.", true),
			"client_certificate": str("PEM-encoded client certificate. Environment: `KUBE_CLIENT_CERT_DATA`. "+
				"Unset, `KUBE_CLIENT_CERT_DATA` applies, else the kubeconfig user's, if any.", false),
			"client_key": str("PEM-encoded client certificate key. Environment: `KUBE_CLIENT_KEY_DATA`. "+
				"Unset, `KUBE_CLIENT_KEY_DATA` applies, else the kubeconfig user's, if any.", true),
			"cluster_ca_certificate": str("PEM-encoded root certificates for the API server. Environment: `KUBE_CLUSTER_CA_CERT_DATA`. "+
				"Unset, `KUBE_CLUSTER_CA_CERT_DATA` applies, else the kubeconfig cluster's, else the system's root certificates.", false),
			"insecure": schema.BoolAttribute{
				Optional: true,
				MarkdownDescription: "Skip verification of the API server's certificate. Environment: `KUBE_INSECURE`. Unset, `KUBE_INSECURE` " +
					"applies, else the kubeconfig cluster's `insecure-skip-tls-verify` (which `false` here does not turn off), else `false`.",
			},
			"tls_server_name": str("Server name for SNI and certificate verification. Environment: `KUBE_TLS_SERVER_NAME`. "+
				"Unset, `KUBE_TLS_SERVER_NAME` applies, else the kubeconfig cluster's `tls-server-name` (not when `host` is set), "+
				"else the host name of the server address.", false),
			"proxy_url": str("URL of the proxy for all API requests. Environment: `KUBE_PROXY_URL`. Unset, `KUBE_PROXY_URL` applies, "+
				"else the provider process's `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` environment; a kubeconfig cluster's `proxy-url` "+
				"wins over all three.", false),
			"qps": schema.Float64Attribute{
				Optional:            true,
				MarkdownDescription: fmt.Sprintf("Client-side rate limit, in requests per second. Default `%d`.", k8sops.DefaultQPS),
				Validators:          []validator.Float64{float64validator.AtLeast(0.01)},
			},
			"burst": schema.Int64Attribute{
				Optional:            true,
				MarkdownDescription: fmt.Sprintf("Client-side burst above `qps`. Default `%d`.", k8sops.DefaultBurst),
				Validators:          []validator.Int64{int64validator.AtLeast(1)},
			},
			"calico_api_group": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Calico API group: `auto` (`projectcalico.org/v3` when served, else the `crd.projectcalico.org/v1` " +
					"CRDs), `projectcalico.org/v3` or `crd.projectcalico.org/v1`. Default `auto`.",
				Validators: []validator.String{stringvalidator.OneOf(k8sops.CalicoAPIGroups...)},
			},
			"ignore_annotations": compatibilityList("ignore_annotations"),
			"ignore_labels":      compatibilityList("ignore_labels"),
			"cluster_id": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "The only cluster this configuration may touch: `k8scidr_cluster_info`'s `cluster_id` (the UID " +
					"of the cluster's `kube-system` namespace). Set, the provider confirms the identity before any read or write " +
					"and fails, touching nothing, on any other cluster (a wrong kubeconfig context, a CI runner's own cluster). " +
					"Environment: `K8SCIDR_CLUSTER_ID`. Default: not checked.",
			},
			"field_manager": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: fmt.Sprintf("Field manager name written to `managedFields`. Default `%s`.", k8sops.DefaultFieldManager),
				Validators:          []validator.String{stringvalidator.LengthBetween(1, 128)},
			},
		},
		Blocks: map[string]schema.Block{
			// Accepted as in hashicorp/kubernetes v2, so that its provider blocks work unchanged.
			"experiments": schema.ListNestedBlock{
				MarkdownDescription: "Accepted so that a `hashicorp/kubernetes` provider block can be copied unchanged; it has no effect here. " +
					"Unset and set behave the same.",
				Validators: []validator.List{listvalidator.SizeAtMost(1)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"manifest_resource": schema.BoolAttribute{Optional: true,
						MarkdownDescription: "`hashicorp/kubernetes`' switch for its `kubernetes_manifest` resource; no effect here. Unset and set behave the same."},
				}},
			},
			// A list of at most one, as in hashicorp/kubernetes, so that its required attributes
			// are required only when the block is written.
			"exec": schema.ListNestedBlock{
				MarkdownDescription: "Credential plugin, as in a kubeconfig `exec` section. Unset, the kubeconfig user's `exec` section applies, if any.",
				Validators:          []validator.List{listvalidator.SizeAtMost(1)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{Required: true, MarkdownDescription: "API version of the ExecCredential, e.g. `client.authentication.k8s.io/v1beta1`."},
					"command":     schema.StringAttribute{Required: true, MarkdownDescription: "Command to run."},
					"args": schema.ListAttribute{ElementType: types.StringType, Optional: true,
						MarkdownDescription: "Arguments. Unset, the command runs with none.",
						Validators:          []validator.List{noNulls("must be a string")}},
					"env": schema.MapAttribute{ElementType: types.StringType, Optional: true, Sensitive: true,
						MarkdownDescription: "Extra environment variables (sensitive: they often carry credentials). Unset, the command " +
							"gets the provider process's environment with nothing added.",
						Validators: []validator.Map{noNulls("must be a string")}},
				}},
			},
		},
	}
}

// compatibilityList accepts a hashicorp/kubernetes setting that has no meaning here, so that a
// copied provider block works unchanged.
func compatibilityList(name string) schema.ListAttribute {
	return schema.ListAttribute{
		ElementType: types.StringType,
		Optional:    true,
		MarkdownDescription: fmt.Sprintf("Accepted so that a `hashicorp/kubernetes` provider block can be copied unchanged. "+
			"This provider manages no labels or annotations that could be ignored, so `%s` has no effect. Unset and set behave the same.", name),
		Validators: []validator.List{noNulls("must be a string")},
	}
}

// ValidateConfig checks what can be checked without a cluster, so mistakes show at plan.
func (p *k8scidrProvider) ValidateConfig(ctx context.Context, req provider.ValidateConfigRequest, resp *provider.ValidateConfigResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !m.Host.IsNull() && !m.Host.IsUnknown() {
		if _, err := k8sops.ParseHost(m.Host.ValueString(), false); err != nil {
			addConfigError(&resp.Diagnostics, err)
		}
	}
	if !m.ConfigPath.IsNull() && len(m.ConfigPaths.Elements()) > 0 {
		resp.Diagnostics.AddAttributeError(path.Root("config_paths"), "Invalid Attribute Combination",
			"config_path and a non-empty config_paths cannot both be set: name one kubeconfig in config_path, or all of them in config_paths.")
	}
	if len(m.Exec) == 1 && m.Exec[0].APIVersion.ValueString() == "client.authentication.k8s.io/v1alpha1" {
		resp.Diagnostics.AddAttributeWarning(path.Root("exec").AtListIndex(0).AtName("api_version"), "Deprecated Exec API Version",
			"client.authentication.k8s.io/v1alpha1 is no longer supported by client-go: use client.authentication.k8s.io/v1beta1 or v1.")
	}
}

func (p *k8scidrProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	data := &providerData{}
	resp.DataSourceData, resp.ResourceData = data, data
	if !req.Config.Raw.IsFullyKnown() {
		data.err = errors.New("the provider configuration depends on values that are not known until apply; " +
			"apply the resources it depends on first (e.g. with -target)")
		return
	}
	conn, diags := m.connectionConfig(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := conn.ApplyEnv(os.LookupEnv); err != nil {
		addConfigError(&resp.Diagnostics, err)
		return
	}
	cfg, err := conn.RESTConfig()
	if errors.Is(err, k8sops.ErrNoConfiguration) {
		data.err = err
		return
	}
	if err != nil {
		addConfigError(&resp.Diagnostics, err)
		return
	}
	cfg.UserAgent = "terraform-provider-k8scidr/" + p.version
	data.client, err = k8sops.NewClient(cfg, m.FieldManager.ValueString(), m.CalicoAPIGroup.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Kubernetes Client Not Built", apiErrorText(err))
		return
	}
	want := stringOr(m.ClusterID, os.Getenv("K8SCIDR_CLUSTER_ID"))
	if conn.InCluster && want == "" {
		id, err := k8sops.ClusterID(ctx, data.client)
		if err != nil {
			id = "unknown: " + apiErrorText(err)
		}
		resp.Diagnostics.AddWarning("In-Cluster Credentials Used",
			fmt.Sprintf("The provider block names no cluster (no kubeconfig, no host), so the provider uses the service account "+
				"of the pod it runs in and reached the cluster at %s (cluster_id %s). If that is the cluster to migrate, set "+
				"cluster_id = %q in the provider block to say so; otherwise name the cluster with config_path or host.", cfg.Host, id, id))
	}
	if want != "" {
		if err := k8sops.CheckClusterID(ctx, data.client, want); err != nil {
			data.client, data.err = nil, err
			if wrong := (k8sops.WrongClusterError{}); errors.As(err, &wrong) {
				resp.Diagnostics.AddAttributeError(path.Root("cluster_id"), "Wrong Cluster", err.Error()+".")
			}
			return
		}
	}
	// TF_LOG=DEBUG (or TF_LOG_PROVIDER): one line per API request, never a header or a body.
	data.client.TraceRequests(func(ctx context.Context, r k8sops.APIRequest) {
		fields := map[string]any{"verb": r.Verb, "path": r.Path, "status": r.Status, "duration_ms": r.Duration.Milliseconds(), "retries": r.Retries}
		if r.Err != "" {
			fields["error"] = r.Err
		}
		tflog.Debug(ctx, "Kubernetes API request", fields)
	})
	tflog.Debug(ctx, "configured Kubernetes client", map[string]any{"host": cfg.Host, "qps": cfg.QPS, "burst": cfg.Burst})
}

func (p *k8scidrProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newServiceCIDRResource,
		newServiceRecreationResource,
		newCalicoIPPoolResource,
		newWorkloadRollResource,
		newServiceCIDRPolicyResource,
		newAPIServerServiceResource,
		newPodCanaryResource,
	}
}

// Functions are the plan-time CIDR helpers and the kOps spec values they lead to.
func (p *k8scidrProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{newCIDROverlapsFunction, newCIDRContainsFunction, newCIDRMapOffsetFunction, newKopsNetworkingFunction}
}

func (p *k8scidrProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		newClusterInfoDataSource,
		newServiceCIDRsDataSource,
		newServiceAllocationsDataSource,
		newCalicoIPPoolsDataSource,
		newPodAllocationsDataSource,
		newNetworkOverlapsDataSource,
		newPreflightDataSource,
		newLoadBalancersDataSource,
		newServiceMovesDataSource,
		newWorkloadRestartsDataSource,
	}
}

// providerData is what resources and data sources receive. A provider block that names no
// cluster still configures, so that plans needing no cluster work; err says why there is no client.
type providerData struct {
	client *k8sops.Client
	err    error
	// plannedPools are the Calico pools this run plans enabled, by name: a pool disabled or
	// destroyed in the same run counts them as what is left (CheckPoolsLeft). Terraform plans
	// a resource after those it depends on, so a disable ordered after the new pool sees it.
	plannedPools sync.Map
	// poolsGoing are the Calico pools this run plans to disable or delete, by name: each counts
	// the others out of what is left. A pool records itself before it checks, so of two that go
	// at once at least the one checked second sees the other. poolOut serialises the applies
	// that take a pool out of service: each re-lists the live pools after taking it.
	poolsGoing sync.Map
	poolOut    sync.Mutex
	// dnsBridgeOff is set once a k8scidr_service_moves of this run planned with dns_bridge =
	// false: the DNS bridge goes in this run, and a range only it holds may go with it.
	dnsBridgeOff atomic.Bool
	// plannedRanges are the ServiceCIDRs this run plans to create, by name: a recreation
	// planned after them (depends_on) counts them Ready, as its apply, which re-checks live,
	// will find them. Its plan then warns only of what no range of the run serves.
	plannedRanges sync.Map
}

// rangesWithPlanned are the live ServiceCIDRs with those this run plans to create, Ready.
func (d *providerData) rangesWithPlanned(live []k8sops.ServiceCIDR) []k8sops.ServiceCIDR {
	out := slices.Clone(live)
	d.plannedRanges.Range(func(_, v any) bool {
		if sc, _ := v.(k8sops.ServiceCIDR); !slices.ContainsFunc(out, func(o k8sops.ServiceCIDR) bool { return o.Name == sc.Name }) {
			out = append(out, sc)
		}
		return true
	})
	return out
}

// poolsLeft are the live pools with those this run plans enabled in their place, and those it
// plans to disable or delete (poolsGoing) disabled.
func (d *providerData) poolsLeft(live []calico.IPPool) []calico.IPPool {
	out := slices.Clone(live)
	d.plannedPools.Range(func(_, v any) bool {
		p, _ := v.(calico.IPPool)
		if i := slices.IndexFunc(out, func(o calico.IPPool) bool { return o.Name == p.Name }); i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
		return true
	})
	for i, p := range out {
		if _, going := d.poolsGoing.Load(p.Name); going {
			if _, replaced := d.plannedPools.Load(p.Name); !replaced { // a replacement pool of that name stays
				out[i].Settings.Disabled = true
			}
		}
	}
	return out
}

// Client returns the cluster client, or a diagnostic saying why there is none.
func (d *providerData) Client() (*k8sops.Client, diag.Diagnostics) {
	var diags diag.Diagnostics
	switch {
	case d == nil:
		diags.AddError("Provider Not Configured", "The k8scidr provider was not configured before this operation. "+
			"Please report this issue to the provider developers.")
		return nil, diags
	case d.client == nil:
		diags.AddError("Kubernetes Cluster Not Configured", "This operation needs the cluster, but "+d.err.Error()+".")
	}
	return d.client, diags
}

// begin starts an operation: the client, and ctx bounded by the operation's timeout (def unless
// the timeouts block says otherwise). The client is nil when diags has an error.
func (d *providerData) begin(ctx context.Context, timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics),
	def time.Duration, diags *diag.Diagnostics) (*k8sops.Client, context.Context, context.CancelFunc) {
	client, dd := d.Client()
	diags.Append(dd...)
	t, dd := timeout(ctx, def)
	diags.Append(dd...)
	if diags.HasError() {
		return nil, ctx, func() {}
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	return client, ctx, cancel
}

// providerDataFrom is the checked type assertion every resource's Configure makes.
func providerDataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil // The provider is not configured yet (validation, early plan).
	}
	pd, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected Resource Configure Type",
			fmt.Sprintf("Expected *providerData, got: %T. Please report this issue to the provider developers.", data))
	}
	return pd
}

// addConfigError turns a k8sops configuration error into a diagnostic on its attribute.
func addConfigError(diags *diag.Diagnostics, err error) {
	if !addFindingError(diags, err) {
		diags.AddError("Invalid Provider Configuration", apiErrorText(err))
	}
}

// addFindingError adds err as an error on its attribute when it is a k8sops.Finding, and says
// whether it was one; the caller words any other error itself.
func addFindingError(diags *diag.Diagnostics, err error) bool {
	var f k8sops.Finding
	if !errors.As(err, &f) {
		return false
	}
	addFindings(diags, []k8sops.Finding{f}, true)
	return true
}

func (m providerModel) connectionConfig(ctx context.Context) (k8sops.ConnectionConfig, diag.Diagnostics) {
	var diags diag.Diagnostics
	c := k8sops.ConnectionConfig{
		ConfigPath:            m.ConfigPath.ValueString(),
		ConfigContext:         m.ConfigContext.ValueString(),
		ConfigContextAuthInfo: m.ConfigContextAuthInfo.ValueString(),
		ConfigContextCluster:  m.ConfigContextCluster.ValueString(),
		Host:                  m.Host.ValueString(),
		Username:              m.Username.ValueString(),
		Password:              m.Password.ValueString(),
		Token:                 m.Token.ValueString(),
		ClientCertificate:     m.ClientCertificate.ValueString(),
		ClientKey:             m.ClientKey.ValueString(),
		ClusterCACertificate:  m.ClusterCACertificate.ValueString(),
		Insecure:              m.Insecure.ValueBoolPointer(),
		TLSServerName:         m.TLSServerName.ValueString(),
		ProxyURL:              m.ProxyURL.ValueString(),
		QPS:                   float32(m.QPS.ValueFloat64()),
		Burst:                 int(m.Burst.ValueInt64()),
	}
	diags.Append(m.ConfigPaths.ElementsAs(ctx, &c.ConfigPaths, false)...)
	for _, e := range m.Exec {
		c.Exec = &k8sops.ExecConfig{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString()}
		diags.Append(e.Args.ElementsAs(ctx, &c.Exec.Args, false)...)
		diags.Append(e.Env.ElementsAs(ctx, &c.Exec.Env, false)...)
	}
	return c, diags
}

type providerModel struct {
	ConfigPath            types.String  `tfsdk:"config_path"`
	ConfigPaths           types.List    `tfsdk:"config_paths"`
	ConfigContext         types.String  `tfsdk:"config_context"`
	ConfigContextAuthInfo types.String  `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String  `tfsdk:"config_context_cluster"`
	Host                  types.String  `tfsdk:"host"`
	Username              types.String  `tfsdk:"username"`
	Password              types.String  `tfsdk:"password"`
	Token                 types.String  `tfsdk:"token"`
	ClientCertificate     types.String  `tfsdk:"client_certificate"`
	ClientKey             types.String  `tfsdk:"client_key"`
	ClusterCACertificate  types.String  `tfsdk:"cluster_ca_certificate"`
	Insecure              types.Bool    `tfsdk:"insecure"`
	TLSServerName         types.String  `tfsdk:"tls_server_name"`
	ProxyURL              types.String  `tfsdk:"proxy_url"`
	QPS                   types.Float64 `tfsdk:"qps"`
	Burst                 types.Int64   `tfsdk:"burst"`
	CalicoAPIGroup        types.String  `tfsdk:"calico_api_group"`
	FieldManager          types.String  `tfsdk:"field_manager"`
	ClusterID             types.String  `tfsdk:"cluster_id"`
	IgnoreAnnotations     types.List    `tfsdk:"ignore_annotations"`
	IgnoreLabels          types.List    `tfsdk:"ignore_labels"`
	Exec                  []execModel   `tfsdk:"exec"`
	Experiments           []struct {
		ManifestResource types.Bool `tfsdk:"manifest_resource"`
	} `tfsdk:"experiments"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}
