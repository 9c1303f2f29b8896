# The kube-dns IP after the move, for kOps' kubeDNS.serverIP and kubelet clusterDNS, known
# before anything is applied.
output "new_cluster_dns" {
  value = provider::k8scidr::cidr_map_offset("100.64.0.10", "100.64.0.0/13", "172.24.0.0/15") # "172.24.0.10"
}
