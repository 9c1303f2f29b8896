#!/usr/bin/env bash
# Fetches k8scidr-plan-summary of a release for this machine, checks it against the release's
# SHA256SUMS, and prints the program's path: no Go toolchain needed on the runner.
#
#   K8SCIDR_PLAN_SUMMARY=$(install-summary.sh v0.1.0 "$RUNNER_TEMP/k8scidr")
#
# Environment: K8SCIDR_RELEASES, where releases are downloaded from (default: the project's
# GitHub releases; a mirror holding the same files works).
set -euo pipefail
version=${1:?the release, e.g. v0.1.0}
dir=${2:?where to put the program}
version=${version#v}
base=${K8SCIDR_RELEASES:-https://github.com/k8scidr/terraform-provider-k8scidr/releases/download}/v$version
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
armv*) arch=arm ;;
i?86) arch=386 ;;
*) echo "install-summary.sh: no release for $(uname -m)" >&2; exit 1 ;;
esac
archive=k8scidr-plan-summary_${version}_${os}_${arch}.tar.gz
sums=terraform-provider-k8scidr_${version}_SHA256SUMS
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/$archive" "$base/$archive"
curl -fsSL --retry 3 -o "$tmp/$sums" "$base/$sums"
# The archive's own line only: a SHA256SUMS without it is a failure, not a pass.
line=$(grep -E "^[0-9a-f]{64}  $archive\$" "$tmp/$sums") || { echo "install-summary.sh: $archive is not in $sums" >&2; exit 1; }
(cd "$tmp" && printf '%s\n' "$line" | sha256sum -c --quiet -) || { echo "install-summary.sh: $archive does not match $sums" >&2; exit 1; }
tar -xzf "$tmp/$archive" -C "$dir" k8scidr-plan-summary
echo "$dir/k8scidr-plan-summary"
