// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Attribute validators shared by the resources and data sources: checks that need no cluster,
// so that a mistake is a plan-time error naming its attribute before anything is read.
package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/workloadroll"
)

// namespacedNameRegexp matches namespace/name (DNS labels and subdomains).
var namespacedNameRegexp = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`)

// dns1035LabelRegexp is what a Service name must be (k8s.io/apimachinery validation.IsDNS1035Label).
var dns1035LabelRegexp = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// labelValueRegexp is a Kubernetes label value (its length checked apart).
var labelValueRegexp = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// stringCheck is a string attribute validator: check says why a known value is refused, or "".
// The provider's own single-string checks are all one of these (the rest are framework validators).
type stringCheck struct {
	description string // what the value must be, for the docs
	summary     string // the diagnostic's summary
	check       func(string) string
}

func (v stringCheck) Description(context.Context) string             { return v.description }
func (v stringCheck) MarkdownDescription(ctx context.Context) string { return v.description }
func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if why := v.check(req.ConfigValue.ValueString()); why != "" {
		resp.Diagnostics.AddAttributeError(req.Path, v.summary, why)
	}
}

// checkAt runs the check on a value inside an object attribute, where attribute validators do
// not reach: an error at p when s is known and refused.
func (v stringCheck) checkAt(p path.Path, s types.String, diags *diag.Diagnostics) {
	if s.IsNull() || s.IsUnknown() {
		return
	}
	if why := v.check(s.ValueString()); why != "" {
		diags.AddAttributeError(p, v.summary, why)
	}
}

// objectName accepts what the apiserver accepts as the name of the object it describes (what:
// "a namespace", "a ServiceCIDR name", ...), by the apimachinery check the apiserver itself runs.
func objectName(what, rule string, check func(string) []string) stringCheck {
	return stringCheck{"must be " + what + ": " + rule, "Invalid Name", func(s string) string {
		if errs := check(s); len(errs) > 0 {
			return fmt.Sprintf("%q is not %s, which the apiserver would refuse mid-apply: %s.", s, what, strings.Join(errs, "; "))
		}
		return ""
	}}
}

// namespaceName accepts a namespace name: a DNS-1123 label.
func namespaceName() stringCheck {
	return objectName("a namespace", "at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
		validation.IsDNS1123Label)
}

// subdomainName accepts an object name that is a DNS-1123 subdomain (ServiceCIDRs,
// admission policies, Calico IPPools).
func subdomainName(what string) stringCheck {
	return objectName(what, "at most 253 lower-case letters, digits, '-' or '.', starting and ending with a letter or digit",
		validation.IsDNS1123Subdomain)
}

// errText is err's text for a diagnostic's detail, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return apiErrorText(err) + "."
}

// cidrRule is what a CIDR attribute's value must be.
const cidrRule = "must be a CIDR prefix without host bits, such as 172.24.0.0/15"

// cidrValidator accepts a CIDR prefix without host bits, as every CIDR in the provider.
func cidrValidator() stringCheck {
	return stringCheck{cidrRule, "Invalid CIDR", func(s string) string {
		_, err := k8sops.ParseCIDR(s)
		return errText(err)
	}}
}

// calicoSelectorValidator accepts what Calico's selector parser accepts (calico.ValidateCalicoSelector):
// crd.projectcalico.org/v1 would store a broken selector, and Calico's IPAM would then skip the pool.
func calicoSelectorValidator() stringCheck {
	return stringCheck{`must be a Calico selector, such as all() or zone == "a" && !has(edge)`, "Invalid Calico Selector", func(s string) string {
		if err := calico.ValidateCalicoSelector(s); err != nil {
			return fmt.Sprintf("%q is not a selector Calico can parse (%v); Calico would skip the pool on every node. "+
				`Write it as Calico's selector syntax, e.g. all() or zone == "a" && !has(edge).`, s, err)
		}
		return ""
	}}
}

// rfc3339Validator accepts an RFC 3339 time.
func rfc3339Validator() stringCheck {
	return stringCheck{"must be an RFC 3339 time, such as 2026-11-22T16:00:00Z", "Invalid Time", func(s string) string {
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return fmt.Sprintf("%q is not an RFC 3339 time, e.g. 2026-11-22T16:00:00Z: %v.", s, err)
		}
		return ""
	}}
}

// durationBetween accepts a Go duration string from lo to hi.
func durationBetween(lo, hi time.Duration) stringCheck {
	desc := fmt.Sprintf("a Go duration (e.g. 90s, 2m) from %s to %s", lo, hi)
	return stringCheck{desc, "Invalid Duration", func(s string) string {
		if d, err := time.ParseDuration(s); err != nil || d < lo || d > hi {
			return fmt.Sprintf("%q is not %s.", s, desc)
		}
		return ""
	}}
}

// labelSelectorValidator accepts a Kubernetes label selector (`kubectl -l` syntax).
func labelSelectorValidator() stringCheck {
	return stringCheck{"must be a label selector, such as app=web,tier!=system", "Invalid Label Selector", func(s string) string {
		_, err := labels.Parse(s)
		return errText(err)
	}}
}

// workloadKeyValidator accepts namespace/kind/name workload keys and namespace/pod/name pod keys.
func workloadKeyValidator() stringCheck {
	return stringCheck{"must be namespace/kind/name (kind deployment, statefulset or daemonset), or namespace/pod/name",
		"Invalid Workload", func(s string) string { return errText(workloadroll.ValidateRollKey(s)) }}
}
