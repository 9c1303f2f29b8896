#!/usr/bin/env bash
# The fleet with Terraform, which has no provider for_each: examples/migration as a stack per
# cluster, each with its state in its own cluster (the kubernetes backend of its stack.tf) and a
# working directory of its own. A cluster is a directory clusters/<name>/ holding `kubeconfig`
# and `terraform.tfvars` (its stage and per-stage inputs, as for examples/migration).
#
#   terraform.sh plan    plans every cluster into clusters/<name>/tfplan and prints one summary,
#                        a section per cluster; fails when any plan failed
#   terraform.sh apply   applies each cluster's saved plan, one cluster after the other, and
#                        stops at the first that fails
#
# Environment: TERRAFORM (default terraform), CLUSTERS (default clusters/ beside this script),
# K8SCIDR_PLAN_SUMMARY as for ../ci/plan.sh. The lock file committed in examples/migration is
# used by every cluster's init (-lockfile=readonly where it exists).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
stack=$(cd "$here/../migration" && pwd)
clusters=${CLUSTERS:-$here/clusters}
terraform=${TERRAFORM:-terraform}
export TF_IN_AUTOMATION=1 TF_INPUT=0
cmd=${1:?plan or apply}
lock=()
[ -f "$stack/.terraform.lock.hcl" ] && lock=(-lockfile=readonly)
failed=0
for dir in "$clusters"/*/; do
	dir=${dir%/}
	name=$(basename "$dir")
	[ -f "$dir/kubeconfig" ] || { echo "terraform.sh: $dir has no kubeconfig" >&2; exit 2; }
	work=$dir/work
	mkdir -p "$work"
	for f in "$stack"/*.tf "$stack"/.terraform.lock.hcl; do
		[ -e "$f" ] && ln -sfn "$f" "$work/$(basename "$f")"
	done
	[ -f "$dir/terraform.tfvars" ] && ln -sfn "$dir/terraform.tfvars" "$work/terraform.tfvars"
	export KUBE_CONFIG_PATH=$dir/kubeconfig
	case $cmd in
	plan)
		if ! $terraform -chdir="$work" init -input=false "${lock[@]}" >"$dir/init.log" 2>&1; then
			cat "$dir/init.log" >&2
			exit 1
		fi
		(cd "$work" && PLANFILE=$dir/tfplan K8SCIDR_PLAN_TITLE="k8scidr plan: $name" "$here/../ci/plan.sh") || failed=1
		echo
		;;
	apply)
		echo "## $name"
		$terraform -chdir="$work" apply -input=false -no-color "$dir/tfplan" || exit 1
		;;
	*)
		echo "terraform.sh: $cmd: want plan or apply" >&2
		exit 2
		;;
	esac
done
exit "$failed"
