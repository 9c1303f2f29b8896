# Which Services move into 172.24.0.0/15 and to which IPs, kube-dns first. Give it whole to
# k8scidr_service_recreation (see its example), whose planned `plan.moves` the plan shows. An
# output copied from `moves`, as here, is stored at apply: after the moves are made it still
# holds them, so the next plan shows an output change until the next apply or refresh.
data "k8scidr_service_moves" "this" {
  target_cidrs = ["172.24.0.0/15"]
}

output "services_to_move" {
  value = data.k8scidr_service_moves.this.moves # "ns/name" = "100.64.0.10 to 172.24.0.10 (ClusterIP, uid …)"
}

output "skipped" {
  value = data.k8scidr_service_moves.this.skipped
}
