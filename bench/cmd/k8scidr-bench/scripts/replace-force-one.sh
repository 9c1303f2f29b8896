#!/usr/bin/env bash
# The write-ups' replace loop for one Service, as operators run it under xargs -P: read it,
# strip what the apiserver assigned, and replace it by force (delete, then create).
# Arguments: namespace name.
set -euo pipefail
"$KUBECTL" get service -n "$1" "$2" -o json |
  "$JQ" 'del(.spec.clusterIP, .spec.clusterIPs, .metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.managedFields, .status)' |
  "$KUBECTL" replace --force -f - >/dev/null
