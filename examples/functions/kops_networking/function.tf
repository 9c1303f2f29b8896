# The kOps cluster-spec changes of a move off kOps' default ranges (which overlap Tailscale's),
# step by step: paste each step's `yaml` into `kops edit cluster` when its `when` says, then
# run its `roll`.
output "kops_steps" {
  value = provider::k8scidr::kops_networking(
    "172.24.0.0/15",                                    # the new Service range
    "172.16.0.0/13",                                    # the new pod range (Calico pool)
    "172.16.0.0/12",                                    # the new nonMasqueradeCIDR
    "10.20.0.0/16",                                     # the cluster's networkCIDR (null on GCE and others without one)
    data.k8scidr_service_moves.this.dns_service_ips[0], # kube-dns's IP after the move
    "100.64.0.0/13",                                    # the old Service range: its .1 stays in the apiserver certificate
  ).steps
}

# With NodeLocal DNSCache (kubelet keeps 169.254.20.10) on Kubernetes 1.31 (adds the gates step):
output "kops_yaml" {
  value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", "10.20.0.0/16", "172.24.0.10", "100.64.0.0/13",
  { node_local_dns_ip = "169.254.20.10", kubernetes_version = data.k8scidr_cluster_info.this.server_version }).yaml
}
