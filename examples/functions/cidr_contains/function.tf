output "kube_dns_in_new_range" {
  value = provider::k8scidr::cidr_contains("172.24.0.0/15", "172.24.0.10") # true
}
