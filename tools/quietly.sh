# Sourced by tools/testbin.sh and tools/demo.sh. quietly LOG WHAT ESTIMATE COMMAND...: runs
# COMMAND with its output (go: downloading …, compiler output) in LOG, and says on stderr what
# is being built, about how long it takes here (ESTIMATE in seconds, 0 for no estimate), a
# heartbeat every minute while it runs, and how long it took. On failure the log's last lines.
quietly() {
	local log=$1 what=$2 est=$3 start=$SECONDS beat rc=0
	shift 3
	mkdir -p "$(dirname "$log")"
	if [ "$est" -gt 0 ]; then
		say "building $what: about $(minutes "$est") here (output in $log)"
	else
		say "building $what (output in $log)"
	fi
	local of=""
	if [ "$est" -gt 0 ]; then of=" of about $(minutes "$est")"; fi
	(while sleep 60; do say "still building $what: $(minutes $((SECONDS - start))) so far$of"; done) &
	beat=$!
	"$@" >"$log" 2>&1 || rc=$?
	kill "$beat" 2>/dev/null || true
	wait "$beat" 2>/dev/null || true
	if [ "$rc" -ne 0 ]; then
		say "building $what failed after $(minutes $((SECONDS - start))); the end of $log:"
		tail -n 40 "$log" >&2
		return "$rc"
	fi
	say "built $what in $(minutes $((SECONDS - start)))"
}

# minutes SECONDS: "40 s" under two minutes, else whole minutes.
minutes() {
	if [ "$1" -lt 120 ]; then echo "$1 s"; else echo "$(($1 / 60)) min"; fi
}

say() { printf '%s: %s\n' "${QUIETLY_NAME:-build}" "$*" >&2; }
