data "k8scidr_load_balancers" "all" {}

# LoadBalancer ClusterIPs no Ready ServiceCIDR covers any more (ClusterIPOutOfRange events):
# keep a range for them, or recreate the Services.
output "uncovered_load_balancers" {
  value = [for k, lb in data.k8scidr_load_balancers.all.load_balancers : k if !lb.covered]
}

# When LoadBalancer Services are recreated on purpose (include_load_balancers), their cloud
# load balancers are new: keep a DNS record per Service pointing at the current ingress.
resource "aws_route53_record" "lb" {
  for_each = { for k, lb in data.k8scidr_load_balancers.all.load_balancers : k => lb if length(lb.ingress_hostnames) > 0 }
  zone_id  = var.zone_id
  name     = "${each.value.name}.${each.value.namespace}.example.com"
  type     = "CNAME"
  ttl      = 60
  records  = [each.value.ingress_hostnames[0]]
}
