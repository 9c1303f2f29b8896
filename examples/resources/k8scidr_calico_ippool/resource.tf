# The new pod range. Match the cluster's encapsulation and NAT (the plan warns otherwise): an
# IPIP cluster whose new pool says Never breaks cross-node traffic for every pod that moves.
resource "k8scidr_calico_ippool" "new" {
  name         = "pods-172-16"
  cidr         = "172.16.0.0/13"
  ipip_mode    = "Always"
  nat_outgoing = true
}

# The installer's pool, imported (terraform import k8scidr_calico_ippool.old default-ipv4-ippool)
# and disabled: no new pod gets an address from it. Everything not set here keeps its live value.
resource "k8scidr_calico_ippool" "old" {
  name     = "default-ipv4-ippool"
  cidr     = "100.96.0.0/11"
  disabled = true

  # Destroy waits until no live pod holds an address in it (restart them with
  # k8scidr_workload_roll), releases addresses whose pods are gone, then deletes it.
  deletion_policy = "wait_for_drain"
  release_leaked  = true
  timeouts {
    delete = "1h"
  }

  depends_on = [k8scidr_calico_ippool.new]
}
