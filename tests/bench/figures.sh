#!/bin/sh
# figures.sh - the runs docs/performance.md quotes, one after another, each
# output kept in OUT (default: figures-<commit> in the current directory).
# Run it on a quiet machine from the top of a build tree:
#
#   cd build && ../tests/bench/figures.sh [OUT [NAME...]]
#
# With NAMEs (decode, shard, shard_sim, answer, query, coord, handoff,
# pending, routed, routing, fleet) only those runs are made.
# Each run is printed as it starts, with the command, and timed. The
# figures move 15-30% from run to run on a shared VM: the pages compare
# builds only within one run of a benchmark that measures both.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
out=${1:-figures-$rev}
[ $# -gt 0 ] && shift
only="$*"
mkdir -p "$out"
bin=tests/bench
trace="$top/tests/data/traces/conversation_trace.jsonl"
status=0

run() {
	name=$1
	shift
	case " ${only:-$name} " in
	*" $name "*) ;;
	*) return 0 ;;
	esac
	echo "== $name: $*"
	start=$(date +%s)
	if "$@" > "$out/$name.txt" 2>&1; then
		echo "   $(($(date +%s) - start)) s"
	else
		echo "   FAILED after $(($(date +%s) - start)) s (see $out/$name.txt)"
		status=1
	fi
}

run decode $bin/bench_decode --trace "$trace"
run shard $bin/bench_shard --trace "$trace"
run shard_sim $bin/bench_shard_sim --pods 4
run answer $bin/bench_answer 200 0 3000
run query $bin/bench_query --out "$out/query"
run coord $bin/bench_coord --pods 500 --entries 2000000 --top-k 8
run handoff $bin/bench_handoff
run pending $bin/bench_pending
run routed $bin/bench_routed
run routing $bin/bench_routing --plot "$out/routing.png"
run fleet $bin/bench_fleet --pods 10000 --idle-wait 30 \
	--plot "$out/fleet.gp"
# bench_fleet writes a gnuplot script that draws FILE.png
if command -v gnuplot >/dev/null && [ -f "$out/fleet.gp" ]; then
	gnuplot "$out/fleet.gp"
fi
echo "outputs in $out"
exit $status
