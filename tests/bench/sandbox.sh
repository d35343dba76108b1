#!/usr/bin/env bash
# tests/bench/sandbox.sh [N]: a trivial tool (true) through cave-sandbox in
# required mode, against a bare fork/exec of the same program. Prints the
# median per-call time of each, their ratio and the median added ms
# (goal: under 5 ms). Exits 1 when the median added time is 5 ms or more.
set -eu
cd "$(dirname "$0")/../.." || exit 70
n=${1:-200}
bin=$PWD/bin/cave-sandbox
[ -x "$bin" ] || { echo "sandbox.sh: build bin/cave-sandbox first" >&2; exit 70; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
true_bin=$(type -P true)
for i in $(seq "$n"); do
	printf '{"type":"tool.request","src":"bench","id":"b%d","name":"true","input":{},"effect":"read","command":"%s","workspace":"%s"}\n' \
		"$i" "$true_bin" "$tmp"
done > "$tmp/reqs"
# one request at a time, so each result's ms is one call's own wall time
"$bin" --jobs 1 --store "$tmp/store" < "$tmp/reqs" |
	jq -r 'select(.type=="tool.result" and .exit == 0) | .us / 1000' > "$tmp/sbx"
python3 - "$n" "$true_bin" "$tmp/sbx" <<'PY'
import os, statistics, sys, time
n, prog, f = int(sys.argv[1]), sys.argv[2], sys.argv[3]
bare = []
for _ in range(n):
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.execv(prog, [prog])
    os.waitpid(pid, 0)
    bare.append((time.perf_counter() - t) * 1000)
sbx = [float(x) for x in open(f)]
if len(sbx) != n or any(x < 0 for x in sbx):
    print("sandbox.sh: cave-sandbox answered %d of %d calls" % (len(sbx), n), file=sys.stderr)
    sys.exit(70)
mb, ms = statistics.median(bare), statistics.median(sbx)
print("sandbox: %d calls of true; bare fork/exec median %.2f ms; "
      "cave-sandbox required median %.2f ms; ratio %.1fx; added %.2f ms (goal < 5)"
      % (n, mb, ms, ms / mb if mb > 0 else float("inf"), ms - mb))
sys.exit(0 if ms - mb < 5 else 1)
PY
