// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package calico is the pod-range stage on Calico: IPPools through either API group, their
// validation as calicoctl does it, the selector grammar, IPAM blocks and their release, and the
// drain of a disabled pool. It imports the core only, never another stage.
package calico
