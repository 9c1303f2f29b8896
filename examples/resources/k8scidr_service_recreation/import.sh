# The ID is the target ranges, comma-separated. Import records nothing in the cluster: the
# next plan shows what is still outside the target.
terraform import k8scidr_service_recreation.this 172.24.0.0/15
