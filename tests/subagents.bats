#!/usr/bin/env bats
# cave run: subagents (nested runs with carved wallets, depth and tree
# limits, nested receipts, sandbox propagation) and the no_progress
# breaker, against the scripted fake provider.
load test_helper

FIX="$BATS_TEST_DIRNAME/fixtures/subagents"

# agent DIR ID [extra yaml]: a tool-less agent on the fake provider
agent() {
	mkdir -p "$1"
	{
		echo "id: $2"
		echo "model: anthropic/claude-haiku-4-5"
		echo "system: You help."
		echo "max_output_tokens: 256"
		[ -z "${3:-}" ] || printf '%s\n' "$3"
	} > "$1/agent.yaml"
}

# sub NAME TARGET CAP: one subagents: entry
sub() {
	printf '  - name: %s\n    description: Delegate a task.\n    agent: %s\n    %s\n' "$1" "$2" "$3"
}

setup() {
	setup_cave_env
	agent lead/researcher researcher
	agent lead lead "subagents:
$(sub ask_researcher researcher 'max_cost_usd: 0.01')"
}

teardown() {
	fake_stop
}

receipt() { cat .caveman/runs/*/receipt.json; }
journal() { cat .caveman/runs/*/events.ndjson; }

@test "a subagent runs nested with a carved wallet; the receipt nests its receipt" {
	fake_start "$FIX/delegate.json"
	run -0 --separate-stderr cave-run --max-usd 0.05 lead "Where is 1042?"
	assert_output --partial "Order 1042 ships with UPS."
	[ "$(fake_requests)" -eq 3 ]
	# the child got the task as its prompt; the parent got the child's answer
	fake_request 2 | jq -e '.body.messages[0].content | tostring | contains("Find the carrier")'
	fake_request 3 | grep -q '"tool_use_id":"toolu_p1"'
	fake_request 3 | grep -q 'The carrier of order 1042 is UPS.'
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -r '.subagents | length, .[0].agentId, .[0].max, .[0].denomination, (.[0].calls | length), .[0].stopReason' .caveman/runs/*/receipt.json
	assert_output $'1\nresearcher\n0.01\nusd\n1\ncomplete'
	# the parent's own calls are 2; its total includes the child's spend
	run -0 jq -e '(.calls | length) == 2 and .totalEstimatedUsd > (.subagents[0].totalEstimatedUsd)' .caveman/runs/*/receipt.json
	# the wallet came from cave-budget, under the child's own span
	run -0 jq -rs '[.[] | select(.type == "budget.carve" and .src == "cave-budget")][0].amount' .caveman/runs/*/events.ndjson
	assert_output 0.01
	run -0 jq -rs '(map(select(.type == "run.start")) | map(.span) | unique | length),
		([.[] | select(.type == "call.request")] | map(.span) | unique | length)' .caveman/runs/*/events.ndjson
	assert_output $'2\n2'
	# the parent's spent counts its child (budget.state rolls up)
	run -0 jq -e '.spent >= .totalEstimatedUsd - 0.000000001' .caveman/runs/*/receipt.json
	! grep -r "$FAKE_KEY_MARKER" .caveman
}

@test "a subagent's wallet stops the subagent, not its parent, even without a run budget" {
	agent lead lead "subagents:
$(sub ask_researcher researcher 'max_cost_usd: 0.000001')"
	fake_start "$FIX/delegate.json"
	run -0 --separate-stderr cave-run lead "Where is 1042?"
	# the child's call never left: the parent's second call is step 2
	[ "$(fake_requests)" -eq 2 ]
	fake_request 2 | grep -q 'subagent stopped: budget_exhausted'
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -r '.stopReason, .denomination, .subagents[0].stopReason, .subagents[0].denomination, (.subagents[0].calls | length)' .caveman/runs/*/receipt.json
	assert_output $'complete\nnone\nbudget_exhausted\nusd\n0'
}

@test "a subagent whose cap is in the wrong denomination is refused before it starts" {
	agent lead lead "subagents:
$(sub ask_researcher researcher 'max_tokens: 1000')"
	fake_start "$FIX/delegate.json"
	run -0 --separate-stderr cave-run --max-usd 0.05 lead "Where is 1042?"
	[ "$(fake_requests)" -eq 2 ]
	fake_request 2 | grep -q 'declares no cap in USD'
	run -0 jq -r '.subagents | length' .caveman/runs/*/receipt.json
	assert_output 0
}

@test "a token budget carves token wallets" {
	agent lead lead "subagents:
$(sub ask_researcher researcher 'max_tokens: 5000')"
	fake_start "$FIX/delegate.json"
	run -0 --separate-stderr cave-run --max-tokens 100000 lead "Where is 1042?"
	[ "$(fake_requests)" -eq 3 ]
	run -0 jq -r '.denomination, .subagents[0].denomination, .subagents[0].max, .subagents[0].spent' .caveman/runs/*/receipt.json
	assert_output $'tokens\ntokens\n5000\n102'
	validate_receipt .caveman/runs/*/receipt.json
}

@test "subagents nest to the depth limit; the receipt nests them the same way" {
	agent lead/researcher/clerk clerk
	agent lead/researcher researcher "subagents:
$(sub ask_clerk clerk 'max_cost_usd: 0.005')"
	fake_start "$FIX/nested.json"
	run -0 --separate-stderr cave-run --max-usd 0.05 lead "Where is 1042?"
	assert_output --partial "Order 1042 ships with UPS."
	[ "$(fake_requests)" -eq 5 ]
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -r '.subagents[0].agentId, .subagents[0].subagents[0].agentId, .subagents[0].subagents[0].max, (.subagents[0].subagents[0].calls | length)' .caveman/runs/*/receipt.json
	assert_output $'researcher\nclerk\n0.005\n1'
	# the same journal at depth 1: the researcher may not start the clerk
	fake_stop
	rm -rf .caveman
	fake_start "$FIX/nested.json"
	run -0 --separate-stderr cave-run --max-usd 0.05 --max-subagent-depth 1 lead "Where is 1042?"
	fake_request 3 | grep -q 'the depth limit (1) is reached'
	run -0 jq -r '.subagents[0].subagents | length' .caveman/runs/*/receipt.json
	assert_output 0
	run -2 cave-run --max-subagent-depth 9 lead "x"
	assert_output --partial "expected a number from 0 to 8"
}

@test "two subagents run side by side; tree limits refuse the extra without a slot" {
	fake_start "$FIX/twice-both.json"
	run -0 --separate-stderr cave-run --max-usd 0.05 lead "go"
	[ "$(fake_requests)" -eq 4 ]
	run -0 jq -r '.subagents | length' .caveman/runs/*/receipt.json
	assert_output 2
	validate_receipt .caveman/runs/*/receipt.json
	for limit in "--max-subagent-invocations 1" "--max-concurrent-subagents 1"; do
		fake_stop
		rm -rf .caveman
		fake_start "$FIX/twice.json"
		run -0 --separate-stderr cave-run --max-usd 0.05 $limit lead "go"
		[ "$(fake_requests)" -eq 3 ]
		fake_request 3 | grep -q 'subagent refused'
		fake_request 3 | grep -q 'answer from a subagent'
		run -0 jq -r '.subagents | length' .caveman/runs/*/receipt.json
		assert_output 1
	done
}

@test "a host-mode subagent under a required-mode agent fails closed" {
	agent lead/researcher researcher "sandbox: host"
	fake_start "$FIX/delegate.json"
	run -0 --separate-stderr cave-run --max-usd 0.05 lead "Where is 1042?"
	[ "$(fake_requests)" -eq 2 ]
	fake_request 2 | grep -q 'cave_host_sandbox_nested_under_required'
}

@test "a subagent's tools carry the sandbox ancestry of the agents above" {
	cp -r "$CAVE_ROOT/contrib/examples/support/tools" "$CAVE_ROOT/contrib/examples/support/data" lead/researcher/
	cat >> lead/researcher/agent.yaml <<-'EOF'
	tools:
	  - name: lookup_order
	    description: Look up an order.
	    effect: read
	    command: tools/lookup-order
	    input_schema: {type: object}
	EOF
	cat > script.json <<-'EOF'
	{"responses": [
	  {"tool_calls": [{"id": "toolu_p1", "name": "ask_researcher", "input": {"task": "1042?"}}], "usage": {"input": 10, "output": 4}},
	  {"tool_calls": [{"id": "toolu_c1", "name": "lookup_order", "input": {"order_id": "1042"}}], "usage": {"input": 10, "output": 4}},
	  {"text": "shipped", "usage": {"input": 10, "output": 4}},
	  {"text": "It shipped.", "usage": {"input": 10, "output": 4}}
	]}
	EOF
	fake_start script.json
	run -0 --separate-stderr cave-run --max-usd 0.05 lead "Where is 1042?"
	run -0 jq -c 'select(.type == "tool.request") | .sandbox_ancestry' .caveman/runs/*/events.ndjson
	assert_output '["required"]'
	fake_request 3 | grep -q 'shipped'
	run -0 jq -r '.subagents[0].tools[0].name' .caveman/runs/*/receipt.json
	assert_output lookup_order
}

@test "Ctrl-C while a subagent streams ends the tree with a partial receipt" {
	cat > script.json <<-'EOF'
	{"responses": [
	  {"tool_calls": [{"id": "toolu_p1", "name": "ask_researcher", "input": {"task": "slow"}}], "usage": {"input": 10, "output": 4}},
	  {"text": "a slow answer that takes its time", "chunk_delay_ms": 400, "usage": {"input": 10, "output": 4}}
	]}
	EOF
	grep -q chunk_delay_ms "$CAVE_ROOT/tests/fake-provider/README.md" || skip "the fake provider has no chunk delay"
	fake_start script.json
	cave-run --max-usd 0.05 lead "go" > out 2> err &
	pid=$!
	for _ in $(seq 100); do [ "$(fake_requests)" -ge 2 ] && break; sleep 0.05; done
	sleep 0.2
	kill -INT "$pid"
	status=0; wait "$pid" || status=$?
	[ "$status" -eq 130 ]
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -rs '[.[] | select(.type == "run.end")] | length' .caveman/runs/*/events.ndjson
	assert_output 2
	run -0 jq -r '.subagents | length' .caveman/runs/*/receipt.json
	assert_output 1
}

# the no_progress breaker: tools with a fixed answer
poller() {
	mkdir -p lead/tools
	printf '#!/bin/sh\ncat > /dev/null\necho pending\n' > lead/tools/status
	printf '#!/bin/sh\ncat > /dev/null\necho saved > saved.txt\necho saved\n' > lead/tools/save
	chmod +x lead/tools/status lead/tools/save
	agent lead lead "tools:
  - name: status
    description: The job's status.
    effect: read
    command: tools/status
    allow_repeat: ${1:-false}
    input_schema: {type: object}
  - name: save
    description: Save a note.
    effect: write
    command: tools/save
    input_schema: {type: object}"
}

@test "no_progress: three turns with the same outcome stop the run between calls" {
	poller false
	fake_start "$FIX/status-poll.json"
	run -0 --separate-stderr cave-run lead "wait for the job"
	[ "$(fake_requests)" -eq 3 ]
	validate_receipt .caveman/runs/*/receipt.json
	run -0 jq -r '.stopReason, .breakers[0].kind' .caveman/runs/*/receipt.json
	assert_output $'no_progress\nno_progress'
	# a longer window lets the run go on to its answer
	fake_stop
	rm -rf .caveman
	fake_start "$FIX/status-poll.json"
	run -0 --separate-stderr cave-run --no-progress-window 4 lead "wait for the job"
	assert_output --partial "never reached"
	[ "$(fake_requests)" -eq 4 ]
}

@test "no_progress: allow_repeat lets a poller repeat; a successful write resets the window" {
	poller true
	fake_start "$FIX/write-resets.json"
	run -0 --separate-stderr cave-run lead "poll and save"
	assert_output --partial "All saved."
	[ "$(fake_requests)" -eq 6 ]
	run -0 jq -r '.stopReason, (.breakers | length)' .caveman/runs/*/receipt.json
	assert_output $'complete\n0'
	# without allow_repeat the same repeated call is a loop
	poller false
	fake_stop
	rm -rf .caveman
	fake_start "$FIX/write-resets.json"
	run -0 --separate-stderr cave-run lead "poll and save"
	run -0 jq -r '.stopReason' .caveman/runs/*/receipt.json
	assert_output loop_detected
}

@test "SIGKILL while a subagent's call hangs, then resume: the subagent is not run again" {
	cat > script.json <<-'EOF2'
	{"responses": [
	  {"tool_calls": [{"id": "toolu_p1", "name": "ask_researcher", "input": {"task": "slow"}}], "usage": {"input": 100, "output": 10}},
	  {"text": "never seen", "first_byte_delay_ms": 30000, "usage": {"input": 50, "output": 5}},
	  {"text": "I could not get an answer from the researcher.", "usage": {"input": 150, "output": 12}}
	]}
	EOF2
	fake_start script.json
	setsid cave-run --quiet --max-usd 0.05 lead "go" > out 2> err &
	pid=$!
	for _ in $(seq 200); do [ "$(fake_requests)" -ge 2 ] && break; sleep 0.05; done
	[ "$(fake_requests)" -eq 2 ]
	sleep 0.2
	kill -KILL -- "-$pid"
	wait "$pid" || true
	id=$(basename "$(ls -d .caveman/runs/*/)")
	run -0 --separate-stderr cave-run --resume "$id"
	assert_output --partial "I could not get an answer"
	# the parent's next call was told; the child's call was not made again
	[ "$(fake_requests)" -eq 3 ]
	fake_request 3 | grep -q 'interrupted: this subagent was running at a crash'
	validate_receipt .caveman/runs/$id/receipt.json
	# the child's hung call is booked at its worst case in its own wallet,
	# and the root's spent covers it
	run -0 jq -e '.subagents | length == 1' .caveman/runs/$id/receipt.json
	run -0 jq -e '.spent > .totalEstimatedUsd' .caveman/runs/$id/receipt.json
	run -0 jq -r '.possible_double_count' .caveman/runs/$id/resume.json
	assert_output true
}
