#!/bin/sh
# Installs what is missing, then builds kvindex twice - a normal build
# (build/) and an AddressSanitizer + UBSan build (build-asan/) - and runs the
# whole test suite in each. Extra arguments go to ctest, e.g. -R wire.
#
#   tests/run.sh            both builds
#   KVI_BUILDS=normal tests/run.sh    only the normal build (or: asan)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"

jobs=$(nproc 2>/dev/null || echo 2)
builds=${KVI_BUILDS:-"normal asan"}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

suite() {
	name=$1
	dir=$2
	shift 2
	echo "==> $name build ($dir)"
	cmake -S "$root" -B "$root/$dir" "$@" >/dev/null
	cmake --build "$root/$dir" -j "$jobs"
	echo "==> $name tests"
	(cd "$root/$dir" && ctest --output-on-failure -j "$jobs" $ctest_args)
}

ctest_args="$*"
for b in $builds; do
	case "$b" in
	normal) suite normal build -DCMAKE_BUILD_TYPE=RelWithDebInfo ;;
	asan) suite "ASan+UBSan" build-asan -DCMAKE_BUILD_TYPE=Debug \
		-DKVI_SANITIZE=ON ;;
	*) echo "unknown build: $b" >&2; exit 2 ;;
	esac
done
echo "==> all tests passed ($builds)"
