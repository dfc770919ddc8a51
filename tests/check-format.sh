#!/bin/sh
# Fails when a C source or header is not formatted as .clang-format says.
# Fix with: clang-format -i <files>
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
files=$(find common proto shard coordinator tools tests -name '*.[ch]' \
	-not -path '*/data/*' | sort)
bad=""
for f in $files; do
	if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
		bad="$bad $f"
	fi
done
if [ -n "$bad" ]; then
	echo "not clang-formatted:$bad" >&2
	exit 1
fi
echo "$(echo "$files" | wc -l) files formatted"
