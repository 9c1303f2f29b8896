package provider

import "fmt"

// recreationHCL is a k8scidr_service_moves data source "this" with dataArgs and the
// k8scidr_service_recreation "this" that makes its moves, with resourceArgs. The resource's
// target_cidrs is target (an HCL expression, e.g. a ServiceCIDR's cidrs, which orders it after
// that range), or the data source's own when target is "".
func recreationHCL(target, dataArgs, resourceArgs string) string {
	const name = "this"
	moves := "data.k8scidr_service_moves." + name
	if target == "" {
		target = moves + ".target_cidrs"
	}
	return fmt.Sprintf(`
data "k8scidr_service_moves" %[1]q {
%[2]s
}

resource "k8scidr_service_recreation" %[1]q {
  target_cidrs = %[3]s
  moves        = %[4]s.moves
  restore      = %[4]s.restore
  first        = %[4]s.first_moves
  dns_service  = %[4]s.dns_service
%[5]s
}
`, name, dataArgs, target, moves, resourceArgs)
}

// rollHCL is a k8scidr_workload_restarts data source with dataArgs and the
// k8scidr_workload_roll of the same name that restarts its workloads, with resourceArgs.
func rollHCL(name, dataArgs, resourceArgs string) string {
	return fmt.Sprintf(`
data "k8scidr_workload_restarts" %[1]q {
%[2]s
}

resource "k8scidr_workload_roll" %[1]q {
  workloads      = data.k8scidr_workload_restarts.%[1]s.workloads
  pod_cidrs      = data.k8scidr_workload_restarts.%[1]s.pod_cidrs
  started_before = data.k8scidr_workload_restarts.%[1]s.started_before
%[3]s
}
`, name, dataArgs, resourceArgs)
}
