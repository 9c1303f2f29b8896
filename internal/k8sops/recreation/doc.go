// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package recreation is the Service move: the plan, its check before apply, the executor, the
// journal and its lease, the DNS and old-IP bridges, the cluster DNS Service, field ownership,
// admission and quota guards. It imports the core only, never another stage.
package recreation
