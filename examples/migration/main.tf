# The whole migration as one reviewed configuration: a kOps cluster whose
# Service range 100.64.0.0/13 and Calico pool 100.96.0.0/11 collide with Tailscale's
# 100.64.0.0/10 moves to 172.24.0.0/15 and 172.16.0.0/13, live. Raise `stage` one step per
# pull request; the steps outside the Kubernetes API go between them (see README.md).
terraform {
  required_version = ">= 1.8"
  required_providers {
    k8scidr = {
      source = "k8scidr/k8scidr"
      # One version for the plan and the apply: commit .terraform.lock.hcl beside this file
      # (`terraform providers lock`), and the pipelines' `init -lockfile=readonly` use it.
      version = "~> 0.1.0"
    }
  }
}

# The backend and the provider configuration are in stack.tf: this file is also the module of
# examples/fleet, one instance per cluster.

variable "stage" {
  description = <<-EOT
    1: new Service ranges and the Service move (DNS bridge on).
    2: after kube-apiserver runs on the new range: default/kubernetes moves (apiserver bridge on).
    3: after kubelet clusterDNS moved: restart the pods started before the moves.
    4: the bridges off (DNS, apiserver, old IPs).
    5: new pod pool, old pool disabled, pods rolled.
    6: the old pool destroyed once drained.
    Stages 5 and 6 move pods only where Calico's IPAM hands out their addresses: with pod_cidrs.old
    null they are left out, and the pod range moves by the CNI's own steps.
  EOT
  type        = number
  default     = 1
  validation {
    condition     = var.stage >= 1 && var.stage <= 6
    error_message = "stage is 1 to 6."
  }
}

# What differs per cluster has no default: a plan on a guessed range is worse than no plan.
# examples/quickstart reads them from the cluster (read-only, its state local) and prints them as
# a terraform.tfvars for this directory; the first resource below refuses a range the cluster
# does not run (data source k8scidr_cluster_info).

variable "reserved" {
  description = "Ranges that belong to something else, the reason for the move, by name: e.g. { tailscale = \"100.64.0.0/10\" }."
  type        = map(string)
}

variable "service_cidrs" {
  description = "The Service range kube-apiserver runs now (old: its --service-cluster-ip-range) and the one it moves to (new)."
  type        = object({ old = string, new = string })
}

variable "pod_cidrs" {
  description = "The Calico pool's range pods are in now (old) and the new pool's (new). old = null where Calico's IPAM does not hand out the pods' addresses (Cilium, Flannel, kubenet, the AWS VPC CNI; examples/quickstart writes it so): the pod stages 5 and 6 are then left out."
  type        = object({ old = string, new = string })
}

variable "kops" {
  description = "On a kOps cluster: the nonMasqueradeCIDR after the move (it must hold the new pod range) and the networkCIDR (kops get cluster -o yaml; null where the cloud has none), for output kops_steps. kOps' AWS default 172.20.0.0/16 lies inside 172.16.0.0/12, and kops_networking refuses it: choose other ranges then. null: not kOps."
  type        = object({ non_masquerade_cidr = string, network_cidr = string })
  default     = null
}

variable "old_pool_name" {
  description = "The pool stage 5 disables; null: the Calico pool whose CIDR is pod_cidrs.old (kOps and calico-node name it default-ipv4-ippool)."
  type        = string
  default     = null
}

variable "apiserver_moved_at" {
  description = "The apiserver Service's move (stage 2's output apiserver_moved_at), to pin stage 3's restarts; null: default/kubernetes's creation time."
  type        = string
  default     = null
}

variable "canary_image" {
  description = "Stage 5's canary pod, which must get an address in the new pool before the roll: an image every node can pull and that runs without arguments (the kubelet's sandbox image from your registry or mirror)."
  type        = string
  default     = null
}

variable "roll_include" {
  description = "Workloads restarted with the pod move regardless of their pods, e.g. kube-system/daemonset/calico-node (its tunnel addresses move when it restarts)."
  type        = list(string)
  default     = []
}

locals {
  # What every later plan is checked against.
  reserved = var.reserved
  # The cluster as it is at plan time (k8scidr_cluster_info, read below).
  facts = data.k8scidr_cluster_info.this
  # Stages 5 and 6 move pods through Calico's IPAM; without it (pod_cidrs.old null) they are left out.
  pod_stages = var.pod_cidrs.old != null
  # The ranges kube-apiserver runs: its flag where its pods show it, and the default ServiceCIDR.
  apiserver_ranges = distinct(concat(flatten([for r in local.facts.apiserver_service_ranges : split(",", r)]), lookup(local.facts.service_cidrs, "kubernetes", [])))
  old_pool_name    = !local.pod_stages ? null : var.old_pool_name != null ? var.old_pool_name : try([for p in local.facts.calico_pools : p.name if p.cidr == var.pod_cidrs.old][0], null)
  # The ranges' own names for the objects made for them: services-172-24-0-0-15.
  new_service_cidr_name = "services-${replace(var.service_cidrs.new, "/[./:]+/", "-")}"
  new_pool_name         = local.pod_stages ? "pods-${replace(var.pod_cidrs.new, "/[./:]+/", "-")}" : null
  # The bridges answer on the old IPs of kube-dns, default/kubernetes and every moved Service
  # from their moves until stage 4.
  bridges = var.stage < 4
}

# ---- Preflight -------------------------------------------------------------------------------

# What the cluster runs at plan time: the ranges the variables are checked against (the first
# resource's preconditions), the old pool's name, and default/kubernetes's creation (stage 3
# restarts the pods started before it was recreated, which also started before kube-dns moved).
data "k8scidr_cluster_info" "this" {}

# Everything outside the Services and pools that would break the move — a tool that applies the
# old ClusterIP again, DNS pinned to the old IP, pods pinned to the old pool, policies naming the
# old ranges, fail-closed webhooks — read at plan from variables only. The first resource refuses
# to apply while a blocker remains; each warning shows in the plans of its stage (the check below,
# and the resources' own "Migration Hazard" warnings).
data "k8scidr_preflight" "migration" {
  old_service_cidrs = [var.service_cidrs.old]
  new_service_cidrs = [var.service_cidrs.new]
  old_pod_cidrs     = local.pod_stages ? [var.pod_cidrs.old] : []
  new_pod_cidrs     = local.pod_stages ? [var.pod_cidrs.new] : []
  reserved          = local.reserved
}

# The warnings no resource shows at its own stage (a finding's shown_by names the resource that
# does, when its stage comes): so each plan warns only of what concerns it.
check "preflight_warnings" {
  assert {
    condition = length([for f in data.k8scidr_preflight.migration.findings : f if f.severity == "warning" && f.shown_by == null]) == 0
    error_message = join("\n", [for f in data.k8scidr_preflight.migration.findings :
    "${f.summary}: ${f.detail} Fix: ${f.fix}" if f.severity == "warning" && f.shown_by == null])
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
  name  = local.new_service_cidr_name
  cidrs = [var.service_cidrs.new]

  # The moved Services hold it: on destroy, leave it Terminating instead of waiting.
  wait_for_deletion = false

  lifecycle {
    # Before kube-apiserver moves (stage 2), the old range is the one it runs.
    precondition {
      condition     = var.stage > 1 || length(local.apiserver_ranges) == 0 || contains(local.apiserver_ranges, var.service_cidrs.old)
      error_message = "service_cidrs.old is ${var.service_cidrs.old}, but kube-apiserver runs ${join(", ", local.apiserver_ranges)} (k8scidr_cluster_info: apiserver_service_ranges, service_cidrs[\"kubernetes\"]): set service_cidrs.old to the range it runs."
    }
    # Until the old pool is gone (stage 6), pod_cidrs.old is a Calico pool's.
    precondition {
      condition     = var.stage > 5 || !local.pod_stages || length(local.facts.calico_pools) == 0 || local.old_pool_name != null
      error_message = "No Calico pool has pod_cidrs.old ${coalesce(var.pod_cidrs.old, "null")}; the cluster's pools are ${join(", ", [for p in local.facts.calico_pools : "${p.name} ${p.cidr}"])} (k8scidr_cluster_info: calico_pools): set pod_cidrs.old to the pool pods are in, or old_pool_name."
    }
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
  dns_bridge   = local.bridges
}

# LoadBalancer Services keep their ClusterIPs (their cloud load balancers point at them), and the
# DNS bridge keeps kube-dns's old IP: keep_cidrs are the smallest ranges that keep those
# addresses, outside the new range, valid once the old default range is retired. With the
# bridge switched off (stage 4) its keep-range goes in the same apply.
resource "k8scidr_service_cidr" "keep" {
  for_each = toset(data.k8scidr_service_moves.services.keep_cidrs)
  name     = "keep-${replace(replace(replace(each.key, ".", "-"), "/", "-"), ":", "-")}"
  cidrs    = [each.key]

  # Once the old default range is retired (stage 2), the DNS bridge's keep-range is the only range
  # holding its IP, and Terraform deletes it before the recreation removes the bridge in the same
  # apply: leave it Terminating (no new allocations, the bridge keeps its IP) instead of waiting
  # for a bridge that goes later in the apply. kube-controller-manager removes it then.
  wait_for_deletion = false
}

# Every ClusterIP and NodePort Service moves to exactly the IPs the plan shows. A move that no
# longer holds at apply (the Service deleted or replaced meanwhile) is reported in not_moved,
# and the next plan shows what remains. Each moved Service keeps answering on its old IP
# through an old-IP bridge until stage 4, for the clients that kept it (nginx upstreams, JVM
# caches, <SVC>_SERVICE_HOST); stage 3 restarted those, and stage 4's removal is refused while
# one of them still runs.
resource "k8scidr_service_recreation" "services" {
  plan           = data.k8scidr_service_moves.services
  old_ip_bridges = local.bridges ? "all" : "dns"

  depends_on = [k8scidr_service_cidr.new, k8scidr_service_cidr.keep]
}

# Stage 2, once every kube-apiserver runs with --service-cluster-ip-range on the new range (and
# the old 100.64.0.1 still in its certificate): default/kubernetes moves to the new range's first
# address, and a bridge keeps 100.64.0.1 answering with the apiserver's endpoints for the pods
# that started before (their KUBERNETES_SERVICE_HOST). The old default ServiceCIDR is retired: no
# new Service gets an IP in it; it stays Terminating while the old-IP bridges hold IPs in it,
# and kube-apiserver recreates it in the new range once they go (stage 4).
resource "k8scidr_apiserver_service" "this" {
  count         = var.stage >= 2 ? 1 : 0
  service_cidrs = [var.service_cidrs.new]
  bridge        = local.bridges

  depends_on = [k8scidr_service_recreation.services, k8scidr_service_cidr.keep]
}

# Stage 3, after kubelet clusterDNS moved: pods resolve through the DNS server and reach the API
# through the address they started with, so every pod started before default/kubernetes moved
# restarts. The time is read at plan (also when a resource has changes of its own); set
# apiserver_moved_at to stage 2's output of the same name to pin it, so that default/kubernetes
# recreated later by hand does not make this restart every pod again.
data "k8scidr_workload_restarts" "moved" {
  count          = var.stage >= 3 ? 1 : 0
  started_before = coalesce(var.apiserver_moved_at, data.k8scidr_cluster_info.this.apiserver_service_created_at)
  # Host-network pods too (calico-node, kube-proxy, node agents): they resolve through the node,
  # but got the old KUBERNETES_SERVICE_HOST like every pod.
  include_host_network = true
}

resource "k8scidr_workload_roll" "moved" {
  count = var.stage >= 3 ? 1 : 0
  plan  = data.k8scidr_workload_restarts.moved[0]
  first = ["kube-system/deployment/coredns"]

  depends_on = [k8scidr_service_recreation.services, k8scidr_apiserver_service.this]
}

# ---- Pods ------------------------------------------------------------------------------------

# Stage 5: the new pod pool, with the old pool's encapsulation and NAT (the plan warns when they
# differ: an IPIP cluster whose new pool says Never breaks cross-node traffic).
resource "k8scidr_calico_ippool" "new" {
  count        = var.stage >= 5 && local.pod_stages ? 1 : 0
  name         = local.new_pool_name
  cidr         = var.pod_cidrs.new
  ipip_mode    = "Always"
  nat_outgoing = true
}

# The installer's pool, imported (stack.tf: import blocks belong to the root module) and
# disabled: no new pod gets an address from it. Nothing else about it changes. At stage 6 it is
# destroyed, which waits until no live pod holds an address.
resource "k8scidr_calico_ippool" "old" {
  for_each        = var.stage == 5 && local.old_pool_name != null ? toset([local.old_pool_name]) : toset([])
  name            = each.key
  cidr            = var.pod_cidrs.old
  disabled        = true
  deletion_policy = "wait_for_drain"
  release_leaked  = true

  depends_on = [k8scidr_calico_ippool.new]
}

# Before anything restarts, one pod shows that new pods now get addresses from the new pool; if
# it does not (the Tigera operator re-enabled the old pool, a node the new pool's node_selector
# misses, a namespace pinned to the old pool), the apply stops here, and the roll waits.
resource "k8scidr_pod_canary" "new_pool" {
  count        = var.stage == 5 && local.pod_stages ? 1 : 0
  expect_cidrs = [var.pod_cidrs.new]
  image        = var.canary_image

  lifecycle {
    precondition {
      condition     = var.canary_image != null
      error_message = "Set canary_image (an image every node can pull, such as the kubelet's sandbox image): stage 5 proves with one pod that new pods get addresses from the new pool before every workload restarts."
    }
  }

  depends_on = [k8scidr_calico_ippool.old, k8scidr_calico_ippool.new]
}

# Every workload with a pod in the old pool when the plan is made restarts, CoreDNS first,
# after the old pool is disabled and the canary got a new-pool address; new pods take
# addresses from the new pool.
data "k8scidr_workload_restarts" "pods" {
  count     = var.stage >= 5 && local.pod_stages ? 1 : 0
  pod_cidrs = [var.pod_cidrs.old]
}

resource "k8scidr_workload_roll" "pods" {
  count   = var.stage >= 5 && local.pod_stages ? 1 : 0
  plan    = data.k8scidr_workload_restarts.pods[0]
  first   = ["kube-system/deployment/coredns"]
  include = var.roll_include

  depends_on = [k8scidr_calico_ippool.old, k8scidr_calico_ippool.new, k8scidr_pod_canary.new_pool]
}

# ---- What the plan and apply report -------------------------------------------------------------

# Once the migration is done (stage 6 applied: the old pool is gone) nothing may overlap the
# reserved ranges but the keep-ranges, which do on purpose (LoadBalancer ClusterIPs stay where
# they are; listed in the output keep_ranges). Before that, the old ranges still overlap by
# design, and stage 6's own plan still sees the pool it destroys: no warning.
locals {
  unaccepted_overlaps = [for c in data.k8scidr_network_overlaps.now.conflicts : c
  if !(startswith(c.a.name, "keep-") && c.a.kind == "service_cidr") && !(startswith(c.b.name, "keep-") && c.b.kind == "service_cidr")]
  old_pool_gone = var.stage == 6 && !anytrue([for c in data.k8scidr_network_overlaps.now.conflicts :
  c.a.kind == "calico_pool" && c.a.cidr == var.pod_cidrs.old || c.b.kind == "calico_pool" && c.b.cidr == var.pod_cidrs.old])
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
  description = "Services moved by the last apply that moved any: \"old IPs to new IPs\"."
  value       = k8scidr_service_recreation.services.recreated
}

output "services_summary" {
  description = "How the last apply that moved Services went (a successful apply prints no warning: this says it)."
  value       = k8scidr_service_recreation.services.summary
}

output "next_steps" {
  description = "What is left to do outside Terraform after the last apply that moved Services (clusterDNS and the node roll, restarts, the apiserver Service)."
  value       = k8scidr_service_recreation.services.next_steps
}

output "apiserver_moved_at" {
  description = "When this configuration moved default/kubernetes: set var.apiserver_moved_at to it to pin stage 3's restarts."
  value       = one(k8scidr_apiserver_service.this[*].moved_at)
}

output "not_moved" {
  description = "Planned moves the last apply left alone because they no longer held, with the reason."
  value       = k8scidr_service_recreation.services.not_moved
}

output "kubelet_cluster_dns" {
  description = "Set kubelet clusterDNS (kOps: kubeDNS.serverIP) to this before stage 3: the IPs kube-dns got (the planned ones unless another client took one during the apply)."
  value       = coalesce(k8scidr_service_recreation.services.dns_service_ips, data.k8scidr_service_moves.services.dns_service_ips)
}

output "kops_steps" {
  description = "On kOps (var.kops set): the kops edit cluster changes, each with when it belongs and the rolling update it needs: the gates (1.29-1.32, before stage 1), service_range (after stage 1, before stage 2), pod_range (after stage 6)."
  value = var.kops == null ? null : provider::k8scidr::kops_networking(var.service_cidrs.new, var.pod_cidrs.new, var.kops.non_masquerade_cidr, var.kops.network_cidr,
    coalesce(k8scidr_service_recreation.services.dns_service_ips, data.k8scidr_service_moves.services.dns_service_ips)[0], var.service_cidrs.old,
  { kubernetes_version = data.k8scidr_cluster_info.this.server_version, calico_ipam = tostring(local.pod_stages) }).steps
}

output "pod_stages" {
  description = "Said once, in the first plan, where pod_cidrs.old is null: the pod stages are left out."
  value       = local.pod_stages ? null : "Stages 5 and 6 are left out: pod_cidrs.old is null, so no Calico pool is added, disabled or drained and no pod is rolled for its address. This cluster's pod range moves by its CNI's own steps (examples/quickstart's output pod_stages names them); stages 1 to 4 move the Services as on any CNI."
}

output "canary_pod_ips" {
  description = "Stage 5: the address the canary pod got from the new pool before the roll."
  value       = try(k8scidr_pod_canary.new_pool[0].pod_ips, null)
}

output "keep_ranges" {
  description = "ServiceCIDRs kept for LoadBalancer and DNS-bridge IPs in the old range."
  value       = [for k in k8scidr_service_cidr.keep : k.cidrs[0]]
}
