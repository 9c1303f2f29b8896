# hashicorp/terraform-provider-kubernetes@3a33fb6: docs/guides/alpha-manifest-migration-guide.md
provider "kubernetes" {
    config_path = "/my/kube/config"
    experiments {
        manifest_resource = true
    }
}
