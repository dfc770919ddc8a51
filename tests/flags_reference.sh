#!/bin/sh
# Fails when a reference page of docs/reference is not what its program
# prints from its flag table (--help-format=markdown): a flag's help,
# default or range changed without the page. Prints the difference and
# the command that rewrites the pages.
#   flags_reference.sh ROOT BIN...   (ROOT: the source tree)
set -eu
root=$1
shift
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
status=0
for bin in "$@"; do
	prog=$(basename "$bin")
	page=docs/reference/$prog.md
	"$bin" --help-format=markdown >"$tmp"
	if [ ! -f "$root/$page" ]; then
		echo "flags_reference: $page is missing" >&2
		status=1
	elif ! diff -u --label "$page" --label "$prog --help-format=markdown" \
		"$root/$page" "$tmp"; then
		status=1
	fi
done
if [ "$status" -ne 0 ]; then
	echo "flags_reference: the reference pages are not the flag tables';" \
		"rewrite them with: cmake --build <build dir> --target" \
		"docs-reference (then commit docs/reference)" >&2
fi
exit $status
