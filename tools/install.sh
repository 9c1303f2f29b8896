#!/usr/bin/env bash
# Installs the provider where `terraform init` and `tofu init` find it with no configuration at
# all: their implicit local mirror, ~/.terraform.d/plugins/<host>/k8scidr/k8scidr/<version>/<os>_<arch>/,
# as the version CHANGELOG.md names (a configuration's `version = "~> 0.1.0"` then matches),
# for this machine's platform. A CLI configuration with its own provider_installation block
# turns the implicit mirror off: add a filesystem_mirror for the same directory there.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${VERSION:-$(sed -n 's/^## \([0-9][0-9.]*\).*/\1/p' CHANGELOG.md | head -1)}
platform=$(go env GOOS)_$(go env GOARCH)
plugins=${TF_PLUGINS_DIR:-$HOME/.terraform.d/plugins}
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go build -trimpath -ldflags "-X main.version=$version" -o "$bin" .
# terraform and tofu name the provider's registry differently; both read the same directory.
for host in registry.terraform.io registry.opentofu.org; do
	dir=$plugins/$host/k8scidr/k8scidr/$version/$platform
	mkdir -p "$dir"
	install -m 0755 "$bin" "$dir/terraform-provider-k8scidr_v$version"
done
echo "install: k8scidr/k8scidr $version for $platform in $plugins: terraform init and tofu init find it there"
