# The whole migration as one reviewed configuration: a kOps cluster whose
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

variable "dns_moved_at" {
  description = "The DNS move's time (stage 1's output dns_moved_at), to pin stage 2's restarts; null: kube-dns's creation time."
  type        = string
  default     = null
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
  # The DNS bridge answers on kube-dns's old IP from the move until stage 3.
  dns_bridge = var.stage < 3
}

# ---- Preflight -------------------------------------------------------------------------------

# Everything outside the Services and pools that would break the move — a tool that applies the
# old ClusterIP again, DNS pinned to the old IP, pods pinned to the old pool, policies naming the
# old ranges, fail-closed webhooks — read at plan from variables only. The first resource refuses
# to apply while a blocker remains; warnings show in every plan through the check below.
data "k8scidr_preflight" "migration" {
  old_service_cidrs = [var.service_cidrs.old]
  new_service_cidrs = [var.service_cidrs.new]
  old_pod_cidrs     = [var.pod_cidrs.old]
  new_pod_cidrs     = [var.pod_cidrs.new]
  reserved          = local.reserved
}

check "preflight_warnings" {
  assert {
    condition     = data.k8scidr_preflight.migration.warnings == 0
    error_message = join("\n", [for f in data.k8scidr_preflight.migration.findings : "${f.summary}: ${f.detail} Fix: ${f.fix}" if f.severity == "warning"])
  }
}

# Where things stand when the plan is made: every range of the cluster against the reserved
# ones. Read at plan time (only variables here), so the review sees it; what an apply changes
# shows in the next plan.
data "k8scidr_network_overlaps" "now" {
  reserved = local.reserved
}

# ---- Services --------------------------------------------------------------------------------

# The new Service range, Ready before anything moves.
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = [var.service_cidrs.new]

  # The moved Services hold it: on destroy, leave it Terminating instead of waiting.
  wait_for_deletion = false

  lifecycle {
    precondition {
      condition = data.k8scidr_preflight.migration.blockers == 0
      error_message = join("\n", [for f in data.k8scidr_preflight.migration.findings :
      "${f.summary}: ${f.detail} Fix: ${f.fix}" if f.severity == "blocker"])
    }
  }
}

# Which Service moves to which IP, kube-dns first: read from the cluster at plan time and stored
# in the saved plan, so the apply does what the pull request showed. It takes only variables: a
# reference to a resource would make Terraform read it during apply, after the review. While
# dns_bridge is on, a bridge Service answers DNS on kube-dns's old IP after it moves.
data "k8scidr_service_moves" "services" {
  target_cidrs = [var.service_cidrs.new]
  dns_bridge   = local.dns_bridge
}

# LoadBalancer Services keep their ClusterIPs (their cloud load balancers point at them), and the
# DNS bridge keeps kube-dns's old IP: keep_cidrs are the smallest ranges that keep those
# addresses, outside the new range, valid once the old default range is retired. With the
# bridge switched off (stage 3) its keep-range goes in the same apply.
resource "k8scidr_service_cidr" "keep" {
  for_each = toset(data.k8scidr_service_moves.services.keep_cidrs)
  name     = "keep-${replace(replace(each.key, ".", "-"), "/", "-")}"
  cidrs    = [each.key]
}

# Every ClusterIP and NodePort Service moves to exactly the IPs the plan shows. A move that no
# longer holds at apply (the Service deleted or replaced meanwhile) is reported in not_moved,
# and the next plan shows what remains.
resource "k8scidr_service_recreation" "services" {
  plan = data.k8scidr_service_moves.services

  depends_on = [k8scidr_service_cidr.new, k8scidr_service_cidr.keep]
}

# Stage 2, after kubelet clusterDNS moved: pods resolve through the server they started with,
# so every pod started before kube-dns got its new IP restarts. The time is kube-dns's creation
# as the data source reads it (known at plan time, also when the recreation has changes of its
# own); set dns_moved_at to stage 1's output of the same name to pin it, so that kube-dns
# recreated later by hand does not make this restart every pod again.
data "k8scidr_workload_restarts" "dns" {
  count          = var.stage >= 2 ? 1 : 0
  started_before = coalesce(var.dns_moved_at, data.k8scidr_service_moves.services.dns_moved_at)
}

resource "k8scidr_workload_roll" "dns" {
  count = var.stage >= 2 ? 1 : 0
  plan  = data.k8scidr_workload_restarts.dns[0]
  first = ["kube-system/deployment/coredns"]

  depends_on = [k8scidr_service_recreation.services]
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

# Every workload with a pod in the old pool when the plan is made restarts, CoreDNS first,
# after the old pool is disabled; new pods take addresses from the new pool.
data "k8scidr_workload_restarts" "pods" {
  count     = var.stage >= 4 ? 1 : 0
  pod_cidrs = [var.pod_cidrs.old]
}

resource "k8scidr_workload_roll" "pods" {
  count   = var.stage >= 4 ? 1 : 0
  plan    = data.k8scidr_workload_restarts.pods[0]
  first   = ["kube-system/deployment/coredns"]
  include = var.roll_include

  depends_on = [k8scidr_calico_ippool.old, k8scidr_calico_ippool.new]
}

# ---- What the plan and apply report -------------------------------------------------------------

# Once the migration is done (stage 5 applied: the old pool is gone) nothing may overlap the
# reserved ranges but the keep-ranges, which do on purpose (LoadBalancer ClusterIPs stay where
# they are; listed in the output keep_ranges). Before that, the old ranges still overlap by
# design, and stage 5's own plan still sees the pool it destroys: no warning.
locals {
  unaccepted_overlaps = [for c in data.k8scidr_network_overlaps.now.conflicts : c
  if !(startswith(c.a.name, "keep-") && c.a.kind == "service_cidr") && !(startswith(c.b.name, "keep-") && c.b.kind == "service_cidr")]
  old_pool_gone = var.stage == 5 && !anytrue([for c in data.k8scidr_network_overlaps.now.conflicts :
  c.a.kind == "calico_pool" && c.a.name == var.old_pool_name || c.b.kind == "calico_pool" && c.b.name == var.old_pool_name])
}

check "clear_of_reserved_ranges" {
  assert {
    condition     = !local.old_pool_gone || length(local.unaccepted_overlaps) == 0
    error_message = "After the migration still overlapping (node podCIDRs move when the nodes are replaced): ${join("; ", [for c in local.unaccepted_overlaps : "${c.a.kind} ${c.a.name} ${c.a.cidr} / ${c.b.kind} ${c.b.name} ${c.b.cidr}"])}"
  }
}

# What a plan moves is in its diff of k8scidr_service_recreation.services.plan.moves (every Service's
# old and new IPs). It is not echoed in an output: an output is stored at apply, so one copied
# from the data source would hold that plan's list after the apply and show a change in every
# later plan. The outputs below converge: they change only when an apply does something.
output "moved_services" {
  description = "Services moved by the last apply that moved any: old IPs -> new IPs."
  value       = { for k, v in k8scidr_service_recreation.services.recreated : k => "${join(",", v.old_ips)} -> ${join(",", v.new_ips)}" }
}

output "dns_moved_at" {
  description = "When this configuration moved kube-dns: set var.dns_moved_at to it to pin stage 2's restarts."
  value       = k8scidr_service_recreation.services.dns_moved_at
}

output "not_moved" {
  description = "Planned moves the last apply left alone because they no longer held, with the reason."
  value       = k8scidr_service_recreation.services.not_moved
}

output "kubelet_cluster_dns" {
  description = "Set kubelet clusterDNS (kOps: kubeDNS.serverIP) to this before stage 2: the IPs kube-dns got (the planned ones unless another client took one during the apply)."
  value       = coalesce(k8scidr_service_recreation.services.dns_service_ips, data.k8scidr_service_moves.services.dns_service_ips)
}

output "kops_cluster_spec" {
  description = "What kops edit cluster must say once Services and pods have moved (Calico IPAM): serviceClusterIPRange, nonMasqueradeCIDR, podCIDR, kubeDNS.serverIP, kubelet clusterDNS, allocateNodeCIDRs."
  value       = provider::k8scidr::kops_networking(var.service_cidrs.new, var.pod_cidrs.new, var.non_masquerade_cidr).yaml
}

output "keep_ranges" {
  description = "ServiceCIDRs kept for LoadBalancer and DNS-bridge IPs in the old range."
  value       = [for k in k8scidr_service_cidr.keep : k.cidrs[0]]
}
