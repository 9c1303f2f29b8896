# Refuse a new Service range that collides with Tailscale's CGNAT range, before anything is read.
variable "new_service_cidr" {
  type    = string
  default = "172.24.0.0/15"

  validation {
    condition     = !provider::k8scidr::cidr_overlaps(var.new_service_cidr, "100.64.0.0/10")
    error_message = "The new Service range overlaps Tailscale's 100.64.0.0/10."
  }
}
