# Terraform 1.5 and later: the same import as a block, planned and reviewed like any change.
import {
  to = k8scidr_service_cidr_policy.services
  id = "restrict-service-cidrs"
}
