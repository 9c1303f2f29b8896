data "k8scidr_service_cidrs" "all" {}

# How full each Service range is, e.g. before adding one or retiring the old one.
output "service_range_usage" {
  value = {
    for sc in data.k8scidr_service_cidrs.all.service_cidrs :
    sc.name => "${sc.allocated}/${sc.capacity}${sc.terminating ? " (terminating)" : ""}"
  }
}
