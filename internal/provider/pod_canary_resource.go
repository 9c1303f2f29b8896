// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Resource k8scidr_pod_canary: one short-lived pod that proves, before the cluster rolls, that a
// new pod gets its address from the new pool.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var _ resource.ResourceWithConfigure = (*podCanaryResource)(nil)

// podCanaryTimeout is the default for create: scheduling, the CNI's address, and the delete.
const podCanaryTimeout = 3 * time.Minute

type podCanaryResource struct {
	data *providerData
}

func newPodCanaryResource() resource.Resource { return &podCanaryResource{} }

func (r *podCanaryResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pod_canary"
}

func (r *podCanaryResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "One pod, created and deleted by the apply, that shows which range a new pod's address comes " +
			"from now: after the old Calico pool is disabled, before the whole cluster rolls. Its address must lie in " +
			"`expect_cidrs`, or the apply fails naming the address, the node and what to check, and nothing that depends on " +
			"this resource (the roll) runs. The check runs when the resource is created and again whenever an argument or a " +
			"`triggers` value changes; destroy deletes nothing but a canary pod an interrupted apply left.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The canary pod (`namespace/name`) that ran.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"expect_cidrs": schema.ListAttribute{Required: true, ElementType: types.StringType,
				MarkdownDescription: "The ranges the canary's address must come from: the new pool's CIDR (one per IP family). " +
					"An address of a family none of them has is not judged.",
				Validators:    append([]validator.List{listvalidator.SizeBetween(1, 2)}, listOf(cidrValidator())...),
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()}},
			"image": schema.StringAttribute{Required: true, PlanModifiers: replace,
				MarkdownDescription: "The canary's image: one every node can pull and that runs without arguments, such as the " +
					"pause image your nodes already hold (the kubelet's sandbox image, from your own registry or mirror). It runs " +
					"as user 65535 with a read-only root, no Service account token, and 10m CPU / 16Mi memory.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("default"),
				PlanModifiers: replace, Validators: []validator.String{namespaceName()},
				MarkdownDescription: "Where the canary runs: one whose admission lets a restricted pod in. Default `default`."},
			"node_name": schema.StringAttribute{Optional: true, PlanModifiers: replace,
				Validators: []validator.String{subdomainName("a node name")},
				MarkdownDescription: "Run the canary on this node (pools with a `node_selector` give addresses per node). Unset, " +
					"the scheduler places it."},
			"triggers": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				MarkdownDescription: "Any values whose change runs the check again, e.g. the pools' `disabled`. Unset, only a " +
					"change of the other arguments does.",
				Validators: []validator.Map{noNulls("may be any string")}},
			"pod_ips": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The addresses the canary got."},
			"node":       schema.StringAttribute{Computed: true, MarkdownDescription: "The node the canary ran on."},
			"checked_at": schema.StringAttribute{Computed: true, MarkdownDescription: "RFC 3339 time the canary got its address."},
		},
		Blocks: map[string]schema.Block{"timeouts": timeoutsBlock(ctx, podCanaryTimeout, 0, 0)},
	}
}

type podCanaryModel struct {
	ID          types.String   `tfsdk:"id"`
	ExpectCIDRs types.List     `tfsdk:"expect_cidrs"`
	Image       types.String   `tfsdk:"image"`
	Namespace   types.String   `tfsdk:"namespace"`
	NodeName    types.String   `tfsdk:"node_name"`
	Triggers    types.Map      `tfsdk:"triggers"`
	PodIPs      types.List     `tfsdk:"pod_ips"`
	Node        types.String   `tfsdk:"node"`
	CheckedAt   types.String   `tfsdk:"checked_at"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
}

func (r *podCanaryResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *podCanaryResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan podCanaryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	client, ctx, cancel := r.data.begin(ctx, plan.Timeouts.Create, podCanaryTimeout, &resp.Diagnostics)
	defer cancel()
	if client == nil {
		return
	}
	expect := k8sops.ParsePrefixes(stringList(ctx, plan.ExpectCIDRs, &resp.Diagnostics))
	res, err := k8sops.RunCanary(ctx, client, k8sops.CanaryOptions{Namespace: plan.Namespace.ValueString(),
		Image: plan.Image.ValueString(), NodeName: plan.NodeName.ValueString(), Expect: expect, Owner: plan.owner()})
	if res.Left != "" {
		resp.Diagnostics.AddWarning("Canary Pod Left Behind", "The canary pod "+res.Left+".")
	}
	if err != nil {
		resp.Diagnostics.AddError("Canary Pod Got No Address", apiErrorText(err)+".")
		return
	}
	if len(res.Outside) > 0 {
		resp.Diagnostics.AddAttributeError(path.Root("expect_cidrs"), "Canary Pod Outside the Expected Ranges",
			fmt.Sprintf("The canary pod %s on node %s got %s, outside %s: a new pod there still gets an address from another "+
				"range, so a roll now would move pods nowhere. Check that the old pool is disabled (calicoctl get ippool -o wide; "+
				"the Tigera operator reverts edits of pools its Installation lists), that an enabled pool covering expect_cidrs "+
				"selects that node (node_selector), and that no namespace or pod annotation (cni.projectcalico.org/ipv4pools) "+
				"pins the old pool. Then apply again: the canary runs again.", res.Pod, res.Node, strings.Join(res.Outside, ", "),
				strings.Join(stringList(ctx, plan.ExpectCIDRs, &resp.Diagnostics), ", ")))
		return
	}
	plan.ID, plan.Node = types.StringValue(res.Pod), types.StringValue(res.Node)
	plan.PodIPs = ipsValue(res.IPs, &resp.Diagnostics)
	plan.CheckedAt = types.StringValue(time.Now().UTC().Format(time.RFC3339))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read keeps the state: the canary is gone by design, and what it saw is the record.
func (r *podCanaryResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state podCanaryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update is never called with a change: every argument replaces the resource.
func (r *podCanaryResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan podCanaryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete removes only what an interrupted apply may have left: this canary's pods in the namespace.
func (r *podCanaryResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state podCanaryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	client, diags := r.data.Client()
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	if err := k8sops.DeleteCanaries(ctx, client, state.Namespace.ValueString(), state.owner()); err != nil {
		resp.Diagnostics.AddError("Canary Pods Not Deleted", apiErrorText(err)+".")
	}
}

// owner is the canary's label value (k8sops.CanaryOwnerLabel): a digest of what it is, the same
// on every run of one resource, different for canaries for_each over nodes or ranges.
func (m *podCanaryModel) owner() string {
	sum := sha256.Sum256([]byte(m.Namespace.String() + "\x00" + m.NodeName.String() + "\x00" + m.Image.String() + "\x00" +
		m.ExpectCIDRs.String() + "\x00" + m.Triggers.String()))
	return hex.EncodeToString(sum[:8])
}
