# A pool is imported by name, e.g. the pool calico-node or kOps created.
terraform import k8scidr_calico_ippool.old default-ipv4-ippool
