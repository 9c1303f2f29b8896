# The kOps cluster spec after moving off kOps' default ranges (Calico IPAM): paste `yaml` into
# `kops edit cluster`, then roll the cluster.
output "kops_spec" {
  value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12").yaml
}

# Without Calico IPAM (kube-controller-manager allocates node podCIDRs):
output "kube_dns_ip" {
  value = provider::k8scidr::kops_networking("172.24.0.0/15", "172.16.0.0/13", "172.16.0.0/12", false).kube_dns_server_ip # "172.24.0.10"
}
