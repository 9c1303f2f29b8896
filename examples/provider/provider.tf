# The same settings as a hashicorp/kubernetes provider block: copy yours.
provider "k8scidr" {
  config_path    = "~/.kube/config"
  config_context = "production"

  # Client-side rate limit (defaults 50/100, well above client-go's 5/10).
  qps   = 50
  burst = 100
}

# Or explicit credentials, e.g. from a cloud credential plugin:
provider "k8scidr" {
  alias                  = "eks"
  host                   = "https://203.0.113.10"
  cluster_ca_certificate = file("ca.pem")
  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", "production"]
  }
}
