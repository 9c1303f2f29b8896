# hashicorp/terraform-provider-kubernetes@3a33fb6: docs/guides/getting-started.html.md, docs/index.md, examples/example_2.tf
provider "kubernetes" {
  config_path = "~/.kube/config"
}
