# examples/migration on every cluster of a fleet, in one plan and one apply: OpenTofu ≥ 1.9,
# whose provider blocks take for_each. Each cluster gets a provider instance of its own and an
# instance of the migration (cluster/main.tf is examples/migration/main.tf), so the plan and its
# summary show each cluster's moves under module.migration["<name>"]. Terraform has no provider
# for_each: run terraform.sh instead, a stack per cluster.
terraform {
  required_version = ">= 1.9"
  required_providers {
    k8scidr = {
      source  = "k8scidr/k8scidr"
      version = "~> 0.1.0"
    }
  }
  # The whole fleet's state, in the cluster KUBE_CONFIG_PATH names (a management cluster, or one
  # of the fleet): examples/rbac/k8scidr-state.yaml there. Or S3, GCS, azurerm (../ci/README.md).
  backend "kubernetes" {
    namespace     = "k8scidr-state"
    secret_suffix = "k8scidr-fleet"
  }
}

variable "clusters" {
  description = <<-EOT
    The fleet, by name: each cluster's kubeconfig (and context), its id (the provider refuses any
    other cluster: kube-system's UID, data source k8scidr_cluster_info), its ranges and the pool
    stage 5 disables (examples/quickstart reads them from the cluster), and the stage it is at,
    with the per-stage inputs of examples/migration. Clusters move through the stages on their
    own: raise one cluster's stage per pull request, or all of them together.
  EOT
  type = map(object({
    config_path        = string
    config_context     = optional(string)
    cluster_id         = optional(string)
    stage              = optional(number, 1)
    apiserver_moved_at = optional(string)
    canary_image       = optional(string)
    roll_include       = optional(list(string), [])
    reserved           = map(string)
    service_cidrs      = object({ old = string, new = string })
    pod_cidrs          = object({ old = string, new = string })
    kops               = optional(object({ non_masquerade_cidr = string, network_cidr = string }))
    old_pool_name      = string
  }))
}

provider "k8scidr" {
  alias    = "cluster"
  for_each = var.clusters

  config_path    = each.value.config_path
  config_context = each.value.config_context
  cluster_id     = each.value.cluster_id
}

module "migration" {
  source   = "./cluster"
  for_each = var.clusters
  providers = {
    k8scidr = k8scidr.cluster[each.key]
  }

  stage              = each.value.stage
  apiserver_moved_at = each.value.apiserver_moved_at
  canary_image       = each.value.canary_image
  roll_include       = each.value.roll_include
  old_pool_name      = each.value.old_pool_name
  reserved           = each.value.reserved
  service_cidrs      = each.value.service_cidrs
  pod_cidrs          = each.value.pod_cidrs
  kops               = each.value.kops
}

# Stage 5 takes over each cluster's installer pool to disable it (examples/migration/stack.tf
# does this for one cluster; import blocks belong to the root module).
import {
  for_each = { for name, c in var.clusters : name => c if c.stage == 5 }
  to       = module.migration[each.key].k8scidr_calico_ippool.old[each.value.old_pool_name]
  id       = each.value.old_pool_name
}

# What each cluster's kOps configuration needs, by cluster.
output "kops_steps" {
  value = { for name, m in module.migration : name => m.kops_steps }
}

# Stage 2's move of default/kubernetes, by cluster: that cluster's apiserver_moved_at for stage 3.
output "apiserver_moved_at" {
  value = { for name, m in module.migration : name => m.apiserver_moved_at }
}
