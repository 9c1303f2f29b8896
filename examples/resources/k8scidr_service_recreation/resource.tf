# The new Service range, Ready before any Service moves (the reference orders the apply).
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]
}

# Move every ClusterIP and NodePort Service out of 100.64.0.0/13. `terraform plan` lists each
# Service's new IP under `pending` (kube-dns 100.64.0.10 -> 172.24.0.10) and why others stay
# under `skipped` (headless, ExternalName, LoadBalancer, default/kubernetes, ...).
resource "k8scidr_service_recreation" "this" {
  target_cidrs = k8scidr_service_cidr.new.cidrs

  exclude_namespaces = ["kube-public"]
  exclude            = ["monitoring/legacy-exporter"]

  # kube-dns moves first (the default), then a bridge Service keeps its old IP answering
  # until kubelets' clusterDNS points at the new one. Set dns_bridge = false afterwards.
  dns_bridge = true

  timeouts = {
    create = "30m"
  }
}

# kube-dns's new IP, for the kubelet clusterDNS setting (kOps: kubeDNS.serverIP).
output "kube_dns_new_ip" {
  value = try(k8scidr_service_recreation.this.dns_service_ips[0], null)
}

# Pods started before this keep the old DNS server: restart them (k8scidr_workload_roll).
output "services_moved_at" {
  value = k8scidr_service_recreation.this.completed_at
}
