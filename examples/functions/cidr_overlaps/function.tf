# Refuse a plan whose new Service range collides with Tailscale's CGNAT range.
check "service_range_clear_of_tailscale" {
  assert {
    condition     = !provider::k8scidr::cidr_overlaps("172.24.0.0/15", "100.64.0.0/10")
    error_message = "The new Service range overlaps 100.64.0.0/10."
  }
}
