#!/usr/bin/env bash
# `make test`: every test that can run here, ordered so that a cold machine waits as little as
# possible. The binary builds are CPU-bound (a Kubernetes release takes about 15 minutes of both
# cores here): the suite on the newest Kubernetes starts as soon as its own binaries exist, while
# the older control planes of the matrix, terraform 1.8.5 and OpenTofu build at the lowest CPU
# priority in the idle time the suite leaves; the tests that need them run after.
#
#   1. tools/testbin.sh core, then the rest in the background (nice 19)
#   2. unit tests and the acceptance suite on the newest Kubernetes   (go test ./...)
#   3. the TestAccMatrix_ tests on each release of MATRIX             (once those are built)
#   4. the plan-contract tests under OpenTofu and under terraform 1.8.5, at once (make testacc-cli)
#   5. the benchmark's smoke mode, with fuzzing beside it
#
# Any failure fails the run, and so does a skip: every go test runs with -json through
# k8scidr-testreport, which prints each failure in full and fails on a skip that
# tools/test-skips.txt does not list with its reason. MATRIX and TEST_TIMEOUT come from the
# GNUmakefile.
set -euo pipefail
cd "$(dirname "$0")/.."
MATRIX=${MATRIX:-1.29 1.32 1.33}
CLI_TESTS=${CLI_TESTS:?the GNUmakefile names the plan-contract tests}
TEST_TIMEOUT=${TEST_TIMEOUT:-60m}
bin=$PWD/bin
step() { printf '\ntest: %s (%ds)\n' "$*" "$SECONDS" >&2; }
# The suite runs on the clusters it starts itself: a kubeconfig exported for `make testacc`
# (K8SCIDR_TEST_KUBECONFIG) would make every test that needs its own cluster skip.
unset K8SCIDR_TEST_KUBECONFIG
go build -o "$bin/k8scidr-testreport" ./internal/testcluster/cmd/k8scidr-testreport
# gotest NAME [-each] GO-TEST-ARGS...: go test -json, reported (see above).
gotest() {
	local name=$1 each=
	shift
	if [ "${1:-}" = -each ]; then each=-each; shift; fi
	go test -json "$@" | "$bin/k8scidr-testreport" -allow tools/test-skips.txt -step "$name" $each
}

step "building the suite's binaries"
K8SCIDR_TESTBIN_PART=core bash tools/testbin.sh

step "building the rest in the background: Kubernetes $MATRIX, terraform 1.8.5, OpenTofu, GoReleaser"
extra_log=$bin/.testbin-extra.log
# Its own session, so that an interrupted run takes the builds down with it.
# shellcheck disable=SC2086
# GoReleaser too (for .ci/run's make release-check): a no-op once cached, 6-14 minutes cold.
K8SCIDR_TESTBIN_PART=extra K8SCIDR_BUILD_JOBS=1 setsid nice -n 19 bash -c 'bash tools/testbin.sh "$@" && make --no-print-directory goreleaser' _ $MATRIX >"$extra_log" 2>&1 &
extra=$!
trap 'kill -- -$extra 2>/dev/null || true' EXIT

step "unit tests and the acceptance suite on the newest Kubernetes"
# The TestAccMatrix_ tests run in step 3, on each release of MATRIX. The three longest reliability
# tests (the fault proxy failing 10 % of requests, 175 s; kube-apiserver and etcd restarted
# mid-apply, 101 s; a restore waiting for a stale quota's resync, 136 s) run in make test-faults
# only, with the full kill trials; here each kill test runs one trial, and the outage through the
# fault proxy stays. The TestAccScale_ tests (1,000
# Services) run in make test-scale only. TestAccFleet runs in step 4 only: examples/fleet's
# OpenTofu configuration under OpenTofu, its terraform.sh under terraform 1.8.5.
TF_ACC=1 K8SCIDR_REQUIRE_CLUSTER=1 K8SCIDR_MATRIX= K8SCIDR_KILL_TRIALS=1 gotest "the suite on the newest Kubernetes" \
	./... -count=1 -timeout "$TEST_TIMEOUT" -skip '^TestAccMatrix_|^TestAccFaults_tenPercent$|^TestAccRestart_midApply$|^TestAccKill_staleQuotaResync$|^TestAccFleet$|^TestAccScale_'

step "waiting for the background builds"
if ! wait "$extra"; then
	cat "$extra_log" >&2
	echo "test: building Kubernetes $MATRIX, terraform, OpenTofu or GoReleaser failed" >&2
	exit 1
fi
trap - EXIT
grep '^testbin: built' "$extra_log" >&2 || true

step "the TestAccMatrix_ tests on Kubernetes $MATRIX"
# -each: which test ran on which release.
TF_ACC=1 K8SCIDR_REQUIRE_CLUSTER=1 K8SCIDR_MATRIX="$MATRIX" gotest "the matrix on Kubernetes $MATRIX" -each \
	./internal/provider -count=1 -run 'TestAccMatrix_' -timeout "$TEST_TIMEOUT"

# The plan-contract tests (make testacc-cli) under OpenTofu and under each older terraform, at
# once: each runs its own clusters, so they share only the CPU; measured on 2 cores, 346 s
# together (with a lint beside) against 412 s one after the other. Each one's report is printed
# whole once all have ended.
clis=("$bin/tofu")
for tf in "$bin"/terraform-v*; do
	if [ "$(readlink -f "$tf")" = "$(readlink -f "$bin/terraform")" ]; then
		echo "test: bin/terraform is $(basename "$tf") (no newer terraform on PATH): the suite above ran on it; no newer-terraform row" >&2
		continue
	fi
	clis+=("$tf")
done
step "the plan-contract tests under ${clis[*]##*/}, at once"
pids=()
for cli in "${clis[@]}"; do
	# The CI kit's pipeline runs under the suite's terraform and under OpenTofu (its plan
	# encryption); the older terraform runs the rest.
	tests=$CLI_TESTS
	[[ ${cli##*/} == tofu* ]] || tests=${tests//|TestAccCIKit/}
	TF_ACC=1 K8SCIDR_REQUIRE_CLUSTER=1 TF_ACC_TERRAFORM_PATH=$cli TF_ACC_PROVIDER_NAMESPACE=k8scidr \
		gotest "the plan-contract tests under ${cli##*/}" -each ./internal/provider -count=1 -run "$tests" -timeout 20m \
		>"$bin/.cli-${cli##*/}.log" 2>&1 &
	pids+=($!)
done
failed=0
for i in "${!clis[@]}"; do
	wait "${pids[$i]}" || failed=1
	cat "$bin/.cli-${clis[$i]##*/}.log" >&2
done
[ "$failed" = 0 ] || { echo "test: the plan-contract tests failed under a CLI (above)" >&2; exit 1; }

# The benchmark's smoke mode asserts no timings and mostly waits on its cluster: fuzzing (CPU,
# one worker) runs beside it, and its log is printed once both have ended.
step "the benchmark's smoke mode, with fuzzing beside it"
make --no-print-directory fuzz FUZZTIME=5000x FUZZFLAGS='-test.parallel 1' >"$bin/.fuzz.log" 2>&1 &
fuzz=$!
trap 'kill $fuzz 2>/dev/null || true' EXIT
bench=0
BENCH_QUICK=1 make --no-print-directory bench || bench=$?
fuzzed=0
wait "$fuzz" || fuzzed=$?
trap - EXIT
step "fuzzing (beside the benchmark)"
cat "$bin/.fuzz.log" >&2
[ "$bench" = 0 ] || { echo "test: the benchmark's smoke mode failed (above)" >&2; exit 1; }
[ "$fuzzed" = 0 ] || { echo "test: fuzzing failed (above)" >&2; exit 1; }
step "make test passed"
