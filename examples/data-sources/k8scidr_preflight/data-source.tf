# Everything in the cluster that would break moving Services from 100.64.0.0/13 to 172.24.0.0/15
# and pods from 100.96.0.0/11 to 172.16.0.0/13, found at plan. Take the ranges from variables or
# locals, so it is read at plan and its findings show in the reviewed plan.
data "k8scidr_preflight" "migration" {
  old_service_cidrs = ["100.64.0.0/13"]
  new_service_cidrs = ["172.24.0.0/15"]
  old_pod_cidrs     = ["100.96.0.0/11"]
  new_pod_cidrs     = ["172.16.0.0/13"]
  reserved          = { tailscale = "100.64.0.0/10" }
}

# Stop before anything moves while a blocker remains (a check block would only warn).
resource "k8scidr_service_cidr" "new" {
  name  = "services-172-24"
  cidrs = ["172.24.0.0/15"]

  lifecycle {
    precondition {
      condition = data.k8scidr_preflight.migration.blockers == 0
      error_message = join("\n", [for f in data.k8scidr_preflight.migration.findings :
      "${f.summary}: ${f.detail} Fix: ${f.fix}" if f.severity == "blocker"])
    }
  }
}

output "preflight_warnings" {
  value = [for f in data.k8scidr_preflight.migration.findings : f.summary if f.severity == "warning"]
}
