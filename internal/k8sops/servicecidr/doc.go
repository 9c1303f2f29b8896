// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package servicecidr is the Service-range stage: ServiceCIDRs created, widened and deleted, the
// ValidatingAdmissionPolicy that governs them, Service IP allocations against ranges, and the
// LoadBalancer Services a move must keep. It imports the core only, never another stage.
package servicecidr
