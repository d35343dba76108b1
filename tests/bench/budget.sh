#!/usr/bin/env bash
# cave-budget's cost per call: the same request/response pairs through the
# filter, once as events it owns (each call reserved, then settled: parse,
# worst case, ledger, three events out) and once renamed to types it does
# not own (prefix-matched and copied unparsed). Prints one line: the ratio.
# Usage: tests/bench/budget.sh [CALLS]   (default 20000)
set -eu
cd "$(dirname "$0")/../.." || exit 70
n=${1:-20000}
bin=${CAVE_BUDGET:-bin/cave-budget}
[ -x "$bin" ] || { echo "budget: $bin not built" >&2; exit 70; }
export CAVE_CATALOG=$PWD/tests/fixtures/cave-budget/catalog.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 - "$n" > "$tmp/owned.ndjson" <<'PY'
import json, sys
run, span = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "a" * 16
msgs = [{"role": "user", "content": "summarise the build log " * 40}]
for i in range(int(sys.argv[1])):
    env = {"v": 1, "run": run, "span": span, "seq": i, "id": "c%d" % i}
    print(json.dumps({"type": "call.request", "src": "cave-run", **env,
                      "provider": "anthropic", "model": "budget-test",
                      "api": "anthropic-messages", "messages": msgs,
                      "max_output_tokens": 1024}, separators=(",", ":")))
    print(json.dumps({"type": "call.response", "src": "cave-call", **env,
                      "content": [{"type": "text", "text": "ok " * 50}],
                      "stop_reason": "end_turn", "usage_basis": "provider_reported",
                      "usage": {"input": 300, "cache_read": 0, "cache_write": 0,
                                "cache_write_1h": 0, "output": 200, "reasoning": None}},
                     separators=(",", ":")))
PY
sed -e 's/^{"type":"call\.request"/{"type":"bench.request"/' \
    -e 's/^{"type":"call\.response"/{"type":"bench.response"/' \
    "$tmp/owned.ndjson" > "$tmp/passed.ndjson"

best() { # best-of-3 wall time in microseconds of the filter over a file
	local f=$1 i t0 t1 b=
	for i in 1 2 3; do
		t0=$(date +%s%N)
		"$bin" --max-usd 1000000 --max-model-calls "$((n + 1))" < "$f" > "$tmp/out"
		t1=$(date +%s%N)
		t=$(( (t1 - t0) / 1000 ))
		if [ -z "$b" ] || [ "$t" -lt "$b" ]; then b=$t; fi
	done
	echo "$b"
}
owned=$(best "$tmp/owned.ndjson")
# the owned run must really have reserved and settled every call
settles=$(grep -c '"type":"budget.settle"' "$tmp/out" || true)
[ "$settles" -eq "$n" ] || { echo "budget: expected $n settles, got $settles" >&2; exit 1; }
passed=$(best "$tmp/passed.ndjson")
awk -v o="$owned" -v p="$passed" -v n="$n" 'BEGIN {
	printf "budget: reserve+settle %.2fx pass-through (%d calls: %.1f us/call vs %.1f us/call)\n",
	       o / (p > 0 ? p : 1), n, o / n, p / n }'
