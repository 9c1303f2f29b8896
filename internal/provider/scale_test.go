// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"testing"
	"time"
)

// TestAccScale_progress1000 (make test-scale; make test leaves it out for its time) moves 1,000
// Services with terraform apply, as an operator watching `kubectl get events -n kube-system -w`
// sees it: progress Events on the journal's Lease while it runs (done of total, rate, time
// left), one Finished Event with all 1,000, the resource's summary saying so (and no warning), and
// nothing lost.
func TestAccScale_progress1000(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	const n, ns = 1000, "scale"
	c, before, config := movingCluster(t, ns, n)
	w := newCLIWorkspace(t, config(faultTarget))
	start := time.Now()
	out := w.must("apply", "-auto-approve")
	took := time.Since(start)
	t.Logf("the apply of %d moves took %s", n, took.Round(time.Millisecond))
	checkProgressEvents(t, c.Kube, n, took, w, out)
	if err := checkNothingLostIn(c.Kube, ns, before, faultTarget); err != nil {
		t.Fatal(err)
	}
	w.converged()
}
