resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]
}

# Which Services are still outside the new range, and the ranges that keep the IPs that stay
# (LoadBalancers, the DNS bridge) valid once the old range is retired.
data "k8scidr_service_allocations" "migration" {
  cidrs     = k8scidr_service_cidr.new.cidrs
  also_keep = ["ingress/public-gateway"]
}

resource "k8scidr_service_cidr" "keep" {
  for_each = toset(data.k8scidr_service_allocations.migration.covering_cidrs)
  name     = "keep-${replace(replace(each.value, "/", "-"), ":", "-")}"
  cidrs    = [each.value]
}
