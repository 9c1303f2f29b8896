# What the cluster serves, before planning a migration. The provider reads the kubeconfig
# named by KUBE_CONFIG_PATH (make demo sets it to its own loopback cluster).
terraform {
  required_version = ">= 1.8"
  required_providers {
    k8scidr = {
      source = "k8scidr/k8scidr"
    }
  }
}

provider "k8scidr" {}

data "k8scidr_cluster_info" "this" {}

output "server_version" {
  value = data.k8scidr_cluster_info.this.server_version
}

output "service_cidr_api_version" {
  description = "ServiceCIDR API the provider will use; null means the cluster cannot add Service ranges."
  value       = data.k8scidr_cluster_info.this.service_cidr_api_version
}

output "calico_api_group" {
  value = data.k8scidr_cluster_info.this.calico_api_group
}

output "node_count" {
  value = data.k8scidr_cluster_info.this.node_count
}

output "default_service_cidrs" {
  description = "The apiserver's --service-cluster-ip-range, as the default ServiceCIDR shows it."
  value       = data.k8scidr_cluster_info.this.default_service_cidrs
}
