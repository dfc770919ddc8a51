#!/bin/sh
# bench_fleet_sweep.sh - bench_fleet at several fleet sizes, one after
# another: the registration rate, the time to all assigned and what a
# listener costs a shard, against the number of pods, as a table and
# (with a plot file) a gnuplot script of the rate, the CPU of one
# registration and the memory.
#
#   bench_fleet_sweep.sh BENCH_FLEET [PLOT_FILE] [N...]
#
# BENCH_FLEET is the bench_fleet binary (build/tests/bench/bench_fleet);
# N defaults to 1000 5000 10000 20000 pods of DP 2. Each run registers
# through POST /register from 4 clients (SOURCE=file or SOURCE=kube:
# through the discovery file or the Kubernetes API instead, with no CPU
# per registration, "-") and measures the idle CPU
# IDLE_WAIT seconds (30) after the last registration and again twice as
# long after (bench_fleet --idle-wait).
set -eu

bin=${1:?usage: bench_fleet_sweep.sh BENCH_FLEET [PLOT_FILE] [N...]}
shift
plot=
if [ $# -gt 0 ]; then
	plot=$1
	shift
fi
[ $# -gt 0 ] || set -- 1000 5000 10000 20000
source=${SOURCE:-register}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

printf '%8s %10s %12s %12s %10s %14s %12s %10s %10s %10s %12s\n' pods \
	pods/s assigned_s cpu_us/reg cpu_half KiB/listener fds/listener \
	idle_cpu% idle2_cpu% workers_s query_ratio
for n in "$@"; do
	"$bin" --pods "$n" --source "$source" --idle-wait "${IDLE_WAIT:-30}" \
		>"$out/$n.txt" 2>&1 || {
		echo "bench_fleet --pods $n failed:" >&2
		tail -20 "$out/$n.txt" >&2
		exit 1
	}
	awk -v n="$n" '
	BEGIN { cpu = "-"; half = "-" }
	/^all answered in/ {
		rate = $6; sub(/^\(/, "", rate); sub(/\/s$/, "", rate)
		assigned = $(NF - 1)
	}
	# --source file: "... assigned after T s (R pods/s), ..."; kube:
	# "... assigned T s after the first (R pods/s), ..."
	/^the other [0-9]+ pods/ {
		for (i = 2; i <= NF; i++) {
			if ($i == "pods/s)," && $(i - 1) ~ /^\(/) {
				rate = substr($(i - 1), 2)
			}
			if (assigned == "" && $i == "after" && $(i + 2) == "s") {
				assigned = $(i + 1)
			}
			if ($i == "after" && $(i + 2) == "first") {
				assigned = $(i - 2)
			}
		}
	}
	/^shard-[0-9]+:/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "KiB") { kib += substr($(i - 1), 2) }
			if ($i == "a" && $(i + 1) == "listener)" && \
			    $(i - 1) ~ /^\(/) { fds += substr($(i - 1), 2) }
		}
		shards++
	}
	/^CPU per registration:/ { cpu = $4; half = $NF }
	/^idle:/ {
		v = $2; sub(/%$/, "", v)
		if (++k == 1) { idle = v } else { idle2 = v }
	}
	/^GET \/workers:/ { workers = $3 }
	/matching the simulator/ { ratio = $NF; gsub(/[()x]/, "", ratio) }
	END {
		if (shards == 0) { exit 1 }
		printf "%8d %10s %12s %12s %10s %14.1f %12.2f %10s %10s %10s " \
		    "%12s\n", n, rate, assigned, cpu, half, kib / shards, \
		    fds / shards, idle, idle2, workers, ratio
	}' "$out/$n.txt" | tee -a "$out/table"
done

[ -n "$plot" ] || exit 0
{
	echo "set terminal png size 1200,420 noenhanced"
	echo "set output '$plot.png'"
	echo "set xtics 5000"
	echo "set datafile missing '-'"
	echo "set multiplot layout 1,3 title 'bench_fleet --source $source, DP 2, engines absent'"
	echo "set xlabel 'pods'"
	echo "set yrange [0:*]"
	echo "set key off"
	echo "set ylabel 'pods registered/s (overall)'"
	echo "plot '-' using 1:2 with linespoints"
	cat "$out/table"
	echo "e"
	echo "set ylabel 'CPU per registration, us (3 processes)'"
	echo "plot '-' using 1:4 with linespoints"
	cat "$out/table"
	echo "e"
	echo "set ylabel 'shard memory, KiB a listener'"
	echo "plot '-' using 1:6 with linespoints"
	cat "$out/table"
	echo "e"
	echo "unset multiplot"
} >"$plot"
echo "plot: gnuplot $plot (writes $plot.png)"
