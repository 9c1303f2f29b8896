#!/usr/bin/env bash
# Builds the binaries the tests and the demo need, from pinned versions, into a per-user cache,
# and links them into bin/. A warm cache makes this a no-op; a cold one builds once (see README).
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (tools/testbin/kube/go.mod)
#   kube-proxy, for the wire tests (the same Kubernetes; cached apart, so that adding it did not
#     make every warm cache build the control plane again)
#   coredns, for the wire tests                                         (tools/testbin/coredns/go.mod)
#   and, from Debian's packages where missing (root only): iproute2, nftables, iptables, conntrack,
#     which the wire's network namespace and kube-proxy use
#   etcd                                                                (tools/testbin/etcd/go.mod)
#   kwok                                                                (KWOK_VERSION below)
#   terraform: the newest release the Go module proxy serves (tools/testbin/terraform/go.mod), never the
#     one on PATH (a fresh machine has none, and the suite must run the same CLI everywhere);
#     terraform-<TERRAFORM_VERSION>: the oldest supported, built
#   tofu                                                                (tools/testbin/tofu/go.mod)
#   calico-crds-<release>/: the crd.projectcalico.org/v1 CRDs of Calico releases (CALICO_CRDS
#     below), copied from the github.com/projectcalico/calico source module, hash-checked
#   k8scidr-calico-ipam, calicoctl, calico-apiserver: Calico's IPAM driven like its CNI plugin,
#     calicoctl and Calico's API server, of the newest release (tools/testbin/calico/go.mod)
#
# `testbin.sh 1.29 1.32 …` also builds older control planes of the test matrix
# (tools/testbin/kube-<release>/go.mod) into bin/k8s-<release>/, with the same etcd and kwok.
# K8SCIDR_BUILD_JOBS builds run at once (default 2).
set -euo pipefail

KWOK_VERSION=v0.8.0
TERRAFORM_VERSION=v1.8.5
# Calico release, its github.com/projectcalico/calico pseudo-version, and the module's h1 hash
# (the checksum database does not know these pseudo-versions, so the hash is pinned here).
CALICO_CRDS=(
	"v3.31 v0.0.0-20251021213802-b1f3c43f8437 h1:PbLe6D0Yis8ce4F+o/Dmlrv4Her2ZN6ns8rmlZoFoEY="
	"v3.28 v1.11.0-cni-plugin.0.20250813170300-a0db560f0520 h1:TXnPEzx4pLWgwzCetIO/VJuz4iBZZrOdNSv16a50YqE="
)

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8SCIDR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/k8scidr}
bin=$root/bin
mkdir -p "$cache" "$bin"

log() { printf 'testbin: %s\n' "$*" >&2; }
QUIETLY_NAME=testbin
# shellcheck source=tools/quietly.sh
. "$root/tools/quietly.sh"

# module_version DIR MODULE prints the version DIR/go.mod requires for MODULE.
module_version() { awk -v m="$2" '$1=="require" && $2==m {print $3} $1==m && NF==2 {print $2}' "$1/go.mod" | head -1; }

# build_into NAME VERSION CMD...: runs CMD with $out set to a fresh directory, then publishes it
# as $cache/NAME-VERSION. Publishing is a rename, so an interrupted build leaves no half cache.
# The build's output goes to $cache/.logs/; the screen gets what is built, about how long it
# takes (estimate_seconds) and a heartbeat (tools/quietly.sh). How long it took is kept for the
# next estimate on this machine.
build_into() {
	local name=$1 version=$2; shift 2
	local dest=$cache/$name-$version
	if [ -f "$dest/.complete" ]; then return 0; fi
	touch "$status/built"
	local start=$SECONDS
	out=$(mktemp -d "$cache/.$name-$version.XXXXXX")
	if ! quietly "$cache/.logs/$name-$version.log" "$name $version" "$(estimate_seconds "$name")" "$@"; then
		rm -rf "$out"
		return 1
	fi
	touch "$out/.complete"
	rm -rf "$dest"
	mv "$out" "$dest"
	mkdir -p "$cache/.times"
	echo $((SECONDS - start)) >"$cache/.times/$name"
}

# estimate_seconds NAME: how long NAME's last build took on this machine, or else the cold-cache
# time README's table gives (2 cores), scaled to this machine's cores; 0 when neither is known.
estimate_seconds() {
	local t
	if t=$(cat "$cache/.times/$1" 2>/dev/null) && [ -n "$t" ]; then
		echo "$t"
		return
	fi
	case $1 in
	kube) t=1700 ;;
	tofu) t=1020 ;;
	terraform) t=590 ;;
	kwok) t=414 ;;
	coredns) t=380 ;;
	etcd) t=119 ;;
	kube-proxy) t=26 ;;
	*) t=0 ;;
	esac
	echo $((t * 2 / $(nproc)))
}

link() { ln -sfn "$1" "$bin/$(basename "$1")"; }

stamp_kube() {
	local v=$1 major minor
	major=${v#v}; major=${major%%.*}
	minor=${v#v*.}; minor=${minor%%.*}
	local flags=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags="$flags -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	echo "-s -w$flags"
}

KUBE_CONTROL_PLANE=(kube-apiserver kube-controller-manager kube-scheduler)

# build_kube MODULE_DIR VERSION COMMAND...: the named commands of k8s.io/kubernetes/cmd.
build_kube() {
	local dir=$1 version=$2; shift 2
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$(stamp_kube "$version")" -o "$out/" \
		"${@/#/k8s.io/kubernetes/cmd/}")
}

build_coredns() {
	(cd "$root/tools/testbin/coredns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/coredns" .)
}

# wire_packages installs the wire's network tools where a command is missing (a fresh machine).
wire_packages() {
	local missing=()
	command -v ip >/dev/null || missing+=(iproute2)
	command -v nft >/dev/null || missing+=(nftables)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	[ ${#missing[@]} -gt 0 ] || return 0
	if [ "$(id -u)" != 0 ]; then
		log "the wire tests need ${missing[*]} (Debian packages), and only root installs them here"
		return 0
	fi
	log "installing ${missing[*]} for the wire tests"
	apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

build_etcd() {
	(cd "$root/tools/testbin/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
	(cd "$out" && CGO_ENABLED=0 GOBIN="$out" GOFLAGS=-trimpath go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
}

build_tofu() {
	(cd "$root/tools/testbin/tofu" && CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$out/tofu" github.com/opentofu/opentofu/cmd/tofu)
}

# build_terraform VERSION: a release go install can build (v1.8 and older).
build_terraform() {
	(cd "$out" && CGO_ENABLED=0 GOBIN="$out" GOFLAGS=-trimpath go install \
		-ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" "github.com/hashicorp/terraform@$1")
}

# build_terraform_newest: the newest release, through its wrapper module (tools/testbin/terraform,
# which says why go install cannot build it).
build_terraform_newest() {
	(cd "$root/tools/testbin/terraform" && CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$out/terraform" github.com/hashicorp/terraform)
}

# fetch_calico_crds VERSION SUM copies libcalico-go/config/crd/*.yaml of the Calico module.
fetch_calico_crds() {
	local json dir sum
	json=$(cd "$out" && GOFLAGS= GONOSUMDB=github.com/projectcalico go mod download -json "github.com/projectcalico/calico@$1")
	sum=$(printf '%s\n' "$json" | sed -n 's/.*"Sum": *"\([^"]*\)".*/\1/p')
	dir=$(printf '%s\n' "$json" | sed -n 's/.*"Dir": *"\([^"]*\)".*/\1/p')
	if [ "$sum" != "$2" ]; then log "github.com/projectcalico/calico@$1 has hash $sum, pinned $2"; return 1; fi
	cp "$dir"/libcalico-go/config/crd/crd.projectcalico.org_*.yaml "$out/"
	chmod 0644 "$out"/*.yaml
}

# build_calico builds the Calico wrapper module's programs, stamped with the release they are.
build_calico() {
	local ld="-s -w -X github.com/projectcalico/calico/pkg/buildinfo.Version=$CALICO_RELEASE"
	ld="$ld -X github.com/projectcalico/calico/pkg/buildinfo.GitRevision=${CALICO_VERSION##*-}"
	(cd "$root/tools/testbin/calico" && export GOFLAGS= GONOSUMDB=github.com/projectcalico CGO_ENABLED=0 &&
		go build -trimpath -ldflags "$ld" -o "$out/" ./cmd/k8scidr-calico-ipam github.com/projectcalico/calico/calicoctl/calicoctl &&
		go build -trimpath -ldflags "$ld" -o "$out/calico-apiserver" github.com/projectcalico/calico/apiserver/cmd/apiserver)
}

KUBE_VERSION=$(module_version "$root/tools/testbin/kube" k8s.io/kubernetes)
ETCD_VERSION=$(module_version "$root/tools/testbin/etcd" go.etcd.io/etcd/server/v3)
TOFU_VERSION=$(module_version "$root/tools/testbin/tofu" github.com/opentofu/opentofu)
TERRAFORM_NEWEST=$(module_version "$root/tools/testbin/terraform" github.com/hashicorp/terraform)
# The wrapper's stand-ins are part of what is cached: its source hash is in the cache name.
TERRAFORM_NEWEST_BUILD=$TERRAFORM_NEWEST-$(cd "$root/tools/testbin/terraform" && find go.mod go.sum stub -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)
CALICO_VERSION=$(module_version "$root/tools/testbin/calico" github.com/projectcalico/calico)
CALICO_RELEASE=$(sed -n 's#^require github.com/projectcalico/calico .*// \(v[0-9.]*\)$#\1#p' "$root/tools/testbin/calico/go.mod")
COREDNS_VERSION=$(module_version "$root/tools/testbin/coredns" github.com/coredns/coredns)
COREDNS_BUILD=$COREDNS_VERSION-$(cd "$root/tools/testbin/coredns" && cat go.mod go.sum main.go | sha256sum | cut -c1-12)
# The wrapper's own program is part of what is cached: its source hash is in the cache name.
CALICO_BUILD=$CALICO_RELEASE-$(cd "$root/tools/testbin/calico" && find go.mod go.sum cmd stub -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)

# K8SCIDR_TESTBIN_PART says what to build: "core" is what the acceptance suite on the newest
# Kubernetes needs (and the newest terraform); "extra" the rest (the older
# control planes named as arguments, terraform TERRAFORM_VERSION, OpenTofu), which tools/test.sh
# builds at the lowest priority while the suite runs; "all" (default) both. The builds are
# CPU-bound: K8SCIDR_BUILD_JOBS (default 2) run at once only so small ones overlap big ones.
PART=${K8SCIDR_TESTBIN_PART:-all}
case $PART in core | extra | all) ;; *) log "K8SCIDR_TESTBIN_PART=$PART: use core, extra or all"; exit 2 ;; esac
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
JOBS=${K8SCIDR_BUILD_JOBS:-2}
status=$(mktemp -d)
trap 'rm -rf "$status"' EXIT
touch "$status/all"
spawn() {
	local name=$1; shift
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
	( if "$@"; then touch "$status/$name.ok"; fi ) &
	echo "$name" >>"$status/all"
}

# The older control planes of the test matrix named as arguments (`testbin.sh 1.29 1.33 …`),
# each into bin/k8s-<release>/. The matrix runs the TestAccMatrix_ tests only: no kubectl.
releases=()
for release in "$@"; do
	dir=$root/tools/testbin/kube-$release
	[ -f "$dir/go.mod" ] || { log "no wrapper module $dir (tools/testbin/wrap-kube.sh writes one)"; exit 1; }
	releases+=("$release $(module_version "$dir" k8s.io/kubernetes)")
done

if want core; then
	spawn "kube-$KUBE_VERSION" build_into kube "$KUBE_VERSION" build_kube "$root/tools/testbin/kube" "$KUBE_VERSION" "${KUBE_CONTROL_PLANE[@]}" kubectl
	spawn "kwok-$KWOK_VERSION" build_into kwok "$KWOK_VERSION" build_kwok
	spawn "kube-proxy-$KUBE_VERSION" build_into kube-proxy "$KUBE_VERSION" build_kube "$root/tools/testbin/kube" "$KUBE_VERSION" kube-proxy
	spawn "coredns-$COREDNS_BUILD" build_into coredns "$COREDNS_BUILD" build_coredns
	spawn wire-packages wire_packages
	spawn "etcd-$ETCD_VERSION" build_into etcd "$ETCD_VERSION" build_etcd
	for entry in "${CALICO_CRDS[@]}"; do
		read -r release version sum <<<"$entry"
		spawn "calico-crds-$release" build_into "calico-crds-$release" "$version" fetch_calico_crds "$version" "$sum"
	done
	spawn "calico-$CALICO_BUILD" build_into calico "$CALICO_BUILD" build_calico
fi
# The suite's terraform (bin/terraform) is the newest; the oldest supported (bin/terraform-<version>)
# runs the plan-contract tests.
if want core; then
	spawn "terraform-$TERRAFORM_NEWEST_BUILD" build_into terraform "$TERRAFORM_NEWEST_BUILD" build_terraform_newest
fi
if want extra; then
	spawn "terraform-$TERRAFORM_VERSION" build_into terraform "$TERRAFORM_VERSION" build_terraform "$TERRAFORM_VERSION"
fi
if want extra; then
	for entry in "${releases[@]}"; do
		read -r release version <<<"$entry"
		spawn "kube-$version" build_into kube "$version" build_kube "$root/tools/testbin/kube-$release" "$version" "${KUBE_CONTROL_PLANE[@]}"
	done
	spawn "tofu-$TOFU_VERSION" build_into tofu "$TOFU_VERSION" build_tofu
fi
wait
failed=()
while read -r name; do [ -f "$status/$name.ok" ] || failed+=("$name"); done <"$status/all"
if [ ${#failed[@]} -gt 0 ]; then
	log "failed: ${failed[*]} (the log above says why)"
	exit 1
fi

if want core; then
	for entry in "${CALICO_CRDS[@]}"; do
		read -r release version sum <<<"$entry"
		ln -sfn "$cache/calico-crds-$release-$version" "$bin/calico-crds-$release"
	done
	for b in "${KUBE_CONTROL_PLANE[@]}" kubectl; do link "$cache/kube-$KUBE_VERSION/$b"; done
	link "$cache/etcd-$ETCD_VERSION/etcd"
	link "$cache/kube-proxy-$KUBE_VERSION/kube-proxy"
	link "$cache/coredns-$COREDNS_BUILD/coredns"
	link "$cache/kwok-$KWOK_VERSION/kwok"
	link "$cache/calico-$CALICO_BUILD/k8scidr-calico-ipam"
	link "$cache/calico-$CALICO_BUILD/calicoctl"
	link "$cache/calico-$CALICO_BUILD/calico-apiserver"
	link "$cache/terraform-$TERRAFORM_NEWEST_BUILD/terraform"
fi
if want extra; then
	ln -sfn "$cache/terraform-$TERRAFORM_VERSION/terraform" "$bin/terraform-$TERRAFORM_VERSION"
fi
if want extra; then
	link "$cache/tofu-$TOFU_VERSION/tofu"
	for entry in "${releases[@]}"; do
		read -r release version <<<"$entry"
		out_bin=$bin/k8s-$release
		mkdir -p "$out_bin"
		for b in "${KUBE_CONTROL_PLANE[@]}"; do ln -sfn "$cache/kube-$version/$b" "$out_bin/$b"; done
		ln -sfn "$cache/etcd-$ETCD_VERSION/etcd" "$out_bin/etcd"
		ln -sfn "$cache/kwok-$KWOK_VERSION/kwok" "$out_bin/kwok"
		log "ready in $out_bin: Kubernetes $version"
	done
fi
if [ -f "$status/built" ]; then
	log "ready in $bin: $(cd "$bin" && ls | tr '\n' ' ')"
else
	log "found every binary in the cache ($cache): nothing to build"
fi
