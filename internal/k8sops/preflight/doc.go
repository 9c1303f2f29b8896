// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package preflight reads across the stages: the hazards of k8scidr_preflight, the checks each
// resource shows as plan warnings, and the overlaps of the cluster's address ranges. It imports
// the core and the stages; no stage imports it.
package preflight
