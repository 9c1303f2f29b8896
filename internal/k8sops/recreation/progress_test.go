// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"testing"
	"time"
)

// TestProgressText: done/total, what did not move, the rate over everything handled, and the
// time left at that rate.
func TestProgressText(t *testing.T) {
	for _, c := range []struct {
		p    progressCounts
		want string
	}{
		{progressCounts{total: 1000, elapsed: 2 * time.Second}, "0 of 1000 Services moved, 2s elapsed"},
		{progressCounts{done: 400, notMoved: 100, total: 1000, elapsed: 20 * time.Second},
			"400 of 1000 Services moved, 100 not moved (no longer held), 25.0/s, about 20s left, 20s elapsed"},
		{progressCounts{done: 1000, total: 1000, elapsed: 40 * time.Second}, "1000 of 1000 Services moved, 25.0/s, 40s elapsed"},
	} {
		if got := c.p.text(); got != c.want {
			t.Errorf("%+v: %q\nwant %q", c.p, got, c.want)
		}
	}
}
