// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

func TestDefaultRangeDeletionRisk(t *testing.T) {
	for minor, want := range map[int]bool{32: false, 33: true, 34: false} {
		if got := DefaultRangeDeletionRisk(k8sops.Capabilities{ServerMinor: minor}) != ""; got != want {
			t.Errorf("1.%d: risk reported %v, want %v", minor, got, want)
		}
	}
}
