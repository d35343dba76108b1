#!/usr/bin/env bash
# tests/bench/sandbox.sh [N]: a trivial tool (true) through cave-sandbox in
# required mode, against a bare fork/exec of the same program. Prints the
# median per-call time of each, their ratio and the median added ms
# (goal: under 5 ms). Exits 1 when the median added time is 5 ms or more.
# Then the same tool N/4 times (at least 10) with network: true, against
# the network: false median of the same run: what slirp4netns adds (only
# reported, not a goal).
set -eu
cd "$(dirname "$0")/../.." || exit 70
n=${1:-200}
nn=$(( n / 4 < 10 ? 10 : n / 4 ))
bin=$PWD/bin/cave-sandbox
[ -x "$bin" ] || { echo "sandbox.sh: build bin/cave-sandbox first" >&2; exit 70; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
true_bin=$(type -P true)
# reqs COUNT NETWORK: COUNT requests to run true
reqs() {
	for i in $(seq "$1"); do
		printf '{"type":"tool.request","src":"bench","id":"b%d","name":"true","input":{},"effect":"read","command":"%s","workspace":"%s","network":%s}\n' \
			"$i" "$true_bin" "$tmp" "$2"
	done
}
# one request at a time, so each result's ms is one call's own wall time
reqs "$n" false | "$bin" --jobs 1 --store "$tmp/store" |
	jq -r 'select(.type=="tool.result" and .exit == 0) | .us / 1000' > "$tmp/sbx"
reqs "$nn" true | "$bin" --jobs 1 --store "$tmp/store" |
	jq -r 'select(.type=="tool.result") |
	       if .exit == 0 then .us / 1000 else "refused: " + .denied.message end' > "$tmp/net"
python3 - "$n" "$true_bin" "$tmp/sbx" "$nn" "$tmp/net" <<'PY'
import os, statistics, sys, time
n, prog, f, nn, fnet = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
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
lines = open(fnet).read().splitlines()
refused = [x for x in lines if x.startswith("refused")]
if refused or len(lines) != nn:
    print("sandbox: network: true not measured: %s"
          % (refused[0] if refused else "%d of %d answered" % (len(lines), nn)))
else:
    mn = statistics.median(float(x) for x in lines)
    print("sandbox: %d calls of true with network: true; median %.2f ms; "
          "ratio to network: false %.1fx; slirp4netns adds %.2f ms"
          % (nn, mn, mn / ms if ms > 0 else float("inf"), mn - ms))
sys.exit(0 if ms - mb < 5 else 1)
PY
