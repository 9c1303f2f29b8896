# hashicorp/terraform-provider-kubernetes@3a33fb6: _examples/in-cluster/provider.tf
provider "kubernetes" {}
