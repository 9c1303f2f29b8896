// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package workloadroll

import (
	"slices"
	"strings"
	"testing"
)

func FuzzParseWorkloadKey(f *testing.F) {
	for _, s := range []string{"kube-system/deployment/coredns", "a/statefulset/b", "a/b", "//", "a/job/b", "a/Deployment/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		ns, kind, name, err := ParseWorkloadKey(key)
		if err != nil {
			return
		}
		if !slices.Contains(RollKinds, kind) || !strings.EqualFold(WorkloadKey(ns, kind, name), key) {
			t.Fatalf("ParseWorkloadKey(%q) = %q %q %q", key, ns, kind, name)
		}
		if ns2, kind2, name2, err := ParseWorkloadKey(WorkloadKey(ns, kind, name)); err != nil || ns2 != ns || kind2 != kind || name2 != name {
			t.Fatalf("ParseWorkloadKey(%q) does not round-trip: %q %q %q %v", key, ns2, kind2, name2, err)
		}
	})
}
