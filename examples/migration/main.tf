# The whole migration of write-ups 000/001 as one reviewed configuration: a kOps cluster whose
# Service range 100.64.0.0/13 and Calico pool 100.96.0.0/11 collide with Tailscale's
# 100.64.0.0/10 moves to 172.24.0.0/15 and 172.16.0.0/13, live. Raise `stage` one step per
# pull request; the steps outside the Kubernetes API go between them (see README.md).
terraform {
  required_version = ">= 1.8"
  required_providers {
    k8scidr = {
      source = "k8scidr/k8scidr"
    }
  }
}

variable "stage" {
  description = <<-EOT
    1: new Service ranges and the Service move (DNS bridge on).
    2: after kubelet clusterDNS moved: restart the pods started before the DNS move.
    3: DNS bridge off.
    4: after the default Service range is retired: new pod pool, old pool disabled, pods rolled.
    5: the old pool destroyed once drained.
  EOT
  type        = number
  default     = 1
  validation {
    condition     = var.stage >= 1 && var.stage <= 5
    error_message = "stage is 1 to 5."
  }
}

variable "reserved" {
  description = "Ranges that belong to something else: the reason for the move."
  type        = map(string)
  default     = { tailscale = "100.64.0.0/10" }
}

variable "service_cidrs" {
  type    = object({ old = string, new = string })
  default = { old = "100.64.0.0/13", new = "172.24.0.0/15" }
}

variable "pod_cidrs" {
  type    = object({ old = string, new = string })
  default = { old = "100.96.0.0/11", new = "172.16.0.0/13" }
}

variable "non_masquerade_cidr" {
  description = "kOps' nonMasqueradeCIDR after the move: it must hold both new ranges."
  type        = string
  default     = "172.16.0.0/12"
}

variable "old_pool_name" {
  description = "The pool the installer created (kOps and calico-node name it default-ipv4-ippool)."
  type        = string
  default     = "default-ipv4-ippool"
}

variable "roll_include" {
  description = "Workloads restarted with the pod move regardless of their pods, e.g. kube-system/daemonset/calico-node (its tunnel addresses move when it restarts)."
  type        = list(string)
  default     = []
}

# The cluster: KUBE_CONFIG_PATH (or the same settings as the hashicorp/kubernetes provider).
provider "k8scidr" {}

locals {
  # What every later plan is checked against.
  reserved = var.reserved
}

# Where things stand: every range of the cluster against the reserved ones.
data "k8scidr_network_overlaps" "now" {
  reserved   = local.reserved
  depends_on = [k8scidr_service_recreation.services, k8scidr_calico_ippool.old, k8scidr_workload_roll.pods]
}

# ---- Services --------------------------------------------------------------------------------

# The new Service range, Ready before anything moves.
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = [var.service_cidrs.new]

  # The moved Services hold it: on destroy, leave it Terminating instead of waiting.
  wait_for_deletion = false
}

# LoadBalancer Services keep their ClusterIPs (their cloud load balancers point at them), and the
# DNS bridge keeps kube-dns's old IP: covering_cidrs are the smallest ranges that keep those
# addresses, outside the new range, valid once the old default range is retired.
data "k8scidr_service_allocations" "staying" {
  cidrs = [var.service_cidrs.new]
}

resource "k8scidr_service_cidr" "keep" {
  for_each = toset(data.k8scidr_service_allocations.staying.covering_cidrs)
  name     = "keep-${replace(replace(each.key, ".", "-"), "/", "-")}"
  cidrs    = [each.key]
}

# Every ClusterIP and NodePort Service moves, kube-dns first, to the IPs the plan shows; a
# bridge Service answers DNS on kube-dns's old IP until kubelet clusterDNS has moved.
resource "k8scidr_service_recreation" "services" {
  target_cidrs = k8scidr_service_cidr.new.cidrs
  first        = ["kube-system/kube-dns"]
  dns_bridge   = var.stage < 3

  depends_on = [k8scidr_service_cidr.keep]
}

# Stage 2, after kubelet clusterDNS moved: pods resolve through the server they started with,
# so every pod started before the kube-dns move restarts.
resource "k8scidr_workload_roll" "dns" {
  count          = var.stage >= 2 ? 1 : 0
  started_before = k8scidr_service_recreation.services.completed_at
  first          = ["kube-system/deployment/coredns"]
}

# ---- Pods ------------------------------------------------------------------------------------

# Stage 4: the new pod pool, with the old pool's encapsulation and NAT (the plan warns when they
# differ: an IPIP cluster whose new pool says Never breaks cross-node traffic).
resource "k8scidr_calico_ippool" "new" {
  count        = var.stage >= 4 ? 1 : 0
  name         = "pods-172-16"
  cidr         = var.pod_cidrs.new
  ipip_mode    = "Always"
  nat_outgoing = true
}

# The installer's pool, imported and disabled: no new pod gets an address from it. Nothing else
# about it changes. At stage 5 it is destroyed, which waits until no live pod holds an address.
import {
  for_each = var.stage == 4 ? toset([var.old_pool_name]) : toset([])
  to       = k8scidr_calico_ippool.old[each.key]
  id       = each.key
}

resource "k8scidr_calico_ippool" "old" {
  for_each        = var.stage == 4 ? toset([var.old_pool_name]) : toset([])
  name            = each.key
  cidr            = var.pod_cidrs.old
  disabled        = true
  deletion_policy = "wait_for_drain"
  release_leaked  = true

  depends_on = [k8scidr_calico_ippool.new]
}

# Every workload with a pod still in the old pool restarts, CoreDNS first; new pods take
# addresses from the new pool.
resource "k8scidr_workload_roll" "pods" {
  count     = var.stage >= 4 ? 1 : 0
  pod_cidrs = [var.pod_cidrs.old]
  first     = ["kube-system/deployment/coredns"]
  include   = var.roll_include

  depends_on = [k8scidr_calico_ippool.old, k8scidr_calico_ippool.new]
}

# ---- What the plan and apply report -------------------------------------------------------------

check "clear_of_reserved_ranges" {
  assert {
    condition     = data.k8scidr_network_overlaps.now.conflict_free
    error_message = "Still overlapping: ${join("; ", [for c in data.k8scidr_network_overlaps.now.conflicts : "${c.a.kind} ${c.a.name} ${c.a.cidr} / ${c.b.kind} ${c.b.name} ${c.b.cidr}"])}"
  }
}

output "moved_services" {
  description = "Services moved by the last apply: old IPs -> new IPs."
  value       = { for k, v in k8scidr_service_recreation.services.recreated : k => "${join(",", v.old_ips)} -> ${join(",", v.new_ips)}" }
}

output "kubelet_cluster_dns" {
  description = "Set kubelet clusterDNS (kOps: kubeDNS.serverIP) to this before stage 2."
  value       = k8scidr_service_recreation.services.dns_service_ips
}

output "kops_cluster_spec" {
  description = "What kops edit cluster must say once Services and pods have moved (Calico IPAM): serviceClusterIPRange, nonMasqueradeCIDR, podCIDR, kubeDNS.serverIP, kubelet clusterDNS, allocateNodeCIDRs."
  value       = provider::k8scidr::kops_networking(var.service_cidrs.new, var.pod_cidrs.new, var.non_masquerade_cidr).yaml
}

output "keep_ranges" {
  description = "ServiceCIDRs kept for LoadBalancer and DNS-bridge IPs in the old range."
  value       = [for k in k8scidr_service_cidr.keep : k.cidrs[0]]
}

output "conflicts" {
  value = [for c in data.k8scidr_network_overlaps.now.conflicts : "${c.a.kind} ${c.a.name} ${c.a.cidr} overlaps ${c.b.kind} ${c.b.name} ${c.b.cidr}"]
}
