#!/usr/bin/env bash
# Writes the wrapper module that builds a Kubernetes release's test binaries:
#
#   tools/testbin/wrap-kube.sh v1.37.2 tools/testbin/kube
#
# k8s.io/kubernetes replaces its ~30 staging modules (k8s.io/api, k8s.io/client-go, …) with
# directories of its own repository, which a module download does not hold, so the wrapper
# replaces each with its published module at the matching v0.<minor>.<patch>. The Go module
# proxy of these machines does not serve every patch of every staging module: for each one the
# newest patch not above the release's that downloads is pinned, and the go.mod says which.
# Run by hand when a pinned release changes; tools/testbin.sh only builds what go.mod says.
set -euo pipefail

version=${1:?usage: wrap-kube.sh vX.Y.Z DIR}
dir=${2:?usage: wrap-kube.sh vX.Y.Z DIR}
minor=$(echo "$version" | cut -d. -f2)
patch=$(echo "$version" | cut -d. -f3)
name=$(basename "$dir")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
go mod init probe >/dev/null 2>&1

gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": *"\([^"]*\)".*/\1/p')
[ -n "$gomod" ] || { echo "k8s.io/kubernetes@$version is not served" >&2; exit 1; }
staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod" | sort -u)

replaces="" notes=""
for m in $staging; do
	picked=""
	for ((p = patch; p >= 0; p--)); do
		if go mod download "$m@v0.$minor.$p" >/dev/null 2>&1; then
			picked=v0.$minor.$p
			break
		fi
	done
	[ -n "$picked" ] || { echo "no v0.$minor.x of $m downloads" >&2; exit 1; }
	replaces+=$'\t'"$m => $m $picked"$'\n'
	if [ "$picked" != "v0.$minor.$patch" ]; then
		notes+="//   $(printf '%-32s' "$m") $picked (v0.$minor.$patch: not served)"$'\n'
	fi
	echo "$m $picked" >&2
done

cat >"$dir/go.mod" <<EOF
// Wrapper module for the Kubernetes $version test binaries (written by tools/testbin/wrap-kube.sh):
// k8s.io/kubernetes cannot be go-installed (replace directives).
//
// The staging modules are at v0.$minor.$patch, except where the Go module proxy does not serve it:
${notes:-//   (none)
}module github.com/k8scidr/terraform-provider-k8scidr/tools/testbin/$name

go 1.26.0

require k8s.io/kubernetes $version

replace (
$replaces)
EOF
cat >"$dir/tools.go" <<EOF
//go:build tools

// Package ${name//[-.]/_} pins the Kubernetes commands built by tools/testbin.sh.
package ${name//[-.]/_}

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy" // the wire tests' (built for the newest release only)
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
cd "$dir"
GOFLAGS=-mod=mod go mod tidy
echo "wrote $dir/go.mod for $version" >&2
