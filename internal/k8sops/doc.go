// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package k8sops is the shared core of the cluster logic: the client and discovery, findings,
// CIDR math and placement, paginated listing, retries, the API trace, warnings, configuration,
// and what every stage reads alike (ServiceCIDRs, the provider's labels, a Service's IPs). Each
// stage is a package below it; the core imports none of them and no Terraform package.
package k8sops
