# Bash helpers for bats: run the scripted fake provider (fakeprov.py) as a
# real process on loopback for the length of one test.
#
#   fake_start SCRIPT.json   start it; exports FAKE_PORT FAKE_URL FAKE_LOG FAKE_PID,
#                            the provider base URLs and fake API keys
#   fake_stop                stop it (call from teardown; safe to call twice;
#                            a test that forgets: the server exits by itself
#                            once the test's process is gone)
#   fake_requests            how many requests it has logged
#   fake_request N           the Nth logged request (one NDJSON line, N from 1)
#
# Every fake key contains FAKE_KEY_MARKER ("cave-test-secret") so a test can
# grep any output, journal or receipt to prove that no key leaked.

FAKE_PROVIDER_DIR=${FAKE_PROVIDER_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
FAKE_KEY_MARKER=cave-test-secret
# Debian's interpreter when present: the server needs nothing but the stdlib.
if [ -x /usr/bin/python3 ]; then FAKE_PYTHON=${FAKE_PYTHON:-/usr/bin/python3}; else FAKE_PYTHON=${FAKE_PYTHON:-python3}; fi

fake_start() {
	local script=${1:?fake_start: usage: fake_start SCRIPT.json}
	local dir=${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/fake-provider.$$.$RANDOM
	local i me=${BASHPID:-$$} # the test's process, taken before the fork below
	[ -r "$script" ] || { echo "fake_start: cannot read $script" >&2; return 1; }
	[ -z "${FAKE_PID:-}" ] || fake_stop
	mkdir -p "$dir" || return 1
	export FAKE_LOG=$dir/requests.ndjson
	: > "$FAKE_LOG"
	"$FAKE_PYTHON" "$FAKE_PROVIDER_DIR/fakeprov.py" --script "$script" \
		--log "$FAKE_LOG" --port-file "$dir/port" --port 0 \
		--watch-pid "$me" \
		> "$dir/stdout" 2> "$dir/stderr" 3>&- &
	export FAKE_PID=$!
	for i in $(seq 1 200); do
		[ -s "$dir/port" ] && break
		if ! kill -0 "$FAKE_PID" 2>/dev/null; then
			echo "fake_start: server exited:" >&2; cat "$dir/stderr" >&2
			unset FAKE_PID; return 1
		fi
		sleep 0.05
	done
	[ -s "$dir/port" ] || { echo "fake_start: no port after 10s" >&2; fake_stop; return 1; }
	export FAKE_PORT; FAKE_PORT=$(cat "$dir/port")
	export FAKE_URL=http://127.0.0.1:$FAKE_PORT
	export FAKE_DIR=$dir
	export ANTHROPIC_BASE_URL=$FAKE_URL
	export OPENAI_BASE_URL=$FAKE_URL/v1
	export GOOGLE_GEMINI_BASE_URL=$FAKE_URL
	export ANTHROPIC_API_KEY=sk-ant-test-$FAKE_KEY_MARKER-anthropic-0000
	export OPENAI_API_KEY=sk-test-$FAKE_KEY_MARKER-openai-0000
	export GEMINI_API_KEY=AIza-test-$FAKE_KEY_MARKER-gemini-0000
}

fake_stop() {
	local pid=${FAKE_PID:-} i
	[ -n "$pid" ] || return 0
	unset FAKE_PID
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	return 0
}

fake_requests() {
	[ -f "${FAKE_LOG:-}" ] || { echo 0; return; }
	wc -l < "$FAKE_LOG" | tr -d ' '
}

fake_request() {
	local n=${1:?fake_request: usage: fake_request N}
	sed -n "${n}p" "$FAKE_LOG"
}
