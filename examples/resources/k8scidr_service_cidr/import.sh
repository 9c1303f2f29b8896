# A ServiceCIDR is imported by name, the default range included.
terraform import k8scidr_service_cidr.old kubernetes
