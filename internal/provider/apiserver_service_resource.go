// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Resource k8scidr_apiserver_service: default/kubernetes moved into the range kube-apiserver
// now serves, with a bridge on its old IPs until no pod started before the move runs.
package provider

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
)

var (
	_ resource.ResourceWithConfigure      = (*apiServerServiceResource)(nil)
	_ resource.ResourceWithImportState    = (*apiServerServiceResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*apiServerServiceResource)(nil)
	_ resource.ResourceWithValidateConfig = (*apiServerServiceResource)(nil)
)

// apiServerServiceTimeout bounds the move, the bridge and the default range's retirement
// (kube-controller-manager releases a deleted range within about 10 s, kube-apiserver recreates
// it within about 10 s more).
const apiServerServiceTimeout = 5 * time.Minute

type apiServerServiceResource struct {
	data *providerData
}

func newAPIServerServiceResource() resource.Resource { return &apiServerServiceResource{} }

func (r *apiServerServiceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_apiserver_service"
}

func (r *apiServerServiceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	computedList := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Moves the apiserver's own Service, `default/kubernetes`, into the range kube-apiserver now " +
			"serves, without cutting off the pods that still use its old IP. kube-apiserver puts the Service on the first " +
			"address of its `--service-cluster-ip-range` only when the Service is missing; it never moves an existing one. " +
			"Every pod started before the move has `KUBERNETES_SERVICE_HOST` = the old IP, and its in-cluster client goes " +
			"there. Apply this once every kube-apiserver runs with the new `--service-cluster-ip-range` (and, on kOps and " +
			"kubeadm, with the old IP still in its certificate: `provider::k8scidr::kops_networking` gives the " +
			"`additionalSans`). Apply makes a keep-range ServiceCIDR for the old IP and a carrier (`default/kubernetes-moving`, " +
			"a Service with the old and new IPs as external IPs and a copy of the apiserver's endpoints, so that kube-proxy " +
			"serves both IPs throughout; waited for by `proxy_sync_wait`), deletes `default/kubernetes` and at once puts a " +
			"bridge Service on the old IP, with an EndpointSlice copying the apiserver's endpoints, recreates " +
			"`default/kubernetes` at `new_ips`, and removes the carrier once kube-proxy has both; then it retires the old " +
			"default `kubernetes` ServiceCIDR, which kube-apiserver recreates from its flags (while old-IP bridges of " +
			"`k8scidr_service_recreation` hold IPs in it, it stays Terminating until they go: no new Service gets an IP there). Every apply copies the apiserver's endpoints to the bridge again (a control-plane " +
			"roll changes them: `in_sync` shows it). `bridge = false` removes the bridge and its keep-range, refused while a " +
			"pod started before the move runs: roll them first with `k8scidr_workload_roll` (`started_before = moved_at`, " +
			"`include_host_network = true`). " +
			"Destroy removes the bridge under the same check; it does not move the Service back.",
		Attributes: map[string]schema.Attribute{
			"service_cidrs": schema.ListAttribute{
				Required: true, ElementType: types.StringType,
				MarkdownDescription: "kube-apiserver's `--service-cluster-ip-range` now: one range, or two of different IP families.",
				Validators:          append([]validator.List{listvalidator.SizeBetween(1, 2)}, listOf(cidrValidator())...),
			},
			"bridge": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Keep the old IP answering with the apiserver's endpoints. Default `true`; set `false` once " +
					"the pods started before the move have restarted.",
			},
			"bridge_force_removal": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Remove the bridge even while pods started before the move run. Default `false`.",
			},
			"proxy_sync_wait": schema.StringAttribute{Optional: true,
				MarkdownDescription: "How long after a Service change kube-proxy has programmed it on every node, as a Go " +
					"duration: its `--min-sync-period` (1 s by default) and the time one sync takes. The move waits it twice: " +
					"after the carrier (a Service serving the old and new IPs as external IPs while `default/kubernetes` is " +
					"deleted and recreated) is made, and before it goes. Default `" + k8sops.DefaultProxySync.String() + "`.",
				Validators: []validator.String{durationBetween(10*time.Millisecond, 10*time.Minute)}},
			"retire_default_service_cidr": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Delete the default `kubernetes` ServiceCIDR while it still has the old range, once no IP " +
					"depends on it alone, so kube-apiserver recreates it with `service_cidrs` (KEP-1880's last step). Default `true`.",
			},
			"new_ips": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "`default/kubernetes`'s IP after the move: the first address of the first of `service_cidrs`, " +
					"single-stack, as kube-apiserver makes it whatever the number of families. Known at plan.",
			},
			"old_ips": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Where `default/kubernetes` was before the move: the bridge's IPs.",
				PlanModifiers:       []planmodifier.List{listplanmodifier.UseStateForUnknown()},
			},
			"moved_at": schema.StringAttribute{
				Computed: true,
				MarkdownDescription: "When `default/kubernetes` was created at `new_ips` (RFC 3339): pods started before have the " +
					"old IP in `KUBERNETES_SERVICE_HOST`. Give it to `k8scidr_workload_restarts` as `started_before` " +
					"(through `data.k8scidr_cluster_info`'s `apiserver_service_created_at`, read at plan), with " +
					"`include_host_network = true`: host-network pods got the old IP too.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"bridge_service":       schema.StringAttribute{Computed: true, MarkdownDescription: "The bridge Service, `default/NAME`; null without one."},
			"bridge_endpoints":     computedList("The endpoints (`ip:port`) the bridge serves: the apiserver's when it was last applied."),
			"keep_cidrs":           computedList("The keep-range ServiceCIDRs holding the old IPs, `name=cidr`."),
			"default_service_cidr": computedList("The default `kubernetes` ServiceCIDR's ranges after the apply."),
			"in_sync": schema.BoolAttribute{
				Computed: true,
				MarkdownDescription: "Whether the cluster is as configured: `default/kubernetes` at `new_ips`, the bridge there " +
					"with the apiserver's current endpoints (or gone), the default range retired. False after a refresh shows " +
					"as a change back to true, and apply brings the cluster there.",
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, apiServerServiceTimeout, apiServerServiceTimeout, apiServerServiceTimeout),
		},
	}
}

func (r *apiServerServiceResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m apiServerServiceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !complete(m.ServiceCIDRs) {
		return
	}
	addFindings(&resp.Diagnostics, k8sops.ValidateServiceCIDRs(k8sops.At("service_cidrs"), stringList(ctx, m.ServiceCIDRs, &resp.Diagnostics)), true)
}

func (r *apiServerServiceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan plans new_ips from the configuration and in_sync = true, and reads the cluster only
// to say what the apply would refuse: the bridge removed (or destroyed) under running pods that
// still use it, the new IPs in no Ready range, the 1.33 hazard of retiring the default range.
func (r *apiServerServiceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	var state *apiServerServiceModel
	if !req.State.Raw.IsNull() {
		state = &apiServerServiceModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	if req.Plan.Raw.IsNull() { // destroy
		if state != nil && !state.BridgeService.IsNull() && !state.BridgeForceRemoval.ValueBool() && r.data != nil && r.data.client != nil {
			m := state.move(ctx, &resp.Diagnostics)
			m.OldIPs = stringList(ctx, state.OldIPs, &resp.Diagnostics)
			if s, err := servicecidr.ReadAPIServerMove(ctx, r.data.client, m); err == nil {
				r.checkBridgeRemoval(ctx, s, &resp.Diagnostics)
			}
		}
		return
	}
	var plan apiServerServiceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("in_sync"), true)...)
	if state != nil && (!state.InSync.ValueBool() || !state.ServiceCIDRs.Equal(plan.ServiceCIDRs) || !state.Bridge.Equal(plan.Bridge) ||
		!state.RetireDefault.Equal(plan.RetireDefault) || !state.BridgeForceRemoval.Equal(plan.BridgeForceRemoval)) {
		// What the apply finds and does: unknown until it has.
		for _, attr := range []string{"bridge_endpoints", "keep_cidrs", "default_service_cidr"} {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attr), types.ListUnknown(types.StringType))...)
		}
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("bridge_service"), types.StringUnknown())...)
		if state.MovedAt.IsNull() || !state.ServiceCIDRs.Equal(plan.ServiceCIDRs) {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("moved_at"), types.StringUnknown())...)
		}
	}
	if !complete(plan.ServiceCIDRs) {
		return
	}
	cidrs := stringList(ctx, plan.ServiceCIDRs, &resp.Diagnostics)
	ips, err := servicecidr.APIServerNewIPs(cidrs)
	if err != nil {
		return // ValidateConfig said why
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("new_ips"), ips)...)
	if r.data == nil || r.data.client == nil || resp.Diagnostics.HasError() {
		return
	}
	m := plan.move(ctx, &resp.Diagnostics)
	if state != nil {
		m.OldIPs = stringList(ctx, state.OldIPs, &resp.Diagnostics)
	}
	s, err := servicecidr.ReadAPIServerMove(ctx, r.data.client, m)
	if err != nil {
		return // the apply reports cluster errors itself
	}
	if !m.Bridge && !m.ForceBridgeRemoval {
		r.checkBridgeRemoval(ctx, s, &resp.Diagnostics)
	}
	if !s.Moved() && len(s.ServiceIPs) > 0 {
		// Refused by the apply before the delete; said here, where the plan is reviewed.
		if _, err := servicecidr.CheckAPIServerFlags(ctx, r.data.client, cidrs); err != nil {
			resp.Diagnostics.AddAttributeWarning(path.Root("service_cidrs"), "Apiserver Runs Another Range",
				err.Error()+". The apply refuses until every kube-apiserver does.")
		}
		if _, err := servicecidr.CheckServingCertificate(ctx, r.data.client, s.ServiceIPs, ips); err != nil {
			resp.Diagnostics.AddAttributeWarning(path.Root("service_cidrs"), "Apiserver Certificate Lacks the New IP",
				err.Error()+". The apply refuses until it does.")
		}
	}
	if !s.Moved() {
		ranges, err := k8sops.ListServiceCIDRs(ctx, r.data.client)
		if err == nil {
			for _, ip := range ips {
				if !k8sops.ReadyHolds(r.data.rangesWithPlanned(ranges), netip.MustParseAddr(ip)) {
					resp.Diagnostics.AddAttributeWarning(path.Root("service_cidrs"), "New Apiserver IP Outside Every Ready ServiceCIDR",
						"No Ready ServiceCIDR holds "+ip+", default/kubernetes's new IP, and this plan creates none: the apply "+
							"fails. Create the new Service range (k8scidr_service_cidr) first, and restart kube-apiserver with "+
							"--service-cluster-ip-range="+strings.Join(cidrs, ",")+".")
				}
			}
		}
	}
	if m.RetireDefaultRange && len(s.DefaultRange) > 0 && !slices.Equal(s.DefaultRange, cidrs) {
		if caps, err := r.data.client.Capabilities(); err == nil {
			if risk := servicecidr.DefaultRangeDeletionRisk(caps); risk != "" {
				resp.Diagnostics.AddAttributeWarning(path.Root("retire_default_service_cidr"), "Retiring the Default Range on 1.33", risk)
			}
		}
		if s.RetireBlocked != "" {
			resp.Diagnostics.AddAttributeWarning(path.Root("retire_default_service_cidr"), "Old Default Range Still Held", s.RetireBlocked)
		}
	}
}

// checkBridgeRemoval errs, at plan, where removing the bridge s has would cut running pods off the API.
func (r *apiServerServiceResource) checkBridgeRemoval(ctx context.Context, s servicecidr.APIServerState, diags *diag.Diagnostics) {
	if s.Bridge == "" {
		return
	}
	findings, _, err := servicecidr.CheckAPIServerBridgeRemoval(ctx, r.data.client, s)
	if err != nil {
		diags.AddAttributeWarning(path.Root("bridge"), "Apiserver Bridge Removal Not Checked", apiErrorText(err)+": the apply checks again.")
		return
	}
	addFindings(diags, findings, true)
}

func (r *apiServerServiceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan apiServerServiceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	r.apply(ctx, &plan, nil, plan.Timeouts.Create, &resp.State, &resp.Diagnostics)
}

func (r *apiServerServiceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state apiServerServiceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	r.apply(ctx, &plan, &state, plan.Timeouts.Update, &resp.State, &resp.Diagnostics)
}

func (r *apiServerServiceResource) apply(ctx context.Context, plan, prior *apiServerServiceModel,
	timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), state *tfsdk.State, diags *diag.Diagnostics) {
	client, ctx, cancel := r.data.begin(ctx, timeout, apiServerServiceTimeout, diags)
	defer cancel()
	if client == nil {
		return
	}
	m := plan.move(ctx, diags)
	if prior != nil {
		m.OldIPs = stringList(ctx, prior.OldIPs, diags)
	}
	if diags.HasError() {
		return
	}
	s, notes, err := servicecidr.MoveAPIServerService(ctx, client, m)
	for _, n := range notes {
		diags.AddWarning("Apiserver Service Move", n)
	}
	if err != nil {
		if !addFindingError(diags, err) {
			diags.AddError("Apiserver Service Move Not Finished", apiErrorText(err)+". The next apply continues where this one stopped.")
		}
		return
	}
	plan.fill(s, m, diags)
	diags.Append(state.Set(ctx, plan)...)
}

func (r *apiServerServiceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state apiServerServiceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	m := state.move(ctx, &resp.Diagnostics)
	m.OldIPs = stringList(ctx, state.OldIPs, &resp.Diagnostics)
	s, err := servicecidr.ReadAPIServerMove(ctx, client, m)
	if err != nil {
		resp.Diagnostics.AddError("Apiserver Service Not Readable", apiErrorText(err)+".")
		return
	}
	state.fill(s, m, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *apiServerServiceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state apiServerServiceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, ctx, cancel := r.data.begin(ctx, state.Timeouts.Delete, apiServerServiceTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	m := state.move(ctx, &resp.Diagnostics)
	m.OldIPs = stringList(ctx, state.OldIPs, &resp.Diagnostics)
	if err := servicecidr.RemoveAPIServerBridge(ctx, client, m); err != nil {
		if !addFindingError(&resp.Diagnostics, err) {
			resp.Diagnostics.AddError("Apiserver Bridge Not Removed", apiErrorText(err)+".")
		}
	}
}

// ImportState takes the new range(s), comma-separated; Read fills in the rest.
func (r *apiServerServiceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	cidrs := strings.Split(req.ID, ",")
	for i := range cidrs {
		cidrs[i] = strings.TrimSpace(cidrs[i])
	}
	if _, err := servicecidr.APIServerNewIPs(cidrs); err != nil || len(cidrs) > 2 {
		resp.Diagnostics.AddError("Invalid Import ID", "Import k8scidr_apiserver_service by kube-apiserver's --service-cluster-ip-range, "+
			"e.g. 172.24.0.0/15 or 172.24.0.0/15,fd00:24::/108.")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("service_cidrs"), cidrs)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("bridge"), true)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("bridge_force_removal"), false)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("retire_default_service_cidr"), true)...)
}

type apiServerServiceModel struct {
	ServiceCIDRs       types.List     `tfsdk:"service_cidrs"`
	Bridge             types.Bool     `tfsdk:"bridge"`
	BridgeForceRemoval types.Bool     `tfsdk:"bridge_force_removal"`
	RetireDefault      types.Bool     `tfsdk:"retire_default_service_cidr"`
	ProxySyncWait      types.String   `tfsdk:"proxy_sync_wait"`
	NewIPs             types.List     `tfsdk:"new_ips"`
	OldIPs             types.List     `tfsdk:"old_ips"`
	MovedAt            types.String   `tfsdk:"moved_at"`
	BridgeService      types.String   `tfsdk:"bridge_service"`
	BridgeEndpoints    types.List     `tfsdk:"bridge_endpoints"`
	KeepCIDRs          types.List     `tfsdk:"keep_cidrs"`
	DefaultServiceCIDR types.List     `tfsdk:"default_service_cidr"`
	InSync             types.Bool     `tfsdk:"in_sync"`
	Timeouts           timeouts.Value `tfsdk:"timeouts"`
}

func (m *apiServerServiceModel) move(ctx context.Context, diags *diag.Diagnostics) servicecidr.APIServerMove {
	return servicecidr.APIServerMove{ServiceCIDRs: stringList(ctx, m.ServiceCIDRs, diags), Bridge: m.Bridge.ValueBool(),
		ForceBridgeRemoval: m.BridgeForceRemoval.ValueBool(), RetireDefaultRange: m.RetireDefault.ValueBool(), ProxySync: durationOf(m.ProxySyncWait)}
}

// fill records where the move stands.
func (m *apiServerServiceModel) fill(s servicecidr.APIServerState, mv servicecidr.APIServerMove, diags *diag.Diagnostics) {
	list := func(v []string) types.List {
		l, d := types.ListValueFrom(context.Background(), types.StringType, nonNil(v))
		diags.Append(d...)
		return l
	}
	m.NewIPs, m.OldIPs = list(s.NewIPs), list(s.OldIPs)
	m.MovedAt = types.StringNull()
	if !s.MovedAt.IsZero() {
		m.MovedAt = types.StringValue(s.MovedAt.Format(time.RFC3339))
	}
	m.BridgeService = types.StringNull()
	if s.Bridge != "" {
		m.BridgeService = types.StringValue(servicecidr.APIServerNamespace + "/" + s.Bridge)
	}
	m.BridgeEndpoints, m.KeepCIDRs, m.DefaultServiceCIDR = list(s.BridgeEndpoints), list(s.KeepCIDRs), list(s.DefaultRange)
	m.InSync = types.BoolValue(s.InSync(mv))
}
