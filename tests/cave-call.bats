#!/usr/bin/env bats
# cave-call against the fake provider: a real HTTP server on loopback that
# speaks each protocol byte for byte, scripted per test.

load test_helper

setup() {
	setup_cave_env
}

teardown() {
	fake_stop
}

script() { # writes a fake-provider script from its argument
	printf '%s\n' "$1" > "$BATS_TEST_TMPDIR/script.json"
	fake_start "$BATS_TEST_TMPDIR/script.json"
}

models=(
	"anthropic/claude-haiku-4-5 anthropic-messages /v1/messages"
	"openai/gpt-5-mini openai-chat /v1/chat/completions"
	"openai/gpt-5-mini openai-responses /v1/responses"
	"google/gemini-2.5-flash gemini /v1beta/models/gemini-2.5-flash"
)

@test "each protocol, streamed and whole: text, usage normalised, key only in its header" {
	for stream in "" --no-stream; do
		for m in "${models[@]}"; do
			set -- $m
			script '{"responses":[{"text":"Hello there, careful world","usage":{"input":120,"cache_read":30,"output":40,"reasoning":12}}]}'
			cave request -m "$1" --api "$2" $stream "hi" | cave-call > out.ndjson
			jq -e -s --arg api "$2" '
				(map(select(.type=="call.response")) | length == 1) and
				(map(select(.type=="call.response"))[0] | .api == $api and
				 .content == [{"type":"text","text":"Hello there, careful world"}] and
				 .stop_reason == "end_turn" and .usage_basis == "provider_reported" and
				 .usage.output == 40 and .usage.cache_read == 30)' out.ndjson
			# Anthropic does not report reasoning apart: unknown, never 0
			if [ "$2" = anthropic-messages ]; then want=null; else want=12; fi
			[ "$(jq -s 'map(select(.type=="call.response"))[0].usage.reasoning' out.ndjson)" = "$want" ]
			# Anthropic and Gemini report a cache write; the input excludes cache reads
			jq -e -s 'map(select(.type=="call.response"))[0].usage.input == 120' out.ndjson
			if [ -z "$stream" ]; then
				[ "$(jq -s '[.[] | select(.type=="call.delta") | .text] | add' out.ndjson)" = '"Hello there, careful world"' ]
			fi
			req=$(fake_request 1)
			[[ $(jq -r .path <<<"$req") == "$3"* ]]
			! grep -q "$FAKE_KEY_MARKER" out.ndjson
			! jq -r '.path + "?" + .query' <<<"$req" | grep -q "$FAKE_KEY_MARKER"
			case $2 in
			anthropic-messages) jq -e '.headers["x-api-key"] == env.ANTHROPIC_API_KEY and .headers["anthropic-version"] != null' <<<"$req" ;;
			openai-*) jq -e '.headers.authorization == "Bearer " + env.OPENAI_API_KEY' <<<"$req" ;;
			gemini) jq -e '.headers["x-goog-api-key"] == env.GEMINI_API_KEY' <<<"$req" ;;
			esac
			fake_stop
		done
	done
}

@test "tool definitions, a tool round and a tool call in each protocol" {
	cat > tools.json <<'J'
[{"name":"lookup_order","description":"Find an order","input_schema":{"type":"object","properties":{"order":{"type":"integer"}},"required":["order"]}}]
J
	cat > msgs.json <<'J'
[{"role":"user","content":"Where is order 1042?"},
 {"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"lookup_order","input":{"order":1042}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"shipped","is_error":false}]}]
J
	for m in "${models[@]}"; do
		set -- $m
		script '{"responses":[{"tool_calls":[{"id":"call_9","name":"lookup_order","input":{"order":7}}],"stop":"tool_use","usage":{"input":50,"output":9}}]}'
		cave request -m "$1" --api "$2" --tools tools.json --messages msgs.json | cave-call > out.ndjson
		jq -e -s 'map(select(.type=="call.response"))[0] |
			.stop_reason == "tool_use" and
			(.content | map(select(.type=="tool_use")) | length == 1) and
			(.content | map(select(.type=="tool_use"))[0] | .name == "lookup_order" and .input == {"order":7} and (.id | length > 0))' out.ndjson
		body=$(fake_request 1 | jq -c .body)
		case $2 in
		anthropic-messages)
			jq -e '.tools[0].input_schema.required == ["order"] and
				.messages[1].content[0].type == "tool_use" and
				.messages[2].content[0].type == "tool_result" and .messages[2].content[0].tool_use_id == "call_1"' <<<"$body" ;;
		openai-chat)
			jq -e '.tools[0].type == "function" and .tools[0].function.name == "lookup_order" and
				(.messages | map(select(.role=="assistant"))[0].tool_calls[0].id == "call_1") and
				(.messages | map(select(.role=="tool"))[0].tool_call_id == "call_1")' <<<"$body" ;;
		openai-responses)
			jq -e '.tools[0].type == "function" and .tools[0].name == "lookup_order" and
				(.input | map(select(.type=="function_call"))[0].call_id == "call_1") and
				(.input | map(select(.type=="function_call_output"))[0].output == "shipped")' <<<"$body" ;;
		gemini)
			jq -e '.tools[0].functionDeclarations[0].name == "lookup_order" and
				(.contents | map(.parts[]) | map(select(.functionCall))[0].functionCall.name == "lookup_order") and
				(.contents | map(.parts[]) | map(select(.functionResponse))[0].functionResponse.name == "lookup_order")' <<<"$body" ;;
		esac
		fake_stop
	done
}

@test "429 with retry-after is retried after the wait the provider asked for" {
	script '{"responses":[{"status":429,"headers":{"retry-after":"1"},"body":"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}"},{"text":"ok","usage":{"input":5,"output":1}}]}'
	cave request -m anthropic/claude-haiku-4-5 "hi" | cave-call > out.ndjson
	[ "$(fake_requests)" -eq 2 ]
	jq -e -s 'map(select(.type=="call.error")) | length == 1 and
		(.[0] | .final == false and .status == 429 and .code == "http_429" and
		 .retry_after_ms == 1000 and .retryable == true and (.message | test("slow down")))' out.ndjson
	jq -e -s 'map(select(.type=="call.response"))[0].attempts == 2' out.ndjson
}

@test "5xx until the attempts run out: each attempt an event, exit 69" {
	script '{"responses":[{"status":500,"body":"oops"},{"status":503,"body":"<html>down</html>"},{"status":529,"body":"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}]}'
	run -69 --separate-stderr bash -c 'cave request -m anthropic/claude-haiku-4-5 "hi" | cave-call --max-attempts 3 --retry-base-ms 10 > out.ndjson'
	[ "$(fake_requests)" -eq 3 ]
	jq -e -s '[.[] | select(.type=="call.error") | [.attempt, .final, .status]] == [[1,false,500],[2,false,503],[3,true,529]]' out.ndjson
	jq -e -s 'map(select(.type=="call.error"))[2].message | test("Overloaded") and (test("\n") | not)' out.ndjson
	! jq -e -s 'map(select(.type=="call.response")) | length > 0' out.ndjson
}

@test "a 400 is not retried and its body becomes a one-line message" {
	script '{"responses":[{"status":400,"body":"{\"error\":{\"message\":\"bad model\\nsecond line\",\"type\":\"invalid_request_error\"}}"}]}'
	run -69 bash -c 'cave request -m openai/gpt-5-mini --api openai-chat "hi" | cave-call > out.ndjson'
	[ "$(fake_requests)" -eq 1 ]
	jq -e -s 'map(select(.type=="call.error"))[0] | .final and .code == "http_400" and (.message | test("bad model")) and (.message | test("\n") | not)' out.ndjson
}

@test "an error event mid-stream after text is final: streamed text is never retried" {
	for m in "${models[@]}"; do
		set -- $m
		script '{"responses":[{"text":"one two three four five six seven eight nine ten","error_event_after":7,"usage":{"input":5,"output":4}},{"text":"never"}]}'
		run -69 bash -c "cave request -m $1 --api $2 hi | cave-call --retry-base-ms 10 > out.ndjson"
		[ "$(fake_requests)" -eq 1 ]
		jq -e -s 'map(select(.type=="call.error")) | length == 1 and .[0].final' out.ndjson
		fake_stop
	done
}

@test "an overloaded error event before any text is retried" {
	script '{"responses":[{"text":"abc","error_event_after":1},{"text":"fine","usage":{"input":5,"output":1}}]}'
	cave request -m anthropic/claude-haiku-4-5 "hi" | cave-call --retry-base-ms 10 > out.ndjson
	[ "$(fake_requests)" -eq 2 ]
	jq -e -s 'map(select(.type=="call.response"))[0] | .content[0].text == "fine" and .attempts == 2' out.ndjson
}

@test "a stream cut after text is a final truncated_stream error; before text it is retried" {
	script '{"responses":[{"text":"alpha beta gamma delta","cut_after_events":4}]}'
	run -69 bash -c 'cave request -m anthropic/claude-haiku-4-5 hi | cave-call --retry-base-ms 10 > out.ndjson'
	jq -e -s 'map(select(.type=="call.error"))[0] | .code == "truncated_stream" and .final' out.ndjson
	fake_stop
	script '{"responses":[{"text":"alpha","cut_after_events":1},{"text":"again","usage":{"input":1,"output":1}}]}'
	cave request -m anthropic/claude-haiku-4-5 hi | cave-call --retry-base-ms 10 > out.ndjson
	jq -e -s 'map(select(.type=="call.response"))[0].content[0].text == "again"' out.ndjson
}

@test "a stream that ends without usage says unavailable and invents no number" {
	for m in "${models[@]}"; do
		set -- $m
		script '{"responses":[{"text":"no usage here","omit_usage":true}]}'
		cave request -m "$1" --api "$2" hi | cave-call > out.ndjson || true
		jq -e -s 'map(select(.type=="call.response" or .type=="call.error"))[0] | .usage == null or (has("usage") | not)' out.ndjson
		if jq -e -s 'map(select(.type=="call.response")) | length == 1' out.ndjson >/dev/null; then
			jq -e -s 'map(select(.type=="call.response"))[0].usage_basis == "unavailable"' out.ndjson
		fi
		fake_stop
	done
}

@test "malformed data in a stream is a malformed_stream error, exit 65, never a crash" {
	for m in "${models[@]}"; do
		set -- $m
		script '{"responses":[{"text":"a b c","malformed_after":1}]}'
		run -65 bash -c "cave request -m $1 --api $2 hi | cave-call > out.ndjson"
		jq -e -s 'map(select(.type=="call.error"))[0] | .code == "malformed_stream" and .final' out.ndjson
		fake_stop
	done
}

@test "events split across TCP writes and CRLF line ends parse the same" {
	for m in "${models[@]}"; do
		set -- $m
		script '{"responses":[{"text":"split me into pieces","split":3,"crlf":true,"usage":{"input":7,"output":4}}]}'
		cave request -m "$1" --api "$2" hi | cave-call > out.ndjson
		jq -e -s 'map(select(.type=="call.response"))[0] | .content[0].text == "split me into pieces" and .usage.input == 7' out.ndjson
		fake_stop
	done
}

@test "a slow first byte is waited for and measured; past the timeout it is an error" {
	script '{"responses":[{"text":"late","first_byte_delay_ms":400,"usage":{"input":1,"output":1}}]}'
	cave request -m anthropic/claude-haiku-4-5 hi | cave-call > out.ndjson
	jq -e -s 'map(select(.type=="call.response"))[0] | .ttft_ms >= 350 and .ms >= .ttft_ms' out.ndjson
	fake_stop
	script '{"responses":[{"text":"late","first_byte_delay_ms":3000}]}'
	run -69 bash -c 'cave request -m anthropic/claude-haiku-4-5 hi | cave-call --timeout-ms 300 --max-attempts 1 > out.ndjson'
	jq -e -s 'map(select(.type=="call.error"))[0].code == "timeout"' out.ndjson
}

@test "a refused connection is retried, then reported, exit 69" {
	port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	export ANTHROPIC_BASE_URL=http://127.0.0.1:$port ANTHROPIC_API_KEY=k
	run -69 bash -c 'cave request -m anthropic/claude-haiku-4-5 hi | cave-call --max-attempts 2 --retry-base-ms 10 > out.ndjson'
	jq -e -s '[.[] | select(.type=="call.error") | .code] == ["connect_failed","connect_failed"]' out.ndjson
}

@test "a missing key is a config error (78) that names the variable and nothing else" {
	run -78 --separate-stderr bash -c 'cave request -m openai/gpt-5-mini hi | cave-call > out.ndjson'
	jq -e -s 'map(select(.type=="call.error"))[0] | .code == "no_api_key" and .message == "OPENAI_API_KEY is not set"' out.ndjson
}

@test "other events pass through unchanged, its own come back and are dropped" {
	printf '%s\n' '{"type":"x.other","src":"someone","v":1,"n":1}' \
		'{"type":"call.delta","src":"cave-call","v":1,"id":"old","text":"lap"}' \
		'{"type":"x.other","src":"someone","v":1,"n":2}' > in.ndjson
	cave-call < in.ndjson > out.ndjson
	diff <(grep x.other in.ndjson) out.ndjson
}

@test "a malformed input line names its place, exits 65, and the rest still flows" {
	printf '%s\n' '{"type":"a","src":"s"}' '{"type":' '{"type":"b","src":"s"}' > in.ndjson
	run -65 --separate-stderr cave-call < in.ndjson
	[ "${#lines[@]}" -eq 2 ]
	[[ $stderr == "cave-call: <stdin>:2: "* ]]
}

@test "record a live exchange, then replay it offline as a fixture model" {
	script '{"responses":[{"text":"recorded answer","usage":{"input":11,"output":3}}]}'
	mkdir corpus
	cave request -m openai/gpt-5-mini --api openai-chat "remember me" | cave-call --record corpus > live.ndjson
	[ "$(ls corpus | wc -l)" -eq 1 ]
	! grep -rq "$FAKE_KEY_MARKER" corpus
	! grep -rqi 'authorization' corpus
	fake_stop
	unset OPENAI_BASE_URL OPENAI_API_KEY
	cave request -m fixture/openai/gpt-5-mini --api openai-chat "remember me" | cave-call --fixtures corpus > replay.ndjson
	jq -e -s 'map(select(.type=="call.response"))[0] | .provider == "fixture" and .model == "openai/gpt-5-mini" and .content[0].text == "recorded answer" and .usage.input == 11' replay.ndjson
	run -69 bash -c 'cave request -m fixture/openai/gpt-5-mini --api openai-chat "something else" | cave-call --fixtures corpus > miss.ndjson'
	jq -e -s 'map(select(.type=="call.error"))[0].code == "fixture_miss"' miss.ndjson
}

@test "cave dispatches verbs to cave-VERB and refuses unknown ones" {
	run cave request --help
	[ "$status" -eq 0 ]
	[[ $output == *"--max-output-tokens"* ]]
	run -2 --separate-stderr cave no-such-verb
	[[ $stderr == "cave: 'no-such-verb' is not a cave command; see 'cave --help'" ]]
}
