#!/usr/bin/env bash
# make demo: the migration of write-ups 000/001 on a loopback cluster. A cluster in kOps' default
# ranges (inside Tailscale's 100.64.0.0/10) moves its Services to 172.24.0.0/15 and its pods to
# 172.16.0.0/13 through examples/migration, stage by stage, with the locally built provider
# (from a filesystem mirror, no registry). The cluster's processes end with the program.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
go run ./internal/testcluster/cmd/k8scidr-demo -root "$root"
