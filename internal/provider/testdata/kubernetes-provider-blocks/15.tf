# hashicorp/terraform-provider-kubernetes@3a33fb6: docs/index.md, examples/example_1.tf
provider "kubernetes" {
  config_path    = "~/.kube/config"
  config_context = "my-context"
}
