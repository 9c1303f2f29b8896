# The workloads with a pod still in the old pool, and what matches but cannot be rolled.
data "k8scidr_workload_restarts" "pool_move" {
  pod_cidrs = ["100.96.0.0/11"]
}

output "to_restart" {
  value = data.k8scidr_workload_restarts.pool_move.workloads
}

output "cannot_roll" {
  value = data.k8scidr_workload_restarts.pool_move.unmanaged
}
