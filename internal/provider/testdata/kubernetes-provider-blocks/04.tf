# hashicorp/terraform-provider-kubernetes@3a33fb6: _examples/eks/kubernetes-config/main.tf
provider "kubernetes" {
  host                   = data.aws_eks_cluster.default.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.default.certificate_authority[0].data)
  token                  = data.aws_eks_cluster_auth.default.token
}
