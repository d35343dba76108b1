#!/usr/bin/env bats
# The official provider SDKs (pinned in tests/sdk/package.json) parse what
# the fake provider sends: text, tool calls, stop reasons and usage. This is
# what lets the C client's tests against the fake stand for the real APIs.
# The SDKs are installed once into tests/sdk/node_modules (npm ci, cached by
# the lock file's digest); without node or the npm registry the tests skip.

load test_helper

SDK_DIR="$CAVE_ROOT/tests/sdk"

setup_file() {
	local status=$BATS_FILE_TMPDIR/sdk-status
	if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
		echo "node and npm are not installed" > "$status"; return 0
	fi
	if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
		echo "node $(node --version) is older than 20" > "$status"; return 0
	fi
	local want have
	want=$(sha256sum "$SDK_DIR/package-lock.json" | cut -d' ' -f1)
	have=$(cat "$SDK_DIR/node_modules/.cave-lock-sha256" 2> /dev/null || true)
	if [ "$want" != "$have" ]; then
		# One install at a time, even with several bats runs in parallel.
		if ! (cd "$SDK_DIR" && flock package-lock.json \
			npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
			> "$BATS_FILE_TMPDIR/npm.log" 2>&1); then
			echo "npm ci failed (is the npm registry reachable?): $(grep -m 1 -i 'error' "$BATS_FILE_TMPDIR/npm.log")" > "$status"
			return 0
		fi
		echo "$want" > "$SDK_DIR/node_modules/.cave-lock-sha256"
	fi
	echo ok > "$status"
}

setup() {
	setup_cave_env
	local status
	status=$(cat "$BATS_FILE_TMPDIR/sdk-status")
	[ "$status" = ok ] || skip "SDKs unavailable: $status"
}

teardown() {
	fake_stop
}

# Runs one suite of conformance.mjs against a fresh fake serving its script.
sdk_suite() {
	local suite=$1 script=${2:-$SDK_DIR/scripts/$1.json}
	fake_start "$script"
	run node "$SDK_DIR/conformance.mjs" "$suite"
}

steps_in() {
	/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["responses"]))' "$1"
}

@test "Anthropic SDK: messages.create, messages.stream, tool round, retry, error event" {
	sdk_suite anthropic
	assert_success
	assert_line "anthropic: 8 passed, 0 failed"
	refute_output --partial "not ok"
	# Every scripted step was consumed: one 429 retried plus eight calls.
	[ "$(fake_requests)" -eq "$(steps_in "$SDK_DIR/scripts/anthropic.json")" ]
}

@test "OpenAI SDK: chat.completions create and stream, tool calls, include_usage" {
	sdk_suite openai-chat
	assert_success
	assert_line "openai-chat: 7 passed, 0 failed"
	[ "$(fake_requests)" -eq "$(steps_in "$SDK_DIR/scripts/openai-chat.json")" ]
	# The stream request asked for usage the way the SDK spells it.
	fake_request 2 | grep -q '"stream_options":{"include_usage":true}'
}

@test "OpenAI SDK: responses create and stream, function calls, incomplete, error event" {
	sdk_suite openai-responses
	assert_success
	assert_line "openai-responses: 5 passed, 0 failed"
	[ "$(fake_requests)" -eq "$(steps_in "$SDK_DIR/scripts/openai-responses.json")" ]
}

@test "Google GenAI SDK: generateContent and generateContentStream with a function call" {
	sdk_suite gemini
	assert_success
	assert_line "gemini: 7 passed, 0 failed"
	[ "$(fake_requests)" -eq "$(steps_in "$SDK_DIR/scripts/gemini.json")" ]
	fake_request 3 | grep -q '"query":"alt=sse"'
}

@test "the conformance checks fail when the fake sends something else" {
	# A negative control: change the scripted text and usage, and the same
	# checks must report failures rather than pass regardless.
	/usr/bin/python3 - "$SDK_DIR/scripts/anthropic.json" > mutated.json <<-'EOF'
		import json, sys
		d = json.load(open(sys.argv[1]))
		d["responses"][0]["usage"]["cache_read"] = 999
		d["responses"][1]["text"] = "Something else."
		json.dump(d, sys.stdout)
	EOF
	sdk_suite anthropic mutated.json
	assert_failure 1
	assert_output --partial "not ok - messages.create parses text, tool_use and usage"
	assert_output --partial "not ok - tool round"
	assert_line "anthropic: 6 passed, 2 failed"
}
