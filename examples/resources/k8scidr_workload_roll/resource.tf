# Every workload with a pod in the old pool when the plan is made, read at plan time.
data "k8scidr_workload_restarts" "pool_move" {
  pod_cidrs = ["100.96.0.0/11"]
}

# After the new pool exists and the old one is disabled: restart exactly those, CoreDNS first,
# and calico-node once so the nodes' tunnel addresses move too. A workload that no longer has
# a pod in the old pool at apply (rolled meanwhile, scaled down) is left alone and listed in
# not_rolled.
resource "k8scidr_workload_roll" "pool_move" {
  plan    = data.k8scidr_workload_restarts.pool_move
  first   = ["kube-system/deployment/coredns"]
  include = ["kube-system/daemonset/calico-node"]

  parallelism = 5
  timeouts {
    create = "1h"
    update = "1h"
  }

  depends_on = [k8scidr_calico_ippool.old]
}

# After the cluster DNS Service moved and kubelets use its new IP: restart every pod started
# before the move, so each gets the new DNS server. The time comes from the moves data source
# (the DNS Service's creation), so the list is known at plan time.
data "k8scidr_workload_restarts" "dns_move" {
  started_before     = data.k8scidr_service_moves.this.dns_moved_at
  exclude_namespaces = ["kube-system"]
}

resource "k8scidr_workload_roll" "dns_move" {
  plan = data.k8scidr_workload_restarts.dns_move
}
