# hashicorp/terraform-provider-kubernetes@3a33fb6: docs/index.md, examples/example_8.tf
provider "kubernetes" {
  ignore_annotations = [
    "^service\\.beta\\.kubernetes\\.io\\/aws-load-balancer.*",
  ]
}
