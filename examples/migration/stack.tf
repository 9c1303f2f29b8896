# What only the root module may hold: examples/fleet runs main.tf as a module, once per cluster,
# with its own backend, providers and imports.

terraform {
  # The state outlives the pipeline's runner: a Secret in the cluster, locked by a Lease, with the
  # credentials of KUBE_CONFIG_PATH, as the provider's (examples/rbac/k8scidr-state.yaml grants
  # them). S3, GCS or azurerm do the same (see ../ci/README.md).
  backend "kubernetes" {
    namespace     = "k8scidr-state"
    secret_suffix = "k8scidr-migration"
  }
}

# The cluster: KUBE_CONFIG_PATH (or the same settings as the hashicorp/kubernetes provider).
provider "k8scidr" {}

# Stage 5 takes over the installer's pool to disable it (main.tf, k8scidr_calico_ippool.old).
import {
  for_each = var.stage == 5 && local.old_pool_name != null ? toset([local.old_pool_name]) : toset([])
  to       = k8scidr_calico_ippool.old[each.key]
  id       = each.key
}
