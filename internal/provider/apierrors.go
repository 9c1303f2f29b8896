// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"errors"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// forbiddenRE reads the apiserver's authorization message: User "u" cannot VERB resource "R"
// in API group "G" in the namespace "N" (or at the cluster scope).
var forbiddenRE = regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]+)")?`)

// apiErrorText is err's text for a diagnostic. When the apiserver refused a request for want of
// permission, it adds what exactly is missing and where the role that grants it is.
func apiErrorText(err error) string {
	var status *apierrors.StatusError
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return err.Error()
	}
	m := forbiddenRE.FindStringSubmatch(status.ErrStatus.Message)
	if m == nil {
		return err.Error()
	}
	user, verb, res, group, ns := m[1], m[2], m[3], m[4], m[5]
	if group == "" {
		group = "core"
	}
	where := "cluster-wide"
	if ns != "" {
		where = fmt.Sprintf("in namespace %s", ns)
	}
	return fmt.Sprintf("%s\n\nMissing permission: verb %q on resource %q (API group %s) %s, for %s. Grant it to these "+
		"credentials: examples/rbac/ has a ClusterRole with exactly the verbs each resource needs (k8scidr-apply), and a "+
		"read-only one that is enough for terraform plan (k8scidr-plan).", err.Error(), verb, res, group, where, user)
}
