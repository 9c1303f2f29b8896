// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build tools

// Package etcd pins the etcd server built by tools/testbin.sh.
package etcd

import _ "go.etcd.io/etcd/server/v3"
