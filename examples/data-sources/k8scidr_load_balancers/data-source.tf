data "k8scidr_load_balancers" "all" {}

# LoadBalancer ClusterIPs no Ready ServiceCIDR covers any more (ClusterIPOutOfRange events):
# keep a range for them, or recreate the Services.
output "uncovered_load_balancers" {
  value = [for k, lb in data.k8scidr_load_balancers.all.load_balancers : k if !lb.covered]
}

# When LoadBalancer Services are recreated on purpose (include_load_balancers), their cloud
# load balancers are new: feed the current ingress of each to the DNS records that name it
# (e.g. a for_each over this map in your DNS provider's record resource).
output "load_balancer_ingress" {
  value = { for k, lb in data.k8scidr_load_balancers.all.load_balancers : k => lb.ingress_hostnames if length(lb.ingress_hostnames) > 0 }
}
