//go:build k8scidr_faults

// Fault injection for the crash, kill and fault suites, compiled only into the provider they
// build (-tags k8scidr_faults), never into the shipped one.
package provider

import (
	"os"
	"time"
)

// K8SCIDR_FAULT_DELAY_AFTER_DELETE widens the window in which a killed apply leaves Services
// deleted; K8SCIDR_FAULT_DELAY_BEFORE_DELETE the one in which another client changes a
// journaled Service.
func init() {
	faultDelay = func(point string) time.Duration {
		d, _ := time.ParseDuration(os.Getenv("K8SCIDR_FAULT_DELAY_" + point))
		return d
	}
}
