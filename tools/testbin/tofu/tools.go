//go:build tools

// Package tofu pins the OpenTofu command built by tools/testbin.sh.
package tofu

import (
	_ "github.com/opentofu/opentofu/cmd/tofu"
)
