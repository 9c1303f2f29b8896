#!/usr/bin/env bash
# make demo: starts a loopback cluster, applies examples/cluster-info with the locally built
# provider (dev override, no registry), prints the outputs, and stops the cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/k8scidr-demo.XXXXXX")

go build -o "$bin/k8scidr-cluster" "$root/internal/testcluster/cmd/k8scidr-cluster"
cleanup() {
	"$bin/k8scidr-cluster" down -dir "$work/cluster" || true
	rm -rf "$work"
}
trap cleanup EXIT

kubeconfig=$("$bin/k8scidr-cluster" up -dir "$work/cluster")

cat >"$work/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "k8scidr/k8scidr" = "$bin"
  }
  direct {}
}
RC
cp -R "$root/examples/cluster-info" "$work/config"
export TF_CLI_CONFIG_FILE=$work/terraformrc TF_IN_AUTOMATION=1 KUBE_CONFIG_PATH=$kubeconfig

"$bin/terraform" -chdir="$work/config" apply -auto-approve -input=false -no-color
echo
echo "== outputs"
"$bin/terraform" -chdir="$work/config" output -no-color
