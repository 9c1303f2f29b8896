# hashicorp/terraform-provider-kubernetes@3a33fb6: docs/index.md, examples/example_7.tf
provider "kubernetes" {
  ignore_annotations = [
    "cni\\.projectcalico\\.org\\/podIP",
    "cni\\.projectcalico\\.org\\/podIPs",
  ]
}
