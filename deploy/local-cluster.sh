#!/bin/sh
# The main job on one machine: installs what is missing, builds, and runs a
# local kvindex cluster - a coordinator and two shards - fed by a simulated
# fleet of DP=2 engine pods replaying a Mooncake trace. It waits until every
# listener (one per pod and rank) is active, prints /workers and a /query
# whose best match is a rank-1 listener, and keeps running until Ctrl-C.
#
#   deploy/local-cluster.sh            run until Ctrl-C
#   deploy/local-cluster.sh --once     print the answers, then stop
#
# Logs go to the directory it prints (KVI_RUN_DIR to choose it). Ports:
# KVI_HTTP_PORT (8080) for the coordinator's HTTP API; the shards listen on
# ipc sockets in that directory, the simulated engines take free ports.
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
cmake --build "$root/build" -j "$jobs" \
	--target kvindex-sim kvindex-shard kvindex-coordinator >/dev/null
bin="$root/build"

run=${KVI_RUN_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kvindex-run.XXXXXX")}
mkdir -p "$run"
http_port=${KVI_HTTP_PORT:-8080}
api="http://127.0.0.1:$http_port"
echo "kvindex local cluster: logs and data in $run"

pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# show prints JSON indented when python3 is there, as it is otherwise.
show() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -m json.tool
	else
		cat
		echo
	fi
}

wait_for() { # what, command...
	what=$1
	shift
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -ge 300 ]; then
			echo "timed out waiting for $what; logs in $run" >&2
			exit 1
		fi
		sleep 0.1
	done
}

pods=2
dp=2
"$bin/tools/sim/kvindex-sim" --pods $pods --dp $dp \
	--trace "$root/tests/data/traces/conversation_trace.jsonl" \
	--rate 50 --loop --paused \
	--layout-file "$run/layout.json" --log-file "$run/sim.log" &
pids="$pids $!"
wait_for "the simulator" test -s "$run/layout.json"
control=$(sed -n 's/.*"control": *"\([^"]*\)".*/\1/p' "$run/layout.json")
echo "simulated fleet: $pods pods x DP=$dp (control $control, log sim.log)"

# The shards run on this host, so the coordinator reaches them over nng's
# ipc transport (a Unix socket in the run directory) and they take no TCP
# port; shards on other hosts use tcp://host:port. (bench_query
# --shard-url-scheme ipc|tcp measures both: no difference beyond the noise
# of a run here.)
shards=""
for s in 0 1; do
	url="ipc://$run/shard-$s.ipc"
	"$bin/shard/kvindex-shard" --id "shard-$s" \
		--listen "$url" --data-dir "$run/shard-$s" \
		--log-file "$run/shard-$s.log" &
	pids="$pids $!"
	shards="$shards${shards:+,}shard-$s=$url"
	echo "shard-$s: $url (log shard-$s.log)"
done

"$bin/coordinator/kvindex-coordinator" --shards "$shards" \
	--http "127.0.0.1:$http_port" --discovery-file "$run/layout.json" \
	--data-dir "$run/coordinator" --log-file "$run/coordinator.log" &
pids="$pids $!"
echo "coordinator: $api (log coordinator.log)"
wait_for "the coordinator to be ready" curl -fsS "$api/ready"

curl -fsS -X POST "$control/resume" >/dev/null
all_active() {
	w=$(curl -fsS "$api/workers")
	total=$(printf '%s' "$w" | grep -o '"status":"[a-z]*","last_seq"' | wc -l)
	active=$(printf '%s' "$w" | grep -o '"status":"active","last_seq"' | wc -l)
	[ "$total" -eq $((pods * dp)) ] && [ "$active" -eq "$total" ]
}
wait_for "every listener to be active" all_active

echo
echo "== GET /workers: one listener per pod and data-parallel rank"
curl -fsS "$api/workers" | show

# A prompt that runs on pod 0, rank 1; the router's question is then
# answered with that rank.
tokens=$(seq -s, 7001 7160)
curl -fsS -X POST "$control/prefill" \
	-d "{\"pod\": 0, \"rank\": 1, \"token_ids\": [$tokens]}" >/dev/null
query="{\"model_name\": \"sim-model\", \"token_ids\": [$tokens]}"
best_rank1() {
	curl -fsS -X POST "$api/query" -d "$query" |
		grep -q '"best":{[^}]*"dp_rank":1'
}
wait_for "the prefill to be indexed" best_rank1
echo
echo "== POST /query for a 160-token prompt that ran on sim/pod-0, rank 1"
curl -fsS -X POST "$api/query" -d "$query" | show

if [ $once -eq 1 ]; then
	exit 0
fi
echo
echo "cluster running: try curl $api/workers; Ctrl-C to stop"
wait
