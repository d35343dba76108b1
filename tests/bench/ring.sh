#!/usr/bin/env bash
# The ring's per-turn overhead: a whole `cave run` turn (head, journal with
# fsync, cave-budget, cave-call, cave-sandbox, receipt) against one direct
# cave-call of the same call.request, both answering from a recorded
# exchange with a 1 MB prompt (so every member moves the megabyte).
# Prints the medians, their difference (goal: under 1 ms a turn; process
# start-up of the ring is included, so it is an upper bound) and the ratio.
set -eu
root=${CAVE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
PATH="$root/bin:$PATH"
N=${BENCH_N:-15}
. "$root/tests/fake-provider/fake.bash"
work=$(mktemp -d); trap 'fake_stop; rm -rf "$work"' EXIT
cd "$work"
mkdir -p agent corpus
{
	echo "id: bench"
	echo "model: anthropic/claude-haiku-4-5"
	echo "max_output_tokens: 64"
	printf 'system: "'
	head -c 1048576 /dev/zero | tr '\0' 'a'
	echo '"'
} > agent/agent.yaml
echo '{"responses":[{"text":"ok","usage":{"input":10,"output":1}}]}' > script.json
fake_start script.json
cave-run --quiet agent "hello" > /dev/null
fake_stop
fake_start script.json
jq -c 'select(.type == "call.request" and .src == "cave-run")' .caveman/runs/*/events.ndjson > req.ndjson
cave-call --record corpus < req.ndjson > /dev/null
fake_stop
sed -i 's#^model: #model: fixture/#' agent/agent.yaml
jq -c '.model = "anthropic/claude-haiku-4-5" | .provider = "fixture"' req.ndjson > freq.ndjson

ms() { local t0 t1; t0=$(date +%s%N); "$@" > /dev/null; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for i in $(seq 1 "$N"); do ms cave-call --fixtures corpus < freq.ndjson; done | median > direct
for i in $(seq 1 "$N"); do ms cave-run --quiet --fixtures corpus agent "hello"; done | median > ring
d=$(cat direct); r=$(cat ring)
awk -v d="$d" -v r="$r" 'BEGIN {
	printf "direct cave-call: %.2f ms, cave run turn: %.2f ms (median of '"$N"')\n", d / 1000, r / 1000
	printf "overhead per turn: %.2f ms, ratio %.2f\n", (r - d) / 1000, r / d }'
