#!/bin/sh
# Writes the decoder's seed corpus from the test vectors: one file per
# vector, holding its payload bytes. The corpus also keeps small inputs a
# fuzzing run found new coverage with (fuzz-*), merged with libFuzzer's
# -merge=1. Run from anywhere; commit the result.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
vectors="$here/../data/vectors/vllm_events.jsonl"
out="$here/corpus/wire"
mkdir -p "$out"
while IFS= read -r line; do
	name=$(printf '%s\n' "$line" | sed -n 's/.*"name": "\([^"]*\)".*/\1/p')
	hex=$(printf '%s\n' "$line" | sed -n 's/.*"hex": "\([0-9a-f]*\)".*/\1/p')
	[ -n "$name" ] && [ -n "$hex" ] || continue
	printf '%s' "$hex" | xxd -r -p >"$out/$name"
done <"$vectors"
