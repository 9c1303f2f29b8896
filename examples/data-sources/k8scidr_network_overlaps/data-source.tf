# kOps' default ranges (Services 100.64.0.0/13, pods 100.96.0.0/11) sit inside Tailscale's
# CGNAT range: report every collision, and fail the plan's check while any remains.
data "k8scidr_network_overlaps" "this" {
  reserved = {
    tailscale = "100.64.0.0/10"
  }
}

check "clear_of_tailscale" {
  assert {
    condition     = data.k8scidr_network_overlaps.this.conflict_free
    error_message = join("\n", [for c in data.k8scidr_network_overlaps.this.conflicts : "${c.a.kind} ${c.a.name} (${c.a.cidr}) overlaps ${c.b.kind} ${c.b.name} (${c.b.cidr}) in ${c.overlap}"])
  }
}
