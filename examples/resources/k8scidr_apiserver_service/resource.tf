# After kube-apiserver was restarted with --service-cluster-ip-range=172.24.0.0/15 (kOps:
# serviceClusterIPRange, with the old 100.64.0.1 kept in additionalSans): default/kubernetes
# moves to 172.24.0.1, and 100.64.0.1 keeps answering through a bridge until the pods started
# before the move have restarted.
resource "k8scidr_apiserver_service" "this" {
  service_cidrs = k8scidr_service_cidr.new.cidrs
}

# The pods whose KUBERNETES_SERVICE_HOST is the old IP: those started before default/kubernetes
# was recreated, read at plan from the cluster (not from the resource, which would make the
# roll's plan unknown until apply).
data "k8scidr_cluster_info" "this" {}

data "k8scidr_workload_restarts" "apiserver" {
  started_before       = data.k8scidr_cluster_info.this.apiserver_service_created_at
  include_host_network = true # host-network pods got the old KUBERNETES_SERVICE_HOST too
}
