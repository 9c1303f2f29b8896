// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build tools

// Package terraform pins the terraform command built by tools/testbin.sh.
package terraform

import (
	_ "github.com/hashicorp/terraform"
)
