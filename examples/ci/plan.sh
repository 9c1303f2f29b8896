#!/usr/bin/env bash
# Plans the configuration in the current directory into a saved plan and prints the pull-request
# summary of it (Markdown) on stdout; the plan's own log goes to plan.log and its JSON to
# plan.json beside it. When the plan fails, the summary lists its errors and the script fails.
#
#   plan.sh [terraform plan arguments, e.g. -var=stage=2]
#
# Environment:
#   PLANFILE              the saved plan to write (default tfplan; Atlantis sets it)
#   TERRAFORM             the CLI (default terraform; tofu works the same)
#   K8SCIDR_PLAN_SUMMARY  the summary program: install-summary.sh fetches the release's, checked
#                         against its SHA256SUMS (default: k8scidr-plan-summary on PATH, else
#                         go run of cmd/k8scidr-plan-summary at K8SCIDR_VERSION)
#   K8SCIDR_PLAN_TITLE    the summary's heading (default "k8scidr plan")
#   KUBE_CONFIG_PATH etc. the read-only credentials (examples/rbac/k8scidr-plan.yaml), never
#                         variables: variables are stored in the saved plan.
set -uo pipefail
planfile=${PLANFILE:-tfplan}
terraform=${TERRAFORM:-terraform}
summary=${K8SCIDR_PLAN_SUMMARY:-}
if [ -z "$summary" ]; then
	if command -v k8scidr-plan-summary >/dev/null; then
		summary=k8scidr-plan-summary
	else
		summary="go run github.com/k8scidr/terraform-provider-k8scidr/cmd/k8scidr-plan-summary@${K8SCIDR_VERSION:-latest}"
	fi
fi

# -json: every warning and error as a record the summary can list (the human-readable plan is
# `terraform show tfplan`).
if ! $terraform plan -input=false -lock-timeout=5m -out="$planfile" -json "$@" >plan.log; then
	$summary -title "${K8SCIDR_PLAN_TITLE:-k8scidr plan}" -log plan.log
	exit 1
fi
$terraform show -json "$planfile" >plan.json || exit 1
$summary -title "${K8SCIDR_PLAN_TITLE:-k8scidr plan}" -plan plan.json -log plan.log
