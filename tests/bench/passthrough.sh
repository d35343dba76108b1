#!/usr/bin/env bash
# Event pass-through: MB/s of a ~100 MB event log through a filter that owns
# none of its events (cave-call with no call.request), vs cat (goal >= 0.5x).
set -eu
CAVE_ROOT=${CAVE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export CAVE_ROOT PATH="$CAVE_ROOT/bin:$PATH"
mb=${BENCH_MB:-100}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$tmp/log.ndjson" "$mb" <<'PY'
import json, sys
path, mb = sys.argv[1], int(sys.argv[2])
line = json.dumps({"type": "x.note", "src": "bench", "v": 1, "run": "0" * 36, "span": "0" * 16,
                   "text": "lorem ipsum dolor sit amet " * 8}, separators=(",", ":")) + "\n"
with open(path, "w") as f:
    f.write(line * (mb * 1024 * 1024 // len(line)))
PY
size=$(stat -c %s "$tmp/log.ndjson")
best() { # best of 3 wall times in ns of: "$@" < log | cat > /dev/null
	local b=0 t0 t
	for _ in 1 2 3; do
		t0=$(date +%s%N); "$@" < "$tmp/log.ndjson" | cat > /dev/null; t=$(( $(date +%s%N) - t0 ))
		if [ "$b" -eq 0 ] || [ "$t" -lt "$b" ]; then b=$t; fi
	done
	echo "$b"
}
tc=$(best cat); tf=$(best cave-call)
awk -v s="$size" -v tc="$tc" -v tf="$tf" 'BEGIN {
	printf "pass-through of %.0f MB: cat %.0f MB/s, cave-call %.0f MB/s, ratio %.2fx (goal >= 0.5x)\n",
		s/1048576, s/1048576/(tc/1e9), s/1048576/(tf/1e9), tc/tf
}'
