// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Diagnostics from k8sops findings: one adapter from a finding's path to the attribute it names.
package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
)

// addFindings adds each finding as an error, or as a warning that says it is an error at apply.
// A finding with an empty path is about no single attribute. A finding inside a map or list also names its place in the detail: Terraform points only at
// the attribute's expression, which for a value from a data source is one line for all of it.
func addFindings(diags *diag.Diagnostics, fs []k8sops.Finding, asError bool) {
	for _, f := range fs {
		detail := f.Detail
		if len(f.Path.Steps) > 1 {
			detail = f.Path.String() + ": " + detail
		}
		if !asError {
			detail += " This is an error at apply time."
		}
		switch whole := len(f.Path.Steps) == 0; { // whole: no single attribute is at fault
		case whole && asError:
			diags.AddError(f.Summary, detail)
		case whole:
			diags.AddWarning(f.Summary, detail)
		case asError:
			diags.AddAttributeError(pathOf(f.Path), f.Summary, detail)
		default:
			diags.AddAttributeWarning(pathOf(f.Path), f.Summary, detail)
		}
	}
}

// addWarnings adds each finding as a warning: something to know, not a mistake.
func addWarnings(diags *diag.Diagnostics, fs []k8sops.Finding) {
	for _, f := range fs {
		if len(f.Path.Steps) == 0 {
			diags.AddWarning(f.Summary, f.Detail)
		} else {
			diags.AddAttributeWarning(pathOf(f.Path), f.Summary, f.Detail)
		}
	}
}

// pathOf turns a k8sops path into the framework's.
func pathOf(p k8sops.Path) path.Path {
	var out path.Path
	for i, s := range p.Steps {
		switch {
		case i == 0:
			out = path.Root(s.Name)
		case s.Kind == k8sops.StepAttr:
			out = out.AtName(s.Name)
		case s.Kind == k8sops.StepKey:
			out = out.AtMapKey(s.Key)
		default:
			out = out.AtListIndex(s.Index)
		}
	}
	return out
}

// warnHazards shows a stage's preflight findings as plan warnings. A read that fails is a
// warning too: the hazards are advice, and the plan goes on.
func warnHazards(found []preflight.PreflightFinding, err error, diags *diag.Diagnostics) {
	if err != nil {
		diags.AddWarning("Migration Hazards Not Checked", "The plan could not run this stage's preflight checks: "+apiErrorText(err)+
			". data.k8scidr_preflight lists every hazard.")
		return
	}
	for _, f := range found {
		// One summary per object: Terraform folds warnings with equal summaries into one.
		diags.AddWarning("Migration Hazard: "+f.Summary(), fmt.Sprintf("%s (%s). Fix: %s", f.Detail, f.Severity, f.Fix))
	}
}
