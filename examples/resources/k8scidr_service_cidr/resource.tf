# The new Service range: Services will be moved into it (k8scidr_service_recreation).
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]
}

# A small range that keeps the LoadBalancer IPs of the old range valid while the old range is
# retired (a /32 holds no allocatable address; /30 is the smallest usable IPv4 range).
resource "k8scidr_service_cidr" "keep_lb" {
  name  = "keep-loadbalancer-ips"
  cidrs = ["100.64.12.0/24"]
}

# The apiserver's own range can be imported, never created:
#   terraform import k8scidr_service_cidr.old kubernetes
resource "k8scidr_service_cidr" "old" {
  name  = "kubernetes"
  cidrs = ["100.64.0.0/13"]

  # Destroy leaves it Terminating (no new allocations) instead of waiting for it to go.
  wait_for_deletion = false
}
