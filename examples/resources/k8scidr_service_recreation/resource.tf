# The new Service range, Ready before any Service moves (depends_on below orders the apply).
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]
}

# What moves where, read at plan time: every ClusterIP and NodePort Service outside
# 172.24.0.0/15 with its new IP (kube-dns 100.64.0.10 -> 172.24.0.10), and why others stay
# (headless, ExternalName, LoadBalancer, default/kubernetes, ...). Only variables and literals
# here: a reference to a resource would make Terraform read it during apply instead.
data "k8scidr_service_moves" "this" {
  target_cidrs       = ["172.24.0.0/15"]
  exclude_namespaces = ["kube-public"]
  exclude            = ["monitoring/legacy-exporter"]

  # The cluster DNS Service moves first, then a bridge Service keeps its old IP answering
  # until kubelets' clusterDNS points at the new one. Set dns_bridge = false afterwards.
  dns_bridge = true
}

# Makes exactly those moves: the data source, whole. `terraform plan` shows each of them
# under `plan.moves`.
resource "k8scidr_service_recreation" "this" {
  plan = data.k8scidr_service_moves.this

  # By default ("all") every moved Service keeps answering on its old ClusterIP (an old-IP
  # bridge each), for clients that cached it. Set "dns" once the pods started before the moves
  # have restarted: the bridges go (refused while such a pod runs).
  # old_ip_bridges = "dns"

  timeouts {
    create = "30m"
  }

  depends_on = [k8scidr_service_cidr.new]
}

# The cluster DNS Service's IP after the moves, for the kubelet clusterDNS setting (kOps:
# kubeDNS.serverIP): the IP it got, which is the planned one unless another client took that
# during the apply.
output "kube_dns_new_ip" {
  value = try(k8scidr_service_recreation.this.dns_service_ips[0], data.k8scidr_service_moves.this.dns_service_ips[0], null)
}

# Planned moves the apply left alone because they no longer held.
output "not_moved" {
  value = k8scidr_service_recreation.this.not_moved
}
