data "k8scidr_calico_ippools" "all" {}

# Addresses still allocated in each pool, and blocks no pool contains any more.
output "pool_usage" {
  value = { for p in data.k8scidr_calico_ippools.all.pools : p.name => "${p.used}/${p.capacity} in ${p.blocks} blocks" }
}

output "orphaned_blocks" {
  value = data.k8scidr_calico_ippools.all.orphaned_blocks
}
