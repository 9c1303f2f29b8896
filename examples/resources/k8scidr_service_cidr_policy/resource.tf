# After the migration: only ranges inside the new Service range and the LoadBalancer keep-range
# may be added. The policy depends on the ranges it allows, so they exist before it is enforced.
resource "k8scidr_service_cidr_policy" "services" {
  name          = "restrict-service-cidrs"
  allowed_cidrs = concat(k8scidr_service_cidr.new.cidrs, [for k in k8scidr_service_cidr.keep : k.cidrs[0]])
}

# Or: no new ServiceCIDR at all (the cluster keeps only the apiserver's default range). Start
# with Warn to see, in the apiserver's answers, what the policy would refuse.
resource "k8scidr_service_cidr_policy" "frozen" {
  name               = "no-new-service-cidrs"
  deny_new           = true
  validation_actions = ["Warn", "Audit"]
}
