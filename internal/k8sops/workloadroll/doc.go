// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package workloadroll is the workload roll: which Deployments, StatefulSets, DaemonSets and
// bare pods hold an old address or the old DNS server, and restarting them as kubectl does. It
// imports the core only, never another stage.
package workloadroll
