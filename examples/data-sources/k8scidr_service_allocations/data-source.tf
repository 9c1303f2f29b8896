# Which Services are still outside the new range, and the ranges that keep the IPs that stay
# (LoadBalancers, the bridges, also_keep) valid once the old range is retired. Only literals
# and variables here: a resource's attribute would make Terraform read it during apply, and
# for_each below could not be planned.
data "k8scidr_service_allocations" "migration" {
  cidrs = ["172.24.0.0/15"]

  # Services that stay at their IPs besides the LoadBalancers, e.g. one whose ClusterIP is
  # written into a firewall rule (a Service named here must exist):
  # also_keep = ["ingress/public-gateway"]
}

resource "k8scidr_service_cidr" "keep" {
  for_each = toset(data.k8scidr_service_allocations.migration.covering_cidrs)
  name     = "keep-${replace(replace(each.value, "/", "-"), ":", "-")}"
  cidrs    = [each.value]
}
