# Where the pods are during a pool move, and whether every node's podCIDR fits the new
# --cluster-cidr before kube-controller-manager is restarted with it (it crash-loops while any node's podCIDR lies outside it).
data "k8scidr_pod_allocations" "move" {
  cidrs        = ["10.233.64.0/18", "10.234.0.0/16"]
  cluster_cidr = ["10.234.0.0/16"]
}

output "nodes_outside_new_cluster_cidr" {
  value = [for n in data.k8scidr_pod_allocations.move.nodes : n.name if contains(n.inside_cluster_cidr, false)]
}
