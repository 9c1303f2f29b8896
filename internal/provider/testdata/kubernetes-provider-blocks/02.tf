# hashicorp/terraform-provider-kubernetes@3a33fb6: _examples/deferred-actions/cluster.tf
provider "kubernetes" {
  host                   = kind_cluster.demo.endpoint
  cluster_ca_certificate = kind_cluster.demo.cluster_ca_certificate
  client_certificate     = kind_cluster.demo.client_certificate
  client_key             = kind_cluster.demo.client_key
}
