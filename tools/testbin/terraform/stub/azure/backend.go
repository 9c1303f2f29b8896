// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package azure stands in for terraform's azure state backend in the test build of terraform
// (tools/testbin/terraform): the tests use the local and kubernetes backends only.
package azure

import (
	"github.com/hashicorp/terraform/internal/backend"
	"github.com/hashicorp/terraform/internal/backend/remote-state/inmem"
	"github.com/hashicorp/terraform/internal/tfdiags"
	"github.com/zclconf/go-cty/cty"
)

type absent struct{ backend.Backend }

// New returns a backend whose configuration always fails, saying why.
func New() backend.Backend { return absent{inmem.New()} }

func (absent) Configure(cty.Value) tfdiags.Diagnostics {
	var diags tfdiags.Diagnostics
	return diags.Append(tfdiags.Sourceless(tfdiags.Error, "Backend not built",
		"This build of terraform (the k8scidr test suite's) has no \"azure\" backend; use local or kubernetes."))
}
