# A policy this provider wrote is imported by name (policy and binding share it).
terraform import k8scidr_service_cidr_policy.services restrict-service-cidrs
