# Terraform 1.5 and later: the same import as a block, planned and reviewed like any change.
import {
  to = k8scidr_apiserver_service.this
  id = "172.24.0.0/15"
}
