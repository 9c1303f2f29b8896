#!/usr/bin/env bash
# The write-ups' other loop: per Service, save it without its assigned fields, delete it, and
# apply the saved copy, serially. Reads "namespace name" lines on stdin.
set -euo pipefail
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
while read -r ns name; do
  "$KUBECTL" get service -n "$ns" "$name" -o json |
    "$JQ" 'del(.spec.clusterIP, .spec.clusterIPs, .metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.managedFields, .status)' >"$tmp"
  "$KUBECTL" delete service -n "$ns" "$name" >/dev/null
  "$KUBECTL" apply -f "$tmp" >/dev/null
done
