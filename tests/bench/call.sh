#!/usr/bin/env bash
# cave-call against the fake provider vs curl doing the same request: wall
# time per call and time to first byte, as ratios (goal: within 1.1x).
set -eu
CAVE_ROOT=${CAVE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export CAVE_ROOT PATH="$CAVE_ROOT/bin:$PATH"
. "$CAVE_ROOT/tests/fake-provider/fake.bash"
n=${BENCH_CALLS:-40}
tmp=$(mktemp -d); trap 'fake_stop; rm -rf "$tmp"' EXIT
{
	printf '{"responses":['
	for i in $(seq 1 $((2 * n))); do
		[ "$i" -gt 1 ] && printf ','
		printf '{"text":"The quick brown fox jumps over the lazy dog, again and again.","first_byte_delay_ms":20,"usage":{"input":20,"output":14}}'
	done
	printf ']}\n'
} > "$tmp/script.json"
BATS_TEST_TMPDIR=$tmp fake_start "$tmp/script.json"
cave request -m anthropic/claude-haiku-4-5 "bench" > "$tmp/req.ndjson"
body=$(jq -c 'select(.type=="call.request") | {model, max_tokens: .max_output_tokens, stream: true, messages}' "$tmp/req.ndjson")
now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for i in $(seq 1 "$n"); do
	t0=$(now)
	curl -sS -N -o /dev/null -w '%{time_starttransfer}\n' "$ANTHROPIC_BASE_URL/v1/messages" \
		-H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' \
		-H 'content-type: application/json' -d "$body" >> "$tmp/curl.ttfb"
	echo $(( ($(now) - t0) / 1000 )) >> "$tmp/curl.us"
	t0=$(now)
	cave-call < "$tmp/req.ndjson" > "$tmp/out.ndjson"
	echo $(( ($(now) - t0) / 1000 )) >> "$tmp/cave.us"
	jq -r 'select(.type=="call.response") | .ttft_ms' "$tmp/out.ndjson" >> "$tmp/cave.ttft"
done
cu=$(median < "$tmp/curl.us"); cv=$(median < "$tmp/cave.us")
ct=$(awk '{print $1*1000}' "$tmp/curl.ttfb" | median); vt=$(median < "$tmp/cave.ttft")
awk -v cu="$cu" -v cv="$cv" -v ct="$ct" -v vt="$vt" -v n="$n" 'BEGIN {
	printf "cave-call vs curl, %d calls each, median wall: curl %.1f ms, cave-call %.1f ms, ratio %.2fx (goal <= 1.1x)\n", n, cu/1000, cv/1000, cv/cu
	printf "time to first byte/delta, median: curl %.1f ms, cave-call %.1f ms, ratio %.2fx\n", ct, vt, (ct > 0 ? vt/ct : 0)
}'
