#!/usr/bin/env bats
# cave run: the ring (cave-budget, cave-call, cave-sandbox), the tool loop
# in every protocol, stops and breakers, the journal, receipts, abort,
# resume and conversations, against the scripted fake provider.
load test_helper

FIX="$BATS_TEST_DIRNAME/fixtures/cave-run"

setup() {
	setup_cave_env
	cp -r "$CAVE_ROOT/contrib/examples/support" agent
	# a live model (the fake provider), not the offline corpus
	sed -i 's#^model: fixture/#model: #' agent/agent.yaml
}

teardown() {
	fake_stop
}

journal() { cat .caveman/runs/*/events.ndjson; }
receipt() { cat .caveman/runs/*/receipt.json; }
run_id() { basename "$(ls -d .caveman/runs/*/ | head -1)"; }

@test "the offline example answers from the corpus with no key" {
	run -0 --separate-stderr cave-run "$CAVE_ROOT/contrib/examples/support" "Where is my order 1042?"
	assert_output --partial "Order 1042 has shipped with UPS"
	[[ $stderr == *"lookup_order 1 calls 0 errors"* ]]
	[[ $stderr == *"estimated list-price subtotal"* ]]
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -r .stopReason .caveman/runs/*/receipt.json
	assert_output complete
}

@test "a tool loop over the ring: tool result goes back to the model" {
	fake_start "$FIX/tool-loop.json"
	run -0 --separate-stderr cave-run agent "Where is my order 1042?"
	assert_output --partial "Order 1042 has shipped"
	[ "$(fake_requests)" -eq 2 ]
	# the second request carries the tool's output as a tool_result
	fake_request 2 | grep -q '"tool_use_id":"toolu_1"'
	fake_request 2 | grep -q 'shipped'
	run -0 jq -r '.calls | length' .caveman/runs/*/receipt.json
	assert_output 2
	validate_receipt .caveman/runs/*/receipt.json
	! grep -r "$FAKE_KEY_MARKER" .caveman
}

@test "the tool loop works in every protocol" {
	for api in anthropic-messages openai-chat openai-responses gemini; do
		case $api in
		anthropic-messages) model=anthropic/claude-haiku-4-5 ;;
		openai-*) model=openai/gpt-5-mini ;;
		gemini) model=google/gemini-2.5-flash ;;
		esac
		rm -rf .caveman
		sed -i "s#^model: .*#model: $model\napi: $api#; /^api: /{x;s/^/x/;/^xx/{x;d};x}" agent/agent.yaml
		grep -q "^api: $api" agent/agent.yaml
		fake_start "$FIX/tool-loop.json"
		run -0 --separate-stderr cave-run --quiet agent "Where is my order 1042?"
		assert_output --partial "Order 1042 has shipped"
		[ "$(fake_requests)" -eq 2 ] || { echo "$api: $(fake_requests) requests"; false; }
		fake_request 2 | grep -q 'shipped' || { echo "$api: no tool result"; false; }
		validate_receipt .caveman/runs/*/receipt.json
		fake_stop
		sed -i '/^api: /d' agent/agent.yaml
	done
}

@test "parallel tool calls both run and both results go back" {
	fake_start "$FIX/parallel.json"
	run -0 --separate-stderr cave-run --quiet agent "Orders 1041 and 1043?"
	assert_output --partial "1041 was delivered"
	run -0 jq -s '[.[] | select(.type == "tool.result")] | length' .caveman/runs/*/events.ndjson
	assert_output 2
	fake_request 2 | grep -q '"tool_use_id":"toolu_a"'
	fake_request 2 | grep -q '"tool_use_id":"toolu_b"'
	fake_request 2 | grep -q 'delivered'
	fake_request 2 | grep -q 'processing'
}

@test "the fan-out cap blocks extra calls and the receipt says so" {
	fake_start "$FIX/parallel.json"
	run -0 --separate-stderr cave-run --quiet --max-fan-out 1 agent "Orders 1041 and 1043?"
	run -0 jq -s '[.[] | select(.type == "tool.result")] | length' .caveman/runs/*/events.ndjson
	assert_output 1
	run -0 jq -r '.breakers[0].kind' .caveman/runs/*/receipt.json
	assert_output fan_out_blocked
	fake_request 2 | grep -q 'fan_out_blocked'
	validate_receipt .caveman/runs/*/receipt.json
}

@test "a repeated tool call trips loop_detected and stops between calls" {
	fake_start "$FIX/loop.json"
	run -0 --separate-stderr cave-run --quiet agent "Where is 1042?"
	run -0 jq -r '.stopReason, .breakers[0].kind' .caveman/runs/*/receipt.json
	assert_output $'loop_detected\nloop_detected'
	[ "$(fake_requests)" -eq 2 ]
	validate_receipt .caveman/runs/*/receipt.json
}

@test "a budget too small stops the run cleanly before the call leaves" {
	fake_start "$FIX/tool-loop.json"
	run -0 --separate-stderr cave-run --max-usd 0.000001 agent "Where is my order 1042?"
	[ "$(fake_requests)" -eq 0 ]
	run -0 jq -r .stopReason .caveman/runs/*/receipt.json
	assert_output budget_exhausted
	validate_receipt .caveman/runs/*/receipt.json
}

@test "a budget stop after the first call keeps its spend in the receipt" {
	fake_start "$FIX/tool-loop.json"
	run -0 --separate-stderr cave-run --max-calls 1 agent "Where is my order 1042?"
	[ "$(fake_requests)" -eq 1 ]
	run -0 jq -r '.stopReason, (.calls | length)' .caveman/runs/*/receipt.json
	assert_output $'call_budget_exhausted\n1'
	validate_receipt .caveman/runs/*/receipt.json
}

@test "the journal holds every event exactly once and re-folds to the receipt" {
	fake_start "$FIX/tool-loop.json"
	run -0 cave-run --quiet agent "Where is my order 1042?"
	# one line per (writer, seq): nothing journaled twice
	run -0 jq -s 'group_by([.src, .seq]) | map(length) | max' .caveman/runs/*/events.ndjson
	assert_output 1
	# every member's events are there, the head's too
	for t in run.start call.request call.delta call.response tool.request tool.result run.end; do
		jq -se --arg t "$t" 'any(.[]; .type == $t)' .caveman/runs/*/events.ndjson > /dev/null
	done
	run -0 jq -s '[.[] | select(.type == "call.request")] | length' .caveman/runs/*/events.ndjson
	assert_output 2
	# a call.request's history is spliced from the kept JSON of earlier
	# turns: byte for byte what jq writes, and the whole history in order
	grep '"type":"call.request","src":"cave-run"' .caveman/runs/*/events.ndjson > reqs
	jq -c . reqs | cmp - reqs
	run -0 jq -sc '[.[0].messages[0] == .[1].messages[0], (.[1].messages | length),
		(.[1].messages | map(.role))]' reqs
	assert_output '[true,3,["user","assistant","user"]]'
	# the call's intent precedes its deltas
	run -0 jq -rs 'map(.type) | index("call.request") < index("call.delta")' .caveman/runs/*/events.ndjson
	assert_output true
	cave-receipt .caveman/runs/*/events.ndjson | jq -S 'del(.totalEstimatedUsd)' > refold.json
	jq -S 'del(.totalEstimatedUsd)' .caveman/runs/*/receipt.json > written.json
	cmp refold.json written.json
}

@test "--events makes stdout pure NDJSON, the same events as the journal" {
	fake_start "$FIX/tool-loop.json"
	run -0 --separate-stderr cave-run --quiet --events agent "Where is my order 1042?"
	printf '%s\n' "$output" > out.ndjson
	jq -e . out.ndjson > /dev/null
	[ "$(wc -l < out.ndjson)" -eq "$(journal | wc -l)" ]
	run -0 jq -s '[.[] | select(.type == "tool.result")] | length' out.ndjson
	assert_output 1
}

@test "--filter inserts a program into the ring; its own lines are journaled and dropped" {
	fake_start "$FIX/tool-loop.json"
	run -0 --separate-stderr cave-run --quiet \
		--filter 'jq -c --unbuffered .' \
		--filter 'sed -u '\''/"type":"run.start"/a {"type":"note","src":"user-filter","v":1}'\''' \
		agent "Where is my order 1042?"
	assert_output --partial "Order 1042 has shipped"
	run -0 jq -s '[.[] | select(.src == "user-filter")] | length' .caveman/runs/*/events.ndjson
	assert_output 1
}

@test "agent errors name the file and the field" {
	sed -i 's/^    effect: read$//' agent/agent.yaml
	run -78 --separate-stderr cave-run agent "hi"
	[[ $stderr == *"agent/agent.yaml: tools[0]: missing 'effect'"* ]]
	cp -r "$CAVE_ROOT/contrib/examples/support" b
	sed -i 's/name: lookup_order/name: cave_lookup/' b/agent.yaml
	run -78 --separate-stderr cave-run b "hi"
	[[ $stderr == *"reserved"* ]]
	printf 'id: x\nmodel: [unclosed\n' > b/agent.yaml
	run -78 --separate-stderr cave-run b "hi"
	[[ $stderr =~ agent.yaml:[0-9]+:[0-9]+ ]]
}

@test "Ctrl-C during a stream leaves the journal and a partial receipt" {
	fake_start "$FIX/slow.json"
	cave-run --max-usd 0.05 agent "Tell me a long story" > out.txt 2> err.txt &
	pid=$!
	for i in $(seq 1 100); do grep -q '"call.delta"' .caveman/runs/*/events.ndjson 2>/dev/null && break; sleep 0.05; done
	kill -INT "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 130 ]
	journal | jq -se 'any(.[]; .type == "run.end" and .signal == 2)' > /dev/null
	journal | jq -se 'any(.[]; .type == "call.error" and .code == "aborted")' > /dev/null
	# the aborted call went on round to cave-budget, which settled it: a
	# stream that had begun may have been billed, so spent is not 0
	journal | jq -se 'any(.[]; .type == "budget.settle" and .id == "c1")' > /dev/null
	run -0 jq -e '.spent > 0' .caveman/runs/*/receipt.json
	validate_receipt .caveman/runs/*/receipt.json
	# the stream was cut well before its end
	! grep -q fourteen out.txt
}

@test "SIGKILL mid-call and resume: spend is kept, the unknown call is said" {
	fake_start "$FIX/hang.json"
	cave-run --quiet --max-usd 0.05 agent "Where is my order 1042?" > out.txt 2> err.txt &
	pid=$!
	for i in $(seq 1 200); do
		[ "$(journal 2>/dev/null | jq -s '[.[] | select(.type == "call.request")] | length')" = 2 ] && break
		sleep 0.05
	done
	sleep 0.3
	kill -KILL -- "$pid"
	pkill -KILL -P "$pid" 2>/dev/null || true
	id=$(run_id)
	sleep 0.2
	run -0 --separate-stderr cave-run --resume "$id"
	assert_output --partial "Order 1042 has shipped"
	[[ $stderr == *"unknown outcome"* ]]
	run -0 jq -r '.attempts, .unknown_calls, .possible_double_count' .caveman/runs/$id/resume.json
	assert_output $'2\n1\ntrue'
	# the first call's spend is still in the receipt, with the new one
	run -0 jq -r '.calls | length' .caveman/runs/$id/receipt.json
	assert_output 2
	run -0 jq -s '[.[] | select(.type == "run.start")] | length' .caveman/runs/$id/events.ndjson
	assert_output 1
	# the ledger is the whole run's: its max, and spent is both calls plus
	# the unknown call's worst case, booked once and flagged
	run -0 jq -s '[.[] | select(.type == "budget.settle" and .basis == "unknown_worst_case"
		and .restored)] | length' .caveman/runs/$id/events.ndjson
	assert_output 1
	w=$(jq -s '[.[] | select(.basis == "unknown_worst_case")][0].amount' .caveman/runs/$id/events.ndjson)
	run -0 jq -r --argjson w "$w" '[.max, (.spent * 1e12 | round) ==
		((.totalEstimatedUsd + $w) * 1e12 | round)] | @tsv' .caveman/runs/$id/receipt.json
	assert_output $'0.05\ttrue'
	validate_receipt .caveman/runs/$id/receipt.json
	# every writer of the resumed ring went on past the journal's seqs
	run -0 jq -s 'group_by([.src, .seq]) | map(length) | max' .caveman/runs/$id/events.ndjson
	assert_output 1
}

@test "a conversation keeps history, and a second concurrent use fails closed" {
	fake_start "$FIX/chat.json"
	run -0 cave-run --quiet --conversation case-42 agent "Hi, about order 1042"
	run -0 cave-run --quiet --conversation case-42 agent "What did I ask about?"
	assert_output --partial "You asked about order 1042"
	fake_request 2 | grep -q 'Hi, about order 1042'
	run -0 jq 'length' .caveman/conversations/case-42/history.json
	assert_output 4
	flock .caveman/conversations/case-42/lock sleep 3 &
	lockpid=$!
	sleep 0.3
	run -77 --separate-stderr cave-run --quiet --conversation case-42 agent "again"
	[[ $stderr == *"in use"* ]]
	wait "$lockpid"
}

@test "a failed turn rolls the conversation back" {
	fake_start "$FIX/chat.json"
	run -0 cave-run --quiet --conversation c1 agent "Hi"
	fake_stop
	export ANTHROPIC_BASE_URL=http://127.0.0.1:9
	run --separate-stderr cave-run --quiet --conversation c1 agent "this fails"
	[ "$status" -ne 0 ]
	run -0 jq 'length' .caveman/conversations/c1/history.json
	assert_output 2
}

@test "a reader that closes stdout mid-stream: exit 141, the journal and a partial receipt" {
	fake_start "$FIX/slow.json"
	# head takes one byte of the streaming answer and goes away
	bash -c 'cave-run --max-usd 0.05 agent "Tell me a long story" 2> err.txt | head -c 1 > out.txt
		echo "${PIPESTATUS[0]}" > rc.txt'
	[ "$(cat rc.txt)" -eq 141 ]
	[ "$(wc -c < out.txt)" -eq 1 ]
	journal | jq -se 'any(.[]; .type == "call.request")' > /dev/null
	journal | jq -se 'any(.[]; .type == "call.error" and .code == "aborted")' > /dev/null
	journal | jq -se 'any(.[]; .type == "run.end" and .signal == 13)' > /dev/null
	# the stream was cut well before its end
	! journal | grep -q fourteen
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -r '.denomination, .max' .caveman/runs/*/receipt.json
	assert_output $'usd\n0.05'
	journal | jq -se 'any(.[]; .type == "budget.settle")' > /dev/null
	run -0 jq -e '.spent > 0' .caveman/runs/*/receipt.json
	[[ $(cat err.txt) == *"estimated list-price subtotal"* ]]
}
