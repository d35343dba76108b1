#!/usr/bin/env bash
# The ring's per-turn overhead with a 1 MB history: what one more turn of
# `cave run` (all filters) costs on top of one more direct cave-call of the
# same call.request. Start-up cancels: each side is timed at K calls and at
# 1 call in the same process set-up, and per turn = (T_K - T_1) / (K - 1).
#
#   ring:   cave run --max-usd (cave-budget, cave-call, cave-sandbox), the
#           model a fixture that asks for K-1 tool calls, then answers
#   direct: the same K call.requests (taken from the ring's journal) piped
#           through one cave-call, against the first one alone
#
# Both answer from recorded exchanges (fixtures, no network), so a turn's
# call is the same work on both sides: parse the ~1 MB request, key it
# (canonical JSON, sha256), replay the stream. What the ring adds a turn:
# the head building the next request from the history, dumping and
# journaling it with fsync (ext4 or whatever holds $TMPDIR), cave-budget's
# reserve and settle (and the budget.* events), cave-sandbox's pass-through,
# three more pipe hops of the megabyte, and the head's fold of the answer.
# The tool calls are to a tool the agent does not declare, so the head
# answers each with an error block of its own: the extra turns carry no
# tool run (a sandboxed run is tests/bench/sandbox.sh's figure) and no
# tool.request/tool.result events. --no-breakers, since the same refusal
# every turn is what the no_progress breaker stops.
# Prints the medians (over BENCH_N paired repetitions) and the ratio;
# goal: the ring adds under 1 ms a turn.
# Usage: tests/bench/ring.sh   (BENCH_N=15 repetitions, BENCH_K=12 turns)
set -eu
root=${CAVE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
PATH="$root/bin:$PATH"
N=${BENCH_N:-15}
K=${BENCH_K:-12}
[ "$K" -ge 2 ] || { echo "ring: BENCH_K must be at least 2" >&2; exit 2; }
[ -n "${EPOCHREALTIME:-}" ] || { echo "ring: needs bash 5 (EPOCHREALTIME)" >&2; exit 70; }
. "$root/tests/fake-provider/fake.bash"
work=$(mktemp -d); trap 'fake_stop; rm -rf "$work"' EXIT
cd "$work"
mkdir -p agent/tools corpus1 corpusK
printf '#!/bin/sh\necho none\n' > agent/tools/lookup; chmod +x agent/tools/lookup

# The 1 MB history, given as the prompt: lines of code and prose as an
# agent reads and writes them, with what JSON must escape (newlines, tabs,
# quotes, backslashes) and some multi-byte UTF-8: one such byte in about
# 20. BENCH_TEXT=dense: one in 9 (a worst case for the scan and the dump).
/usr/bin/python3 - "${BENCH_TEXT:-mixed}" > prompt.txt <<'PY'
import random, sys
r = random.Random(7)
plain = ("the a to of and in for is on that with as it by be this are from or at "
         "call tool turn ledger reserve budget request response event model output "
         "input token price catalog ring filter journal receipt sandbox policy run "
         "int char size_t return if else while for struct const static void").split()
special = ["\"quoted\"", "back\\slash", "caf\u00e9", "na\u00efve", "\u2192", "\u6f22\u5b57",
           "\U0001F600", "{\"k\": 1}", "path\\to\\file", "\u00fcber"]
dense = sys.argv[1] == "dense"
out, n = [], 0
while n < 1 << 20:
    if dense:
        words = [r.choice(plain[:4] + special) for _ in range(r.randint(4, 20))]
        line = " ".join(words) + "\t" + str(r.randint(0, 10**6)) + "\n"
    else:
        words = [r.choice(special) if r.random() < 0.04 else r.choice(plain)
                 for _ in range(r.randint(3, 14))]
        line = "\t" * r.choice([0, 0, 1, 2]) + " ".join(words) + "\n"
    out.append(line)
    n += len(line.encode())
sys.stdout.write("".join(out))
PY
cat > agent/agent.yaml <<'EOF'
id: bench
model: anthropic/claude-haiku-4-5
system: You summarise long logs.
max_output_tokens: 64
tools:
  - name: lookup
    description: Looks a line up.
    effect: read
    command: tools/lookup
    input_schema: {type: object}
EOF
/usr/bin/python3 - "$K" > scriptK.json <<'PY'
import json, sys
k = int(sys.argv[1])
steps = [{"tool_calls": [{"id": "tu_%d" % i, "name": "recall", "input": {"n": i}}],
          "usage": {"input": 10, "output": 3}} for i in range(1, k)]
steps.append({"text": "done", "usage": {"input": 10, "output": 1}})
print(json.dumps({"responses": steps}))
PY
echo '{"responses":[{"text":"done","usage":{"input":10,"output":1}}]}' > script1.json

# Record: a live run against the fake provider gives the K requests; each is
# replayed, one cave-call each and in order, into the corpus.
record() { # script corpus requests-file
	local req
	BATS_TEST_TMPDIR=$work fake_start "$1"
	while IFS= read -r req; do
		printf '%s\n' "$req" | cave-call --record "$2" > /dev/null
	done < "$3"
	fake_stop
}
BATS_TEST_TMPDIR=$work fake_start scriptK.json
cave-run --quiet --no-breakers agent - < prompt.txt > /dev/null
fake_stop
jq -c 'select(.type == "call.request" and .src == "cave-run")' .caveman/runs/*/events.ndjson > live.ndjson
[ "$(wc -l < live.ndjson)" -eq "$K" ] || { echo "ring: the live run made $(wc -l < live.ndjson) calls, not $K" >&2; exit 1; }
record scriptK.json corpusK live.ndjson
head -n 1 live.ndjson > live1.ndjson
record script1.json corpus1 live1.ndjson
rm -rf .caveman
sed -i 's#^model: #model: fixture/#' agent/agent.yaml

run_ring() { # corpus: one whole run, offline
	cave-run --quiet --no-breakers --max-usd 100 --fixtures "$1" agent - < prompt.txt > /dev/null
}
# The direct side replays exactly what the ring sent.
run_ring corpusK
jq -c 'select(.type == "call.request" and .src == "cave-run")' .caveman/runs/*/events.ndjson > reqK.ndjson
n=$(wc -l < reqK.ndjson)
[ "$n" -eq "$K" ] || { echo "ring: the fixture run made $n calls, not $K" >&2; exit 1; }
jq -e -s 'map(select(.type == "budget.settle")) | length == '"$K" .caveman/runs/*/events.ndjson > /dev/null ||
	{ echo "ring: cave-budget did not settle every call" >&2; exit 1; }
hist=$(head -n 1 reqK.ndjson | wc -c)
head -n 1 reqK.ndjson > req1.ndjson
rm -rf .caveman

us() { # wall time of "$@" in microseconds
	local t0=${EPOCHREALTIME/./} t1
	"$@"
	t1=${EPOCHREALTIME/./}
	echo $((t1 - t0))
}
direct() { cave-call --fixtures corpusK < "$1" > out.ndjson; }
: > per
for _ in $(seq 1 "$N"); do
	d1=$(us direct req1.ndjson); dk=$(us direct reqK.ndjson)
	[ "$(grep -c '"type":"call.response"' out.ndjson)" -eq "$K" ] ||
		{ echo "ring: the direct cave-call did not answer every request" >&2; exit 1; }
	r1=$(us run_ring corpus1); rm -rf .caveman
	rk=$(us run_ring corpusK); rm -rf .caveman
	echo "$d1 $dk $r1 $rk" >> per
done
# What the journal's durable append of one request costs here by itself
# (write + fdatasync, the intent on disk before the call): a floor under
# the ring's per-turn figure that no filter can remove.
sync_us=$(/usr/bin/python3 - req1.ndjson "$N" <<'PY'
import os, sys, time
line = open(sys.argv[1], "rb").read()
fd = os.open("sync.probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
ts = []
for _ in range(int(sys.argv[2]) * 2):
    t0 = time.perf_counter()
    os.write(fd, line)
    os.fdatasync(fd)
    ts.append(time.perf_counter() - t0)
os.close(fd)
os.unlink("sync.probe")
ts.sort()
print(int(ts[len(ts) // 2] * 1e6))
PY
)
awk -v k="$K" -v n="$N" -v h="$hist" -v s="$sync_us" '
	function median(a, m,   i, j, t) { # sorts a[1..m] in place
		for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	{ d1[NR] = $1; dk[NR] = $2; r1[NR] = $3; rk[NR] = $4
	  dt[NR] = ($2 - $1) / (k - 1); rt[NR] = ($4 - $3) / (k - 1); ov[NR] = rt[NR] - dt[NR] }
	END {
		D1 = median(d1, NR); DK = median(dk, NR); R1 = median(r1, NR); RK = median(rk, NR)
		D = median(dt, NR); R = median(rt, NR); O = median(ov, NR)
		printf "history %.2f MB, %d turns vs 1, median of %d: direct cave-call %.1f / %.1f ms, cave run %.1f / %.1f ms\n",
			h / 1048576, k, n, DK / 1000, D1 / 1000, RK / 1000, R1 / 1000
		printf "per turn: direct call %.2f ms, ring turn %.2f ms, ratio %.2fx; the ring adds %.2f ms a turn (goal < 1 ms: %s)\n",
			D / 1000, R / 1000, (D > 0 ? R / D : 0), O / 1000, (O < 1000 ? "met" : "not met")
		print "  a turn adds: building, dumping and journaling (fdatasync) the request, cave-budget reserve and settle, cave-sandbox pass-through, 3 pipe hops; no tool run"
		printf "  of which the journal'"'"'s durable append of the request alone (write + fdatasync here): %.2f ms; the rest %.2f ms\n",
			s / 1000, (O - s) / 1000
	}' per
