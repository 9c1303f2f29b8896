// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The timeouts block of every resource, each operation's default stated in its description.
package provider

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// timeoutsBlock is the timeouts block for the operations with a non-zero default. It is a block, not a nested
// attribute, so `timeouts { create = "30m" }` as written for the kubernetes, helm and AWS providers works here too.
func timeoutsBlock(ctx context.Context, create, update, del time.Duration) schema.Block {
	desc := func(op string, d time.Duration) string {
		if d == 0 {
			return ""
		}
		return "How long the " + op + " may take, as a duration (`30s`, `1h30m`). Default `" + shortDuration(d) + "`."
	}
	b := timeouts.Block(ctx, timeouts.Opts{
		Create: create > 0, Update: update > 0, Delete: del > 0,
		CreateDescription: desc("create", create), UpdateDescription: desc("update", update), DeleteDescription: desc("delete", del),
	})
	if nested, ok := b.(schema.SingleNestedBlock); ok {
		nested.MarkdownDescription = "How long each operation may take before it fails. Unset (or an operation left out), " +
			"each operation has its own default, listed below."
		return nested
	}
	return b
}

// shortDuration writes whole minutes as 5m rather than 5m0s.
func shortDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}
