# hashicorp/terraform-provider-kubernetes@3a33fb6: _examples/gke/gke-oidc/k8s.tf
provider "kubernetes" {
  host  = "https://${data.google_container_cluster.upstream.endpoint}"
  token = data.google_client_config.provider.access_token
  cluster_ca_certificate = base64decode(
    data.google_container_cluster.upstream.master_auth[0].cluster_ca_certificate,
  )
}
