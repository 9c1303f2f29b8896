data "k8scidr_cluster_info" "this" {}

# Stop early on a cluster that cannot take a second Service range.
check "service_cidr_api" {
  assert {
    condition     = data.k8scidr_cluster_info.this.service_cidr_api_version != null
    error_message = "This cluster serves no ServiceCIDR API: networking.k8s.io/v1 from Kubernetes 1.33; on 1.29-1.32 only with the MultiCIDRServiceAllocator gate and its --runtime-config."
  }
}

# The old ranges as the cluster runs them, for a migration's variables: no guess.
output "old_ranges" {
  value = {
    services = lookup(data.k8scidr_cluster_info.this.service_cidrs, "kubernetes", data.k8scidr_cluster_info.this.apiserver_service_ranges)
    pods     = [for p in data.k8scidr_cluster_info.this.calico_pools : p.cidr if !p.disabled]
    dns      = data.k8scidr_cluster_info.this.dns_service_ips
    cni      = data.k8scidr_cluster_info.this.cni
  }
}
