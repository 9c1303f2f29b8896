// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"slices"
	"strings"
	"testing"
)

// TestAPIServerNewIPs: kube-apiserver's kubernetesservice controller makes default/kubernetes
// single-stack on the first address of its primary range, whatever the number of families; a
// second family's range is checked, never given an address.
func TestAPIServerNewIPs(t *testing.T) {
	for _, tc := range []struct {
		ranges []string
		want   []string
		err    string
	}{
		{ranges: []string{"172.24.0.0/15"}, want: []string{"172.24.0.1"}},
		{ranges: []string{"172.24.0.0/15", "fd00:24::/108"}, want: []string{"172.24.0.1"}},
		{ranges: []string{"fd00:24::/108", "172.24.0.0/15"}, want: []string{"fd00:24::1"}},
		{ranges: []string{"172.24.0.0/15", "fd00:24::/128"}, err: "fd00:24::/128 holds no address"},
		{ranges: []string{"172.24.0.0/33"}, err: "172.24.0.0/33"},
	} {
		got, err := APIServerNewIPs(tc.ranges)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one saying %q", tc.ranges, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%v: %v (%v), want %v", tc.ranges, got, err, tc.want)
		}
	}
}
