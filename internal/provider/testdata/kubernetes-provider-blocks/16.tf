# hashicorp/terraform-provider-kubernetes@3a33fb6: docs/index.md, examples/example_3.tf
provider "kubernetes" {
  config_paths = [
    "/path/to/config_a.yaml",
    "/path/to/config_b.yaml"
  ]
}
