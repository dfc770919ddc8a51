#!/bin/sh
# The main job on one machine: installs what is missing, builds, starts a
# simulated fleet of engines (DP=2 pods driven by a Mooncake trace) and
# shows what every rank publishes with kvindex-tap, until Ctrl-C.
#
#   deploy/local-cluster.sh            run until Ctrl-C
#   deploy/local-cluster.sh --once     show a few batches per rank, exit
#
# Logs go to the directory it prints (KVI_RUN_DIR to choose it).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
once=0
for a in "$@"; do
	case "$a" in
	--once) once=1 ;;
	*) echo "usage: $0 [--once]" >&2; exit 2 ;;
	esac
done

"$root/deploy/install-deps.sh"
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$jobs" --target kvindex-sim kvindex-tap \
	>/dev/null

run=${KVI_RUN_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kvindex-run.XXXXXX")}
mkdir -p "$run"
echo "kvindex local run: logs in $run"

pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

pods=2
dp=2
"$root/build/tests/sim/kvindex-sim" --pods $pods --dp $dp \
	--trace "$root/tests/data/traces/conversation_trace.jsonl" \
	--rate 20 --loop --paused \
	--layout-file "$run/layout.json" --log-file "$run/sim.log" &
pids="$pids $!"
i=0
while [ ! -s "$run/layout.json" ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "the simulator did not start; see $run/sim.log" >&2; exit 1; }
	sleep 0.1
done
control=$(sed -n 's/.*"control": *"\([^"]*\)".*/\1/p' "$run/layout.json")
ports=$(sed -n 's/.*"zmq_port": *\([0-9]*\).*/\1/p' "$run/layout.json")
echo "simulated fleet: $pods pods x DP=$dp, control $control"

count=""
[ $once -eq 1 ] && count="--count 3 --idle-exit-ms 5000"
p=0
for base in $ports; do
	r=0
	while [ $r -lt $dp ]; do
		port=$((base + r))
		echo "pod-$p rank $r: tcp://127.0.0.1:$port -> $run/tap-pod$p-rank$r.jsonl"
		# shellcheck disable=SC2086
		"$root/build/shard/tap/kvindex-tap" --endpoint "tcp://127.0.0.1:$port" \
			$count >"$run/tap-pod$p-rank$r.jsonl" &
		pids="$pids $!"
		r=$((r + 1))
	done
	p=$((p + 1))
done
sleep 0.5
curl -fsS -X POST "$control/resume" >/dev/null

if [ $once -eq 1 ]; then
	for f in "$run"/tap-*.jsonl; do
		n=0
		while [ "$(wc -l <"$f")" -lt 3 ] && [ $n -lt 100 ]; do
			n=$((n + 1))
			sleep 0.1
		done
	done
	for f in "$run"/tap-*.jsonl; do
		echo "== $(basename "$f" .jsonl)"
		head -n 3 "$f" | cut -c1-240
	done
	exit 0
fi
echo "tapping every rank; Ctrl-C to stop"
tail -n +1 -f "$run"/tap-*.jsonl | cut -c1-200
