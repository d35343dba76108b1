#!/usr/bin/env bats
# The fake provider itself, driven with curl: each protocol streaming and
# not, each provider's usage convention, and the failure knobs the client
# tests rely on (status codes, split writes, cut streams, CRLF, error events).

load test_helper

setup() {
	setup_cave_env
}

teardown() {
	fake_stop
}

# script JSON: writes the script and starts the fake on it
serve() {
	printf '%s\n' "$1" > script.json
	fake_start script.json
}

# post PATH JSON [curl args...]: a request with the right key header for PATH
post() {
	local path=$1 body=$2
	shift 2
	local auth
	case $path in
	/v1/messages*) auth="x-api-key: $ANTHROPIC_API_KEY" ;;
	/v1beta/*) auth="x-goog-api-key: $GEMINI_API_KEY" ;;
	*) auth="Authorization: Bearer $OPENAI_API_KEY" ;;
	esac
	curl -sS -H "$auth" -H 'content-type: application/json' -d "$body" "$@" "$FAKE_URL$path"
}

# data lines of an SSE stream (stdin) as JSON, one per line
sse_data() {
	tr -d '\r' | sed -n 's/^data: //p'
}

USAGE='{"input":10,"cache_read":90,"cache_write":5,"cache_write_1h":2,"output":20,"reasoning":7}'

@test "starts on a free loopback port, exports the environment, stops on SIGTERM" {
	serve '{"responses":[]}'
	[[ $FAKE_PORT =~ ^[0-9]+$ ]]
	[ "$FAKE_URL" = "http://127.0.0.1:$FAKE_PORT" ]
	[ "$ANTHROPIC_BASE_URL" = "$FAKE_URL" ]
	[ "$OPENAI_BASE_URL" = "$FAKE_URL/v1" ]
	[ "$GOOGLE_GEMINI_BASE_URL" = "$FAKE_URL" ]
	[[ $ANTHROPIC_API_KEY == sk-ant-test-*cave-test-secret* ]]
	[[ $OPENAI_API_KEY == *cave-test-secret* ]]
	[[ $GEMINI_API_KEY == *cave-test-secret* ]]
	local pid=$FAKE_PID
	kill -0 "$pid"
	fake_stop
	run kill -0 "$pid"
	assert_failure
	run curl -sS --max-time 2 "$FAKE_URL/v1/messages"
	assert_failure 7 # connection refused
}

@test "a test that forgets fake_stop leaves no server behind" {
	printf '{"responses":[]}\n' > script.json
	# fake_start inside a child shell that exits without fake_stop
	bash -c 'source "$CAVE_ROOT/tests/fake-provider/fake.bash"; fake_start script.json; echo "$FAKE_PID" > pid'
	local pid
	pid=$(cat pid)
	for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
	run kill -0 "$pid"
	assert_failure
}

@test "Anthropic stream: event names, order and message_start cache usage" {
	serve '{"responses":[{"text":"Hello there","reasoning_text":"hmm","usage":'"$USAGE"'}]}'
	run post /v1/messages '{"model":"claude-x","max_tokens":9,"stream":true,"messages":[]}' -D headers
	assert_success
	grep -qi '^content-type: text/event-stream' headers
	grep -qi '^transfer-encoding: chunked' headers
	run bash -c "grep '^event: ' <<< \"\$0\" | cut -d' ' -f2 | tr '\n' ' '" "$output"
	assert_output "message_start content_block_start ping content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop "
	run post /v1/messages '{}' # second request: the script is exhausted
	assert_output --partial "fake provider: script exhausted"
}

@test "Anthropic usage: input excludes cache, cache_creation by TTL, message_delta cumulative" {
	serve '{"responses":[{"text":"Hi","usage":'"$USAGE"'}]}'
	post /v1/messages '{"model":"m","stream":true}' | sse_data > data
	run jq -c 'select(.type=="message_start").message.usage' data
	assert_output '{"input_tokens":10,"cache_creation_input_tokens":7,"cache_read_input_tokens":90,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":2},"output_tokens":1,"service_tier":"standard"}'
	run jq -c 'select(.type=="message_delta") | [.delta.stop_reason, .usage.output_tokens, .usage.input_tokens, .usage.output_tokens_details.thinking_tokens]' data
	assert_output '["end_turn",20,10,7]'
	run jq -r 'select(.type=="content_block_delta").delta.text' data
	assert_output $'Hi'
}

@test "Anthropic stream: tool_use block streams its input as input_json_delta fragments" {
	serve '{"responses":[{"tool_calls":[{"id":"toolu_1","name":"lookup","input":{"order":1042,"why":"status"}}]}]}'
	post /v1/messages '{"model":"m","stream":true}' | sse_data > data
	run jq -c 'select(.type=="content_block_start").content_block' data
	assert_output '{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}'
	[ "$(jq -r 'select(.delta.type=="input_json_delta") | .delta.partial_json' data | wc -l)" -gt 2 ]
	run bash -c "jq -j 'select(.delta.type==\"input_json_delta\") | .delta.partial_json' data | jq -c ."
	assert_output '{"order":1042,"why":"status"}'
	run jq -r 'select(.type=="message_delta").delta.stop_reason' data
	assert_output tool_use
}

@test "Anthropic non-streaming: a Message with thinking, text and tool_use blocks" {
	serve '{"responses":[{"text":"Looking.","reasoning_text":"think","tool_calls":[{"id":"toolu_9","name":"lookup","input":{"a":1}}],"usage":'"$USAGE"'}]}'
	run post /v1/messages '{"model":"claude-x","max_tokens":9}' -D headers
	assert_success
	grep -qi '^content-length: ' headers
	run jq -c '[.type,.role,.model,.stop_reason,[.content[].type],.content[2].input,.usage.input_tokens,.usage.cache_read_input_tokens,.usage.output_tokens]' <<< "$output"
	assert_output '["message","assistant","claude-x","tool_use",["thinking","text","tool_use"],{"a":1},10,90,20]'
	grep -qi '^request-id: req_' headers
}

@test "OpenAI chat stream: chunks, [DONE], and the include_usage chunk (prompt_tokens INCLUDES cached)" {
	serve '{"responses":[{"text":"Hello there","usage":'"$USAGE"'},{"text":"x"}]}'
	post /v1/chat/completions '{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true}}' > out
	[ "$(grep -c '^data: ' out)" -gt 3 ]
	[ "$(grep '^data: ' out | tail -n 1)" = "data: [DONE]" ]
	! grep -q '^event:' out
	sse_data < out | grep -v '^\[DONE\]$' > data
	run jq -r '.object' data
	refute_output --partial "chat.completion.chunk"$'\n'"x" # every line is a chunk
	[ "$(jq -r '.object' data | sort -u)" = chat.completion.chunk ]
	run jq -c 'select(.choices==[]).usage | [.prompt_tokens, .prompt_tokens_details.cached_tokens, .completion_tokens, .completion_tokens_details.reasoning_tokens, .total_tokens]' data
	assert_output '[107,90,20,7,127]'
	run jq -r 'select(.choices[0].finish_reason != null) | .choices[0].finish_reason' data
	assert_output stop
	run jq -j '.choices[0].delta.content // empty' data
	assert_output "Hello there"
	# Without include_usage there is no usage chunk at all.
	post /v1/chat/completions '{"model":"gpt-x","stream":true}' | sse_data | grep -v DONE > data2
	run jq -c 'select(.usage != null)' data2
	assert_output ""
	[ "$(jq -c 'select(.choices==[])' data2 | wc -l)" -eq 0 ]
}

@test "OpenAI chat stream: tool calls as index/id/name then argument fragments" {
	serve '{"responses":[{"tool_calls":[{"id":"call_1","name":"lookup","input":{"order":1042}},{"id":"call_2","name":"w","input":{"c":"Oslo"}}]}]}'
	post /v1/chat/completions '{"model":"m","stream":true}' | sse_data | grep -v DONE > data
	run jq -c '.choices[0].delta.tool_calls[]? | select(.id) | [.index,.id,.type,.function.name,.function.arguments]' data
	assert_output $'[0,"call_1","function","lookup",""]\n[1,"call_2","function","w",""]'
	run bash -c "jq -j '.choices[0].delta.tool_calls[]? | select(.index==1) | .function.arguments // empty' data | jq -c ."
	assert_output '{"c":"Oslo"}'
	run jq -r '.choices[0].finish_reason // empty' data
	assert_output tool_calls
}

@test "OpenAI chat non-streaming: message, tool_calls, finish_reason length, usage" {
	serve '{"responses":[{"tool_calls":[{"id":"call_1","name":"lookup","input":{"order":7}}],"usage":'"$USAGE"'},{"text":"cut","stop":"max_tokens"}]}'
	run post /v1/chat/completions '{"model":"gpt-x"}'
	run jq -c '[.object,.choices[0].message.content,.choices[0].message.tool_calls[0].function.arguments,.choices[0].finish_reason,.usage.prompt_tokens,.usage.prompt_tokens_details.cached_tokens,.usage.prompt_tokens_details.cache_write_tokens]' <<< "$output"
	assert_output '["chat.completion",null,"{\"order\":7}","tool_calls",107,90,7]'
	run post /v1/chat/completions '{"model":"gpt-x"}'
	run jq -c '[.choices[0].message.content,.choices[0].finish_reason]' <<< "$output"
	assert_output '["cut","length"]'
}

@test "OpenAI Responses stream: event sequence and completed usage (input_tokens INCLUDES cached)" {
	serve '{"responses":[{"text":"Hi you","tool_calls":[{"id":"call_r","name":"f","input":{"k":1}}],"usage":'"$USAGE"'}]}'
	post /v1/responses '{"model":"gpt-x","stream":true}' > out
	run bash -c "grep '^event: ' out | cut -d' ' -f2 | tr '\n' ' '"
	assert_output "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed "
	sse_data < out > data
	run jq -c 'select(.type=="response.completed").response.usage' data
	assert_output '{"input_tokens":107,"input_tokens_details":{"cached_tokens":90,"cache_write_tokens":7},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":127}'
	run jq -r '.sequence_number' data
	assert_output "$(seq 0 13)"
	run jq -c 'select(.type=="response.function_call_arguments.done") | [.name,.arguments]' data
	assert_output '["f","{\"k\":1}"]'
	# every data line's type matches its event: line
	[ "$(grep '^event: ' out | cut -d' ' -f2)" = "$(jq -r .type data)" ]
}

@test "OpenAI Responses non-streaming: Response object, incomplete on max_tokens" {
	serve '{"responses":[{"reasoning_text":"r","text":"Hi","usage":'"$USAGE"'},{"text":"cut","stop":"max_tokens"}]}'
	run post /v1/responses '{"model":"gpt-x"}'
	run jq -c '[.object,.status,[.output[].type],.output[1].content[0].text,.output[0].summary[0].text,.usage.input_tokens]' <<< "$output"
	assert_output '["response","completed",["reasoning","message"],"Hi","r",107]'
	run post /v1/responses '{"model":"gpt-x"}'
	run jq -c '[.status,.incomplete_details.reason]' <<< "$output"
	assert_output '["incomplete","max_output_tokens"]'
}

@test "Gemini stream: CRLF SSE, promptTokenCount INCLUDES cached, thoughts NOT in candidates" {
	serve '{"responses":[{"text":"Hello there","reasoning_text":"hm","tool_calls":[{"name":"lookup","input":{"o":1}}],"usage":'"$USAGE"'}]}'
	post '/v1beta/models/gemini-x:streamGenerateContent?alt=sse' '{"contents":[]}' -D headers > out
	grep -qi '^content-type: text/event-stream' headers
	# every line ends in CRLF, events are separated by a blank CRLF line
	[ "$(grep -c $'\r$' out)" -eq "$(wc -l < out)" ]
	sse_data < out > data
	[ "$(wc -l < data)" -eq 4 ]
	run jq -c 'select(.candidates[0].finishReason) | .usageMetadata | [.promptTokenCount,.cachedContentTokenCount,.candidatesTokenCount,.thoughtsTokenCount,.totalTokenCount]' data
	assert_output '[100,90,13,7,120]'
	run jq -c '.candidates[0].content.parts[]' data
	assert_output $'{"text":"hm","thought":true}\n{"text":"Hello "}\n{"text":"there"}\n{"functionCall":{"name":"lookup","args":{"o":1}}}'
	run jq -r '.modelVersion' data
	assert_line --index 0 gemini-x
	# every chunk carries a running total: the last one is the call's usage
	run jq -r '.usageMetadata.candidatesTokenCount' data
	assert_output $'3\n6\n9\n13'
}

@test "Gemini generateContent, and streamGenerateContent without alt=sse is a JSON array" {
	serve '{"responses":[{"text":"Hi","usage":{"input":5,"output":3}},{"text":"a b c","stop":"max_tokens"}]}'
	run post /v1beta/models/gemini-x:generateContent '{}'
	run jq -c '[.candidates[0].content.role,.candidates[0].content.parts[0].text,.candidates[0].finishReason,.usageMetadata.promptTokenCount,.usageMetadata.candidatesTokenCount,.usageMetadata.thoughtsTokenCount]' <<< "$output"
	assert_output '["model","Hi","STOP",5,3,null]'
	run post /v1beta/models/gemini-x:streamGenerateContent '{}'
	run jq -c '[length, .[-1].candidates[0].finishReason, ([.[].candidates[0].content.parts[0].text]|join(""))]' <<< "$output"
	assert_output '[3,"MAX_TOKENS","a b c"]'
}

@test "429 with retry-after and the provider's own error body; 529 overloaded; custom body" {
	serve '{"responses":[{"status":429,"headers":{"retry-after":"1"}},{"status":529},{"status":500,"body":"upstream <html> oops"},{"status":429},{"status":503}]}'
	run post /v1/messages '{}' -D headers -o body -w '%{http_code}'
	assert_output 429
	grep -qi '^retry-after: 1' headers
	run jq -c '[.type,.error.type]' body
	assert_output '["error","rate_limit_error"]'
	run post /v1/messages '{}' -o body -w '%{http_code}'
	assert_output 529
	run jq -r .error.type body
	assert_output overloaded_error
	run post /v1/chat/completions '{}' -o body -w '%{http_code}'
	assert_output 500
	[ "$(cat body)" = "upstream <html> oops" ]
	run post /v1/chat/completions '{}'
	run jq -r .error.code <<< "$output"
	assert_output rate_limit_exceeded
	run post /v1beta/models/g:generateContent '{}'
	run jq -c '[.error.code,.error.status]' <<< "$output"
	assert_output '[503,"UNAVAILABLE"]'
}

@test "script exhausted: HTTP 500 naming it" {
	serve '{"responses":[{"text":"only one"}]}'
	post /v1/chat/completions '{}' > /dev/null
	run post /v1/chat/completions '{}' -w '\n%{http_code}'
	assert_line --index 1 500
	assert_output --partial "fake provider: script exhausted"
	[ "$(fake_request 2 | jq .step)" = null ]
}

@test "split: the body arrives in N-byte writes, splitting CRLF, and is byte-identical" {
	serve '{"responses":[{"text":"Hello split world","crlf":true},{"text":"Hello split world","crlf":true,"split":3}]}'
	post /v1/messages '{"stream":true}' > whole
	/usr/bin/python3 - "$FAKE_PORT" "$ANTHROPIC_API_KEY" > report <<-'EOF'
		import socket, sys
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
		body = b'{"stream":true}'
		s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + sys.argv[2].encode() +
		          b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
		reads = []
		while True:
		    b = s.recv(65536)
		    if not b:
		        break
		    reads.append(b)
		raw = b"".join(reads)
		head, _, rest = raw.partition(b"\r\n\r\n")
		out = b""
		while True:  # undo the chunked framing
		    size, _, rest = rest.partition(b"\r\n")
		    n = int(size, 16)
		    if n == 0:
		        break
		    out += rest[:n]
		    assert n <= 3, n
		    rest = rest[n + 2:]
		sys.stdout.buffer.write(b"reads %d\n" % len(reads))
		open("split", "wb").write(out)
	EOF
	# the same answer apart from the message id, which names the step
	cmp <(sed 's/msg_fake000[01]/msg_fake/' whole) <(sed 's/msg_fake000[01]/msg_fake/' split)
	[ "$(awk '/^reads/{print $2}' report)" -gt 20 ]
	grep -q $'\r$' split
}

@test "cut_after_events: the connection drops after N events, before usage and terminal events" {
	serve '{"responses":[{"text":"a b c d","cut_after_events":3},{"text":"a b c d","cut_after_events":2,"cut_mode":"clean"},{"text":"x y z","cut_after_events":2}]}'
	run post /v1/messages '{"stream":true}'
	assert_failure 18 # curl: transfer closed with outstanding read data
	[ "$(grep -c '^event: ' <<< "$output")" -eq 3 ]
	refute_output --partial message_delta
	refute_output --partial message_stop
	run post /v1/chat/completions '{"stream":true,"stream_options":{"include_usage":true}}'
	assert_success # clean end of the body, but no usage and no [DONE]
	[ "$(grep -c '^data: ' <<< "$output")" -eq 2 ]
	refute_output --partial '"usage":{'
	refute_output --partial '[DONE]'
	run post '/v1beta/models/g:streamGenerateContent?alt=sse' '{}'
	assert_failure 18
	[ "$(grep -c '^data: ' <<< "$output")" -eq 2 ]
	refute_output --partial finishReason
}

@test "cut_after_events \"usage\": cut just before the event with the final usage" {
	serve '{"responses":[{"text":"a b","cut_after_events":"usage"},{"text":"a b","cut_after_events":"usage","usage":{"input":1,"output":2}},{"text":"a b","cut_after_events":"usage"}]}'
	run post /v1/messages '{"stream":true}'
	assert_failure 18
	assert_output --partial content_block_stop
	refute_output --partial message_delta
	run post /v1/chat/completions '{"stream":true,"stream_options":{"include_usage":true}}'
	assert_failure 18
	assert_output --partial '"finish_reason":"stop"'
	refute_output --partial '"usage":{'
	run post /v1/responses '{"stream":true}'
	assert_failure 18
	assert_output --partial response.output_item.done
	refute_output --partial response.completed
}

@test "crlf: SSE lines end in CRLF on request, LF by default for Anthropic and OpenAI" {
	serve '{"responses":[{"text":"Hi","crlf":true},{"text":"Hi"},{"text":"Hi","crlf":false}]}'
	post /v1/messages '{"stream":true}' > crlf
	post /v1/responses '{"stream":true}' > lf
	post '/v1beta/models/g:streamGenerateContent?alt=sse' '{}' > gem
	[ "$(grep -c $'\r$' crlf)" -eq "$(wc -l < crlf)" ]
	[ "$(grep -c $'\r$' lf)" -eq 0 ]
	[ "$(grep -c $'\r$' gem)" -eq 0 ]
	grep -q $'^event: message_start\r$' crlf
}

@test "error_event_after: each protocol's own mid-stream error" {
	serve '{"responses":[{"text":"a b","error_event_after":2},{"text":"a b","error_event_after":2},{"text":"a b","error_event_after":3},{"text":"a b","error_event_after":1}]}'
	run post /v1/messages '{"stream":true}'
	assert_success
	[ "$(grep '^event: ' <<< "$output" | tail -n 1)" = "event: error" ]
	run jq -c 'select(.type=="error") | [.error.type]' < <(sse_data <<< "$output")
	assert_output '["overloaded_error"]'
	refute_output --partial message_stop
	run post /v1/chat/completions '{"stream":true}'
	[ "$(sse_data <<< "$output" | tail -n 1 | jq -r .error.type)" = server_error ]
	refute_output --partial '[DONE]'
	run post /v1/responses '{"stream":true}'
	run bash -c "grep '^event: ' <<< \"\$0\" | cut -d' ' -f2 | tr '\n' ' '" "$output"
	assert_output "response.created response.in_progress response.output_item.added error response.failed "
	run post '/v1beta/models/g:streamGenerateContent?alt=sse' '{}'
	[ "$(sse_data <<< "$output" | wc -l)" -eq 2 ]
	[ "$(sse_data <<< "$output" | tail -n 1 | jq -c '[.error.code,.error.status]')" = '[503,"UNAVAILABLE"]' ]
}

@test "omit_usage: streams end normally with no usage anywhere" {
	serve '{"responses":[{"text":"a","omit_usage":true},{"text":"a","omit_usage":true},{"text":"a","omit_usage":true},{"text":"a","omit_usage":true}]}'
	run post /v1/messages '{"stream":true}'
	assert_output --partial message_stop
	refute_output --partial usage
	run post /v1/chat/completions '{"stream":true,"stream_options":{"include_usage":true}}'
	assert_output --partial '[DONE]'
	refute_output --partial '"usage":{'
	run post /v1/responses '{"stream":true}'
	assert_output --partial response.completed
	refute_output --partial '"usage":{'
	run post '/v1beta/models/g:streamGenerateContent?alt=sse' '{}'
	assert_output --partial finishReason
	refute_output --partial usageMetadata
}

@test "malformed_after: one data line that is not JSON" {
	serve '{"responses":[{"text":"a b","malformed_after":2}]}'
	post /v1/chat/completions '{"stream":true}' | sse_data | grep -v DONE > data
	run jq -c . data
	assert_failure
	[ "$(sed -n 3p data | cut -c1-10)" = '{"id":"cha' ]
	run jq -c . <(sed -n 1,2p data)
	assert_success
}

@test "raw: exact bytes with their content type; headers on a success" {
	serve '{"responses":[{"raw":"data: {\"not\":\"a real chunk\"}\n\n","content_type":"text/event-stream","headers":{"x-extra":"yes"}}]}'
	run post /v1/chat/completions '{"stream":true}' -D headers
	assert_output 'data: {"not":"a real chunk"}'
	grep -qi '^content-type: text/event-stream' headers
	grep -qi '^x-extra: yes' headers
}

@test "first_byte_delay_ms and chunk_delay_ms slow the answer down" {
	serve '{"responses":[{"text":"a","first_byte_delay_ms":400},{"text":"a b c d","chunk_delay_ms":100}]}'
	run post /v1/messages '{}' -o /dev/null -w '%{time_starttransfer}'
	[ "$(awk -v t="$output" 'BEGIN{print (t >= 0.4)}')" = 1 ]
	run post /v1/messages '{"stream":true}' -o /dev/null -w '%{time_total}'
	[ "$(awk -v t="$output" 'BEGIN{print (t >= 0.8)}')" = 1 ]
}

@test "the log: one line per request as it arrives, even when the client gives up" {
	serve '{"responses":[{"text":"slow","first_byte_delay_ms":3000},{"text":"ok"}]}'
	[ "$(fake_requests)" -eq 0 ]
	run post '/v1/messages?beta=true' '{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}' -H 'Anthropic-Version: 2023-06-01' --max-time 0.5
	assert_failure 28 # curl timed out
	[ "$(fake_requests)" -eq 1 ]
	run jq -c '[.n,.method,.path,.query,.headers["anthropic-version"],.headers["x-api-key"],.body.messages[0].content,.step]' < <(fake_request 1)
	assert_output '[1,"POST","/v1/messages","beta=true","2023-06-01","'"$ANTHROPIC_API_KEY"'","hi",0]'
	post /v1/messages 'not json' > /dev/null
	[ "$(fake_requests)" -eq 2 ]
	[ "$(fake_request 2 | jq -c '[.n,.body,.step]')" = '[2,"not json",1]' ]
}

@test "no key: 401 in the provider's shape, and the step is not consumed; unknown path: 404" {
	serve '{"responses":[{"text":"for the keyed request"}]}'
	run curl -sS -d '{}' -w '\n%{http_code}' "$FAKE_URL/v1/messages"
	assert_line --index 1 401
	assert_output --partial authentication_error
	run curl -sS -d '{}' -w '\n%{http_code}' "$FAKE_URL/v1/nothing"
	assert_line --index 1 404
	run post /v1/messages '{}'
	run jq -r '.content[0].text' <<< "$output"
	assert_output "for the keyed request"
	[ "$(fake_requests)" -eq 3 ]
}

@test "keep-alive: two requests on one connection, steps in order across protocols" {
	serve '{"responses":[{"text":"one"},{"text":"two"}]}'
	run curl -sS -H "Authorization: Bearer $OPENAI_API_KEY" -d '{}' "$FAKE_URL/v1/chat/completions" \
		--next -H "Authorization: Bearer $OPENAI_API_KEY" -d '{}' "$FAKE_URL/v1/responses" -v
	assert_output --partial 'Re-using existing connection'
	assert_output --partial '"content":"one"'
	assert_output --partial '"text":"two"'
	[ "$(fake_request 2 | jq -c '[.path,.step]')" = '["/v1/responses",1]' ]
}

@test "cut_mode reset sends an RST; framing length and close; verbatim tool arguments" {
	serve '{"require_auth":false,"responses":[{"text":"a b","cut_after_events":2,"cut_mode":"reset"},{"text":"a b","framing":"length"},{"text":"a b","framing":"close"},{"text":"a b c","framing":"length","cut_after_events":2},{"tool_calls":[{"id":"c1","name":"f","arguments":"{\"broken"}]}]}'
	run curl -sS -d '{"stream":true}' "$FAKE_URL/v1/messages"
	assert_failure 56 # connection reset by peer
	run curl -sS -D headers -o body -d '{"stream":true}' "$FAKE_URL/v1/chat/completions"
	assert_success
	grep -q '^data: \[DONE\]$' body
	[ "$(grep -i '^content-length:' headers | tr -dc 0-9)" -eq "$(wc -c < body)" ]
	run curl -sS -D headers -d '{"stream":true}' "$FAKE_URL/v1/chat/completions"
	assert_success
	assert_output --partial '[DONE]'
	grep -qi '^connection: close' headers
	! grep -qi '^content-length:\|^transfer-encoding:' headers
	run curl -sS -d '{"stream":true}' "$FAKE_URL/v1/chat/completions"
	assert_failure 18 # the body is shorter than its Content-Length
	run curl -sS -d '{}' "$FAKE_URL/v1/chat/completions"
	run jq -r '.choices[0].message.tool_calls[0].function.arguments' <<< "$output"
	assert_output '{"broken'
}

@test "Responses stream with reasoning: a reasoning item with summary events first" {
	serve '{"responses":[{"reasoning_text":"think hard","text":"Hi","error_event_after":"usage","error_style":"failed"}]}'
	post /v1/responses '{"model":"gpt-x","stream":true}' | sse_data > data
	run jq -r .type data
	assert_line --index 2 response.output_item.added
	assert_line --index 3 response.reasoning_summary_part.added
	assert_line --index 4 response.reasoning_summary_text.delta
	assert_line response.reasoning_summary_text.done
	refute_line response.completed
	refute_line error
	run jq -c 'select(.type=="response.failed").response | [.status,.model,.error.code]' data
	assert_output '["failed","gpt-x","server_error"]'
	run jq -j 'select(.type=="response.reasoning_summary_text.delta").delta' data
	assert_output "think hard"
}
