package main

import (
	"testing"
	"time"
)

// TestOldIPColumn: the column renders every mix of old IPs served again, never served again and
// never taken down (moves not made) without indexing an empty pool (the CI panic of stop 46).
func TestOldIPColumn(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		runs []measure
		want string
	}{
		{"no old IPs", []measure{{}}, "–"},
		{"none bridged", []measure{{oldIPNever: 3, oldIPs: 3}}, "never served again"},
		{"all back", []measure{{oldIPWindows: []time.Duration{10 * ms, 30 * ms, 20 * ms}, oldIPs: 3}}, "20 / 30 / 30"},
		{"some never", []measure{{oldIPWindows: []time.Duration{10 * ms}, oldIPNever: 1, oldIPs: 2}}, "10 / 10 / 10 (1 of 2 never)"},
		{"none down", []measure{{oldIPs: 4}}, "none went down and came back (0 of 4 never served again)"},
		{"none down, some never", []measure{{oldIPNever: 1, oldIPs: 4}}, "none went down and came back (1 of 4 never served again)"},
	} {
		r := &row{runs: c.runs}
		if got := r.oldIPColumn(); got != c.want {
			t.Errorf("%s: oldIPColumn() = %q, want %q", c.name, got, c.want)
		}
	}
}
