#!/usr/bin/env bash
# make demo: starts a loopback cluster, applies examples/cluster-info and then
# examples/service-migration (Services move to 172.24.0.0/15) with the locally built provider
# (dev override, no registry), prints what changed, and stops the cluster.
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

# The Service stages: a few Services in kOps' default range, then examples/service-migration.
echo
echo "== Services before (100.64.0.0/13)"
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec:
  clusterIP: 100.64.0.10
  selector: {k8s-app: kube-dns}
  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default, labels: {app.kubernetes.io/managed-by: Helm}}
spec:
  type: NodePort
  clusterIP: 100.64.7.200
  selector: {app: web}
  ports: [{port: 80, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 5432}]
YAML
kubectl get svc -A -o wide
cp -R "$root/examples/service-migration" "$work/migration"
"$bin/terraform" -chdir="$work/migration" plan -input=false -no-color -out=tfplan
"$bin/terraform" -chdir="$work/migration" apply -input=false -no-color tfplan
echo
echo "== Services after (172.24.0.0/15; kube-dns-legacy is the DNS bridge on the old IP)"
kubectl get svc -A -o wide
"$bin/terraform" -chdir="$work/migration" output -no-color
echo
echo "== a second plan finds nothing left to move"
"$bin/terraform" -chdir="$work/migration" plan -input=false -no-color -detailed-exitcode
