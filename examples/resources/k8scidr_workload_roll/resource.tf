# After the new pool exists and the old one is disabled: restart every workload with a pod still
# in the old pool, CoreDNS first, and calico-node so the nodes' tunnel addresses move too.
resource "k8scidr_workload_roll" "pool_move" {
  pod_cidrs = ["100.96.0.0/11"]
  first     = ["kube-system/deployment/coredns"]
  include   = ["kube-system/daemonset/calico-node"]

  parallelism = 5
  timeouts = {
    create = "1h"
    update = "1h"
  }

  depends_on = [k8scidr_calico_ippool.old]
}

# After kube-dns moved: restart every pod started before the move, so each gets the new DNS
# server. started_before is unknown until the Service move is applied; pending then shows
# "(known after apply)".
resource "k8scidr_workload_roll" "dns_move" {
  started_before     = k8scidr_service_recreation.services.completed_at
  exclude_namespaces = ["kube-system"]
}
