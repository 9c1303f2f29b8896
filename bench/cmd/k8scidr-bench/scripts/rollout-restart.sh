#!/usr/bin/env bash
# Restart one Deployment and wait for its rollout, as the write-ups do after a DNS or pool move.
# Arguments: namespace name.
set -euo pipefail
"$KUBECTL" rollout restart deployment -n "$1" "$2" >/dev/null
"$KUBECTL" rollout status deployment -n "$1" "$2" --timeout=10m >/dev/null
