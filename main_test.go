// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

func TestQuietFrameworkTrace(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // TF_LOG_SDK_FRAMEWORK afterwards; "" unset
	}{
		{"nothing asked", nil, "DEBUG"},
		{"TF_LOG=DEBUG", map[string]string{"TF_LOG": "DEBUG"}, "DEBUG"},
		{"TF_LOG=trace", map[string]string{"TF_LOG": "trace"}, ""},
		{"TF_LOG_PROVIDER=TRACE", map[string]string{"TF_LOG_PROVIDER": "TRACE"}, ""},
		{"TF_LOG_SDK=TRACE", map[string]string{"TF_LOG_SDK": "TRACE"}, ""},
		{"the user's own level", map[string]string{"TF_LOG_SDK_FRAMEWORK": "WARN"}, "WARN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK", "TF_LOG_SDK_FRAMEWORK"} {
				t.Setenv(v, "")
				_ = os.Unsetenv(v)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			quietFrameworkTrace()
			if got := os.Getenv("TF_LOG_SDK_FRAMEWORK"); got != c.want {
				t.Errorf("TF_LOG_SDK_FRAMEWORK = %q, want %q", got, c.want)
			}
		})
	}
}

// TestLimitMemory: the soft limit is set when GOMEMLIMIT is not, and the user's GOMEMLIMIT
// (read by the runtime at start) is left as it is.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	_ = os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(math.MaxInt64)
	limitMemory()
	if got := debug.SetMemoryLimit(-1); got != softMemoryLimit {
		t.Fatalf("without GOMEMLIMIT: limit %d, want %d", got, softMemoryLimit)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	limitMemory()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("with GOMEMLIMIT=1GiB: limit %d, want it left at %d", got, 1<<30)
	}
}
