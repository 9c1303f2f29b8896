// Attribute validators shared by the resources and data sources: checks that need no cluster,
// so that a mistake is a plan-time error naming its attribute before anything is read.
package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// namespacedNameRegexp matches namespace/name (DNS labels and subdomains).
var namespacedNameRegexp = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`)

// dns1035LabelRegexp is what a Service name must be (k8s.io/apimachinery validation.IsDNS1035Label).
var dns1035LabelRegexp = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// labelValueRegexp is a Kubernetes label value (its length checked apart).
var labelValueRegexp = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// objectNameValidator accepts what the apiserver accepts as the name of the object it
// describes, by the apimachinery check the apiserver itself runs.
type objectNameValidator struct {
	what  string                // "a namespace", "a ServiceCIDR name", ...
	check func(string) []string // validation.IsDNS1123Label or IsDNS1123Subdomain
	rule  string                // the rule in words
}

// namespaceName accepts a namespace name: a DNS-1123 label.
func namespaceName() objectNameValidator {
	return objectNameValidator{"a namespace", validation.IsDNS1123Label,
		"at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit"}
}

// subdomainName accepts an object name that is a DNS-1123 subdomain (ServiceCIDRs,
// admission policies, Calico IPPools).
func subdomainName(what string) objectNameValidator {
	return objectNameValidator{what, validation.IsDNS1123Subdomain,
		"at most 253 lower-case letters, digits, '-' or '.', starting and ending with a letter or digit"}
}

func (v objectNameValidator) Description(context.Context) string {
	return "must be " + v.what + ": " + v.rule
}
func (v objectNameValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v objectNameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if errs := v.check(req.ConfigValue.ValueString()); len(errs) > 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Name",
			fmt.Sprintf("%q is not %s, which the apiserver would refuse mid-apply: %s.", req.ConfigValue.ValueString(), v.what,
				strings.Join(errs, "; ")))
	}
}

// cidrValidator accepts a CIDR prefix without host bits, as every CIDR in the provider.
type cidrValidator struct{}

func (cidrValidator) Description(context.Context) string {
	return "must be a CIDR prefix without host bits, such as 172.24.0.0/15"
}
func (v cidrValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v cidrValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := k8sops.ParseCIDR(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid CIDR", apiErrorText(err)+".")
	}
}

// calicoSelectorValidator accepts what Calico's selector parser accepts (k8sops.ValidateCalicoSelector):
// crd.projectcalico.org/v1 would store a broken selector, and Calico's IPAM would then skip the pool.
type calicoSelectorValidator struct{}

func (calicoSelectorValidator) Description(context.Context) string {
	return "must be a Calico selector, such as all() or zone == \"a\" && !has(edge)"
}
func (v calicoSelectorValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v calicoSelectorValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := k8sops.ValidateCalicoSelector(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Calico Selector",
			fmt.Sprintf("%q is not a selector Calico can parse (%v); Calico would skip the pool on every node. "+
				"Write it as Calico's selector syntax, e.g. all() or zone == \"a\" && !has(edge).", req.ConfigValue.ValueString(), err))
	}
}

// rfc3339Validator accepts an RFC 3339 time.
type rfc3339Validator struct{}

func (rfc3339Validator) Description(context.Context) string {
	return "must be an RFC 3339 time, such as 2026-11-22T16:00:00Z"
}
func (v rfc3339Validator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v rfc3339Validator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := time.Parse(time.RFC3339, req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Time",
			fmt.Sprintf("%q is not an RFC 3339 time, e.g. 2026-11-22T16:00:00Z: %v.", req.ConfigValue.ValueString(), err))
	}
}
