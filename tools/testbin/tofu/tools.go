// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build tools

// Package tofu pins the OpenTofu command built by tools/testbin.sh.
package tofu

import (
	_ "github.com/opentofu/opentofu/cmd/tofu"
)
