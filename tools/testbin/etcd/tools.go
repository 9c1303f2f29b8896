//go:build tools

// Package etcd pins the etcd server built by tools/testbin.sh.
package etcd

import _ "go.etcd.io/etcd/server/v3"
