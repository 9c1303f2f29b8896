# hashicorp/terraform-provider-kubernetes@3a33fb6: _examples/job/main.tf
provider "kubernetes" {
  config_path = var.kube_config_file
}
