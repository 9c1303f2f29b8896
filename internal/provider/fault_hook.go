// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build k8scidr_faults

// Fault injection for the crash, kill and fault suites, compiled only into the provider they
// build (-tags k8scidr_faults), never into the shipped one.
package provider

import (
	"context"
	"os"
	"time"
)

// At each point of every move (AFTER_DELETE: between delete and create, where a kill leaves
// Services deleted; BEFORE_DELETE: between the journal write and the delete, where another
// client changes a journaled Service; AFTER_ADMISSION: between admission's answer and the
// delete, where another client's change is seen only by the delete's precondition):
//   - K8SCIDR_FAULT_DELAY_<point> (a duration) holds the move that long: many moves are then in
//     flight at a kill;
//   - K8SCIDR_FAULT_GATE_<point> (a file) holds the move until the file exists: a barrier the
//     test opens once it has made its change, instead of a window it must hit.
//
// Both end early when the apply is interrupted, as the moves in flight then go on.
func init() {
	faultHold = func(point string) func(context.Context, string) {
		delay, _ := time.ParseDuration(os.Getenv("K8SCIDR_FAULT_DELAY_" + point))
		gate := os.Getenv("K8SCIDR_FAULT_GATE_" + point)
		if delay == 0 && gate == "" {
			return nil
		}
		return func(ctx context.Context, _ string) {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			if gate != "" {
				_ = os.WriteFile(gate+".reached", nil, 0o600) // a move is held here: the test may act
			}
			for deadline := time.Now().Add(5 * time.Minute); gate != "" && time.Now().Before(deadline); {
				if _, err := os.Stat(gate); err == nil {
					return
				}
				select {
				case <-time.After(10 * time.Millisecond):
				case <-ctx.Done():
					return
				}
			}
		}
	}
	faultClock = func() func() time.Time {
		skew, _ := time.ParseDuration(os.Getenv("K8SCIDR_FAULT_CLOCK_SKEW"))
		if skew == 0 {
			return nil
		}
		return func() time.Time { return time.Now().Add(skew) }
	}
}
