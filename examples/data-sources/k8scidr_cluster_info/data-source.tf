data "k8scidr_cluster_info" "this" {}

# Stop early on a cluster that cannot take a second Service range.
check "service_cidr_api" {
  assert {
    condition     = data.k8scidr_cluster_info.this.service_cidr_api_version != null
    error_message = "This cluster serves no ServiceCIDR API: Kubernetes 1.31+ (v1beta1) or 1.33+ (v1) is needed."
  }
}
