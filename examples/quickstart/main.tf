# A first plan on your own cluster, read-only: what the migration must know of the cluster, read
# from it instead of guessed, the preflight's findings, and which Service would get which new IP.
# Only data sources are read (examples/rbac/k8scidr-plan.yaml's role is enough), nothing is
# written to the cluster, and the state stays in this directory. Its output migration_tfvars is
# examples/migration's terraform.tfvars for this cluster.
terraform {
  required_version = ">= 1.8"
  required_providers {
    k8scidr = {
      source  = "k8scidr/k8scidr"
      version = "~> 0.1.0"
    }
  }
  backend "local" {}
}

# The cluster: KUBE_CONFIG_PATH (or the same settings as the hashicorp/kubernetes provider).
provider "k8scidr" {}

variable "new_service_cidr" {
  description = "The range the Services move to, e.g. 172.24.0.0/15: outside every range the cluster and its networks use."
  type        = string
}

variable "new_pod_cidr" {
  description = "The range the pods move to (a new Calico pool), e.g. 172.16.0.0/13. Used only where Calico's IPAM hands out pod addresses (output pod_stages says whether it does)."
  type        = string
}

variable "reserved" {
  description = "Ranges that belong to something else, the reason for the move, by name: e.g. { tailscale = \"100.64.0.0/10\" }."
  type        = map(string)
}

data "k8scidr_cluster_info" "this" {}

locals {
  facts = data.k8scidr_cluster_info.this
  # The Service ranges kube-apiserver runs (its flag where its pods show it, the default
  # ServiceCIDR) and the enabled Calico pools: the old ranges, as the cluster says.
  service_ranges = distinct(concat(flatten([for r in local.facts.apiserver_service_ranges : split(",", r)]), lookup(local.facts.service_cidrs, "kubernetes", [])))
  enabled_pools  = [for p in local.facts.calico_pools : p if !p.disabled]
  old_service    = try(local.service_ranges[0], null)
  # The pod stages (examples/migration's 5 and 6: a new Calico pool, the old one disabled and
  # drained, the pods rolled) move pod addresses only where Calico's IPAM hands them out. On any
  # other network (Cilium, Flannel, kubenet, the AWS VPC CNI, Calico on host-local IPAM) the old
  # pod range is null: examples/migration then runs the Service stages 1 to 4 alone, and the pod
  # range moves by the CNI's own steps (output pod_stages; README "What your cluster needs").
  pod_stages = local.facts.pod_range_steps == null
  old_pod    = !local.pod_stages ? null : length(local.enabled_pools) == 1 ? local.enabled_pools[0].cidr : try(local.facts.cluster_cidrs[0], null)
}

# Only what concerns this cluster: no pod range is checked where no pod stage runs.
data "k8scidr_preflight" "this" {
  old_service_cidrs = local.service_ranges
  new_service_cidrs = [var.new_service_cidr]
  old_pod_cidrs     = compact([local.old_pod])
  new_pod_cidrs     = local.pod_stages ? [var.new_pod_cidr] : []
  reserved          = var.reserved
}

data "k8scidr_service_moves" "this" {
  target_cidrs = [var.new_service_cidr]
}

output "facts" {
  description = "What the cluster runs: the migration's old ranges, the CNI, kube-proxy and DNS."
  value = {
    kubernetes        = local.facts.server_version
    service_ranges    = local.service_ranges
    calico_pools      = { for p in local.facts.calico_pools : p.name => "${p.cidr}${p.disabled ? " (disabled)" : ""}" }
    cluster_cidrs     = local.facts.cluster_cidrs
    cni               = local.facts.cni == null ? "none this provider knows" : "${local.facts.cni} (${local.facts.cni_daemonset}), IPAM ${coalesce(local.facts.ipam, "not shown")}"
    kube_proxy        = "${coalesce(local.facts.kube_proxy_mode, "iptables (unset)")}, clusterCIDR ${coalesce(local.facts.kube_proxy_cluster_cidr, "unset")}"
    dns               = "${coalesce(local.facts.dns_service, "no kube-dns")} ${join(", ", local.facts.dns_service_ips)}"
    coredns_ttl       = local.facts.coredns_ttl
    coredns_cache_ttl = local.facts.coredns_cache_ttl
    node_local_dns    = local.facts.node_local_dns
    service_cidr_api  = local.facts.service_cidr_api_version
    service_cidr_gate = local.facts.service_cidr_gate
    unread            = local.facts.unread
  }
}

output "findings" {
  description = "The preflight's blockers and warnings: what to fix before stage 1, and what each stage must mind."
  value       = [for f in data.k8scidr_preflight.this.findings : "${f.severity}: ${f.summary}: ${f.detail} Fix: ${f.fix}" if f.severity != "info"]
}

output "pod_stages" {
  description = "Whether examples/migration's pod stages (5 and 6) move this cluster's pods, and if not, how its pod range moves instead."
  value = local.pod_stages ? "Stages 5 and 6 move the pods from ${coalesce(local.old_pod, "the old Calico pool")} to ${var.new_pod_cidr}: Calico's IPAM hands out their addresses." : join(" ", [
    "Left out: stages 5 and 6 (pod_cidrs.old is null). ${local.facts.pod_range_steps}",
  "examples/migration's Service stages 1 to 4 work as on any cluster."])
}

output "service_moves" {
  description = "Which Service would get which new IP (stage 1 plans these again, from the cluster as it is then)."
  value       = data.k8scidr_service_moves.this.moves
}

output "migration_tfvars" {
  description = "examples/migration's terraform.tfvars for this cluster: terraform output -raw migration_tfvars > ../migration/terraform.tfvars"
  value       = <<-EOT
    # Read from the cluster ${local.facts.cluster_id} (${local.facts.server}).
    reserved      = ${jsonencode(var.reserved)}
    service_cidrs = { old = ${jsonencode(local.old_service)}, new = ${jsonencode(var.new_service_cidr)} }
    pod_cidrs     = { old = ${jsonencode(local.old_pod)}, new = ${jsonencode(var.new_pod_cidr)} }
    # On kOps: kops = { non_masquerade_cidr = "<holds the new pod range>", network_cidr = "<kops get cluster -o yaml>" }
  EOT
}
