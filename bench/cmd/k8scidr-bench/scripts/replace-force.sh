#!/usr/bin/env bash
# The write-ups' loop: per Service, read it, strip what the apiserver assigned, and replace it
# by force (delete, then create), serially. Reads "namespace name" lines on stdin.
set -euo pipefail
while read -r ns name; do
  "$KUBECTL" get service -n "$ns" "$name" -o json |
    "$JQ" 'del(.spec.clusterIP, .spec.clusterIPs, .metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.managedFields, .status)' |
    "$KUBECTL" replace --force -f - >/dev/null
done
