// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build !linux

package recreation

// processID is empty where a process cannot be named safely across containers: a lease holder
// there is taken for alive until its lease expires.
func processID() string { return "" }

func processGone(string) bool { return false }
