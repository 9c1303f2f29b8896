#!/usr/bin/env bash
# make demo: the migration of write-ups 000/001 on a loopback cluster. A cluster in kOps' default
# ranges (inside Tailscale's 100.64.0.0/10) moves its Services to 172.24.0.0/15 and its pods to
# 172.16.0.0/13 through examples/migration, stage by stage, with the locally built provider
# (from a filesystem mirror, no registry). The cluster's processes end with the program.
#
# The builds say what they build, about how long it takes here and a heartbeat while it runs;
# their output goes to logs (bin/.demo-build.log, and tools/testbin.sh's under its cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
QUIETLY_NAME=demo
# shellcheck source=tools/quietly.sh
. tools/quietly.sh
mkdir -p bin
quietly bin/.demo-build.log "the provider and the demo program" 0 \
	bash -c 'go mod download && go build -trimpath -o bin/terraform-provider-k8scidr . &&
		go build -trimpath -o bin/k8scidr-demo ./internal/testcluster/cmd/k8scidr-demo'
K8SCIDR_TESTBIN_PART=core bash tools/testbin.sh
exec bin/k8scidr-demo -root "$root"
