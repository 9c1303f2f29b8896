# The kubelet's sandbox image, from the registry or mirror your nodes pull from.
variable "pause_image" {
  type    = string
  default = "registry.example.com/pause:3.10" # replace with your own
}

# Stage 5 of a pod range move: after the old pool is disabled, one pod must get its address from
# the new pool before every workload restarts. If it does not (the old pool re-enabled by the
# Tigera operator, a node the new pool's node_selector misses, a namespace pinned to the old
# pool), the apply fails here and the roll does not start.
resource "k8scidr_pod_canary" "new_pool" {
  expect_cidrs = [k8scidr_calico_ippool.new.cidr]
  image        = var.pause_image # an image every node can pull: the kubelet's own sandbox image

  # Runs again whenever the old pool is switched.
  triggers = { old_pool_disabled = tostring(k8scidr_calico_ippool.old.disabled) }
}

resource "k8scidr_workload_roll" "pods" {
  plan = data.k8scidr_workload_restarts.pods

  depends_on = [k8scidr_pod_canary.new_pool]
}
