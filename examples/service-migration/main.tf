# Moving a cluster's Services out of kOps' default 100.64.0.0/13 (which collides with
# Tailscale's 100.64.0.0/10) into 172.24.0.0/15, live. `make demo` applies this to a loopback
# cluster; the provider reads the kubeconfig named by KUBE_CONFIG_PATH.
terraform {
  required_version = ">= 1.8"
  required_providers {
    k8scidr = {
      source = "k8scidr/k8scidr"
    }
  }
}

provider "k8scidr" {}

# Stage 1: the new Service range, Ready before anything moves.
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]

  # The moved Services hold it: on destroy, leave it Terminating instead of waiting.
  wait_for_deletion = false
}

# Stage 2: every ClusterIP/NodePort Service moves, kube-dns first, with the IPs the plan shows.
resource "k8scidr_service_recreation" "this" {
  target_cidrs = k8scidr_service_cidr.new.cidrs
}

output "moved" {
  description = "Services moved by the last apply: old IPs -> new IPs."
  value       = { for k, v in k8scidr_service_recreation.this.recreated : k => "${join(",", v.old_ips)} -> ${join(",", v.new_ips)}" }
}

output "skipped" {
  value = k8scidr_service_recreation.this.skipped
}

output "kubelet_cluster_dns" {
  description = "Set kubelet clusterDNS to this; the DNS bridge answers on the old IP meanwhile."
  value       = k8scidr_service_recreation.this.dns_service_ips
}
