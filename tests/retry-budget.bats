#!/usr/bin/env bats
# The retry budget: cave-budget decides whether a failed call is retried
# (it knows the money), records each retry as a breaker, and cancels the
# retry it cannot fund; cave-call obeys the cancel. Through the ring as
# `cave run` wires it (head -> cave-budget -> cave-call -> head) against the
# fake provider, with hand-written events where exact amounts matter.
# Test catalog rates: input $1, dearest input $2, output $10 per million
# tokens, so a call.request of 1000 output tokens holds a worst case of
# 96 x $2 + 1000 x $10 per million = $0.010192.

load test_helper
bats_require_minimum_version 1.5.0

BFIX=${BATS_TEST_DIRNAME}/fixtures/cave-budget
FIX=${BATS_TEST_DIRNAME}/fixtures/retry-budget
RUN=1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b
SPAN=aaaaaaaaaaaaaaaa
W=0.010192

setup() {
	setup_cave_env
	export CAVE_CATALOG=$BFIX/catalog.yaml
}

teardown() {
	fake_stop
}

script() {
	printf '%s\n' "$1" > "$BATS_TEST_TMPDIR/script.json"
	fake_start "$BATS_TEST_TMPDIR/script.json"
}

start() {
	printf '{"type":"run.start","src":"cave-run","v":1,"run":"%s","span":"%s","seq":0,"agent":"budget-test"}\n' "$RUN" "$SPAN"
}

creq() { # creq ID MAX_OUTPUT
	printf '{"type":"call.request","src":"cave-run","v":1,"run":"%s","span":"%s","seq":1,"id":"%s","provider":"anthropic","model":"budget-test","api":"anthropic-messages","messages":[{"role":"user","content":"hi"}],"max_output_tokens":%s,"stream":true}\n' \
		"$RUN" "$SPAN" "$1" "$2"
}

# cerr ID ATTEMPT STATUS CODE [USAGE]: a failed attempt another follows
cerr() {
	printf '{"type":"call.error","src":"cave-call","v":1,"run":"%s","span":"%s","seq":2,"id":"%s","provider":"anthropic","model":"budget-test","code":"%s","retryable":true,"status":%s,"attempt":%s,"final":false,"retry_after_ms":100,"message":"m"%s}\n' \
		"$RUN" "$SPAN" "$1" "$4" "$3" "$2" "${5:+,\"usage\":$5,\"usage_basis\":\"provider_reported\"}"
}

usage_io() { # usage_io INPUT OUTPUT
	printf '{"input":%s,"cache_read":0,"cache_write":0,"cache_write_1h":0,"output":%s,"reasoning":null}' "$1" "$2"
}

sel() { # sel TYPE [FILE]: the events of one type, as a JSON array
	jq -c -s --arg t "$1" 'map(select(.type == $t))' "${2:-out.ndjson}"
}

# what the receipt says of each breaker, compactly
breakers() {
	jq -c '[.breakers[] | [.kind, .count, .reservedSpend, .measuredSpend, .spendBasis]]' receipt.json
}

# ring PLAN ARGS...: head -> cave-budget ARGS -> cave-call -> head; the
# journal is journal.ndjson, the receipt receipt.json
ring() {
	local plan=$1
	shift
	rm -f back
	mkfifo back
	# a call that fails ends cave-call non-zero: ring_status says
	{
		/usr/bin/python3 "$BFIX/ring-head.py" "$plan" journal.ndjson < back |
			cave-budget "$@" 2> budget.err | cave-call 2> call.err > back
		echo "${PIPESTATUS[*]}" > ring.status
	} || true
	read -r -a ring_status < ring.status
	cave-receipt < journal.ndjson > receipt.json 2> receipt.err
}

# every line of the file against schemas/event.schema.json, but the test
# head's (ring-head.py stands in for cave run and writes no full envelope)
validate_events() {
	/usr/bin/python3 - "$CAVE_ROOT/schemas/event.schema.json" "$1" <<-'PY'
	import json, sys, jsonschema
	v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
	bad = 0
	for n, line in enumerate(open(sys.argv[2]), 1):
	    ev = json.loads(line)
	    if ev.get("src") == "cave-run":
	        continue
	    for e in v.iter_errors(ev):
	        print(f"{sys.argv[2]}:{n}: {e.message}"); bad += 1
	sys.exit(1 if bad else 0)
	PY
}

# ---- command line ----

@test "the retry budget is in the budget's denomination, and a budget comes with it" {
	run -2 --separate-stderr cave-budget --max-retry-usd 0.1 < /dev/null
	[[ $stderr == *"--max-retry-usd needs --max-usd or --max-cost-usd"* ]]
	run -2 --separate-stderr cave-budget --max-usd 1 --max-retry-tokens 100 < /dev/null
	[[ $stderr == *"--max-retry-tokens needs --max-tokens"* ]]
	run -2 --separate-stderr cave-budget --max-usd 1 --max-retry-usd -1 < /dev/null
	[[ $stderr == *"--max-retry-usd: expected a non-negative amount"* ]]
	run -0 cave-budget --max-tokens 1000 --max-retry-tokens 10 < /dev/null
	run -0 cave-budget --max-cost-usd 1 --max-retry-usd 0.5 < /dev/null
	run -0 cave-budget --help
	[[ $output == *"--max-retry-usd X | --max-retry-tokens N"* ]]
	run -2 --separate-stderr cave-run --max-retry-usd 0.1 agent hi
	[[ $stderr == *"--max-retry-usd needs --max-usd"* ]]
	run -0 cave-run --help
	[[ $output == *"--max-retry-tokens N"* ]]
}

# ---- through the ring and the fake provider ----

@test "retries within the budget: a retry_attempted breaker each, pre_stream_no_usage; receipt valid" {
	script '{"responses":[{"status":429,"headers":{"retry-after":"0.2"}},{"status":500,"headers":{"retry-after":"0.2"}},{"text":"ok","usage":{"input":20,"output":3}}]}'
	{ start; creq c1 1000; } > plan.ndjson
	ring plan.ndjson --max-usd 0.05 --max-retry-usd 0.05
	[ "${ring_status[*]}" = "0 0 0" ]
	[ "$(fake_requests)" = 3 ]
	validate_receipt receipt.json
	[ "$(breakers)" = '[["retry_attempted",1,'$W',0,"pre_stream_no_usage"],["retry_attempted",2,'$W',0,"pre_stream_no_usage"]]' ]
	jq -e '.stopReason == "complete" and .spent == 0.00005 and (.capBreached | not)' receipt.json
	# failures refused before any response cost nothing: no settle for them
	sel budget.settle journal.ndjson | jq -e 'map([.amount, .basis]) == [[0.00005, "provider_reported"]]'
	validate_events journal.ndjson
}

@test "a retry budget of 0: one attempt, retry_exhausted, the call ends retry_budget_exhausted, the run stops" {
	script '{"responses":[{"status":429,"headers":{"retry-after":"0.3"}},{"text":"never"},{"text":"never"}]}'
	{ start; creq c1 1000; creq c2 1000; } > plan.ndjson
	ring plan.ndjson --max-usd 0.05 --max-retry-usd 0
	[ "$(fake_requests)" = 1 ]
	# cave-budget stops (exit 0); cave-call's call failed: 69
	[ "${ring_status[1]}" = 0 ] && [ "${ring_status[2]}" = 69 ]
	validate_receipt receipt.json
	[ "$(breakers)" = '[["retry_exhausted",0,'$W',0,"pre_stream_no_usage"]]' ]
	jq -e '.stopReason == "budget_exhausted" and .spent == 0' receipt.json
	# the order: the breaker, the stop, the cancel; then the call's end
	[ "$(jq -c -s 'map(select(.src == "cave-budget" and (.type | test("breaker|run.stop|retry.cancel"))) | .type)' journal.ndjson)" = '["breaker","run.stop","retry.cancel"]' ]
	sel call.error journal.ndjson | jq -e 'last | .final and .code == "retry_budget_exhausted" and .attempt == 1 and (.message | test("retry budget 0 usd"))'
	sel breaker journal.ndjson | jq -e '.[0] | .call_id == "c1" and .retry_spent == 0 and .retry_budget == 0'
	# the second call never left
	[ "$(sel call.request journal.ndjson | jq length)" = 1 ]
	validate_events journal.ndjson
}

@test "a billed failed attempt counts: a budget of two worst cases allows exactly two attempts" {
	# each attempt's stream begins (HTTP 200) and fails before any text and
	# without usage: it may have been billed, up to the hold
	script '{"responses":[{"text":"x","error_event_after":3},{"text":"x","error_event_after":3},{"text":"x","error_event_after":3},{"text":"ok"}]}'
	{ start; creq c1 1000; } > plan.ndjson
	ring plan.ndjson --max-usd 0.05 --max-retry-usd 0.020384
	[ "$(fake_requests)" = 2 ]
	[ "${ring_status[2]}" = 69 ]
	validate_receipt receipt.json
	[ "$(breakers)" = '[["retry_attempted",1,'$W','$W',"unavailable_worst_case"],["retry_exhausted",1,'$W','$W',"unavailable_worst_case"]]' ]
	sel breaker journal.ndjson | jq -e '.[1] | .retry_spent == 0.020384 and .attempt == 2'
	# booked at the worst case, beside the hold, never as a breach
	[ "$(sel budget.settle journal.ndjson | jq -c 'map([.amount, .basis, .final, has("over_reported")])')" = '[['$W',"unavailable_worst_case",false,false],['$W',"unavailable_worst_case",false,false]]' ]
	jq -e '.spent == 0.020384 and (.capBreached | not) and .stopReason == "budget_exhausted"' receipt.json
}

@test "failures refused before any response do not use the retry budget up" {
	# the same budget as one worst case: free failures leave it whole
	script '{"responses":[{"status":529,"headers":{"retry-after":"0.1"}},{"status":429,"headers":{"retry-after":"0.1"}},{"text":"ok","usage":{"input":20,"output":3}}]}'
	{ start; creq c1 1000; } > plan.ndjson
	ring plan.ndjson --max-usd 0.05 --max-retry-usd $W
	[ "$(fake_requests)" = 3 ]
	[ "${ring_status[*]}" = "0 0 0" ]
	[ "$(jq -c '[.breakers[].kind]' receipt.json)" = '["retry_attempted","retry_attempted"]' ]
	validate_receipt receipt.json
}

# ---- the ledger's decisions, on hand-written events ----

@test "a failed attempt's provider-reported spend is measured exactly and counted" {
	# 90 input + 1 output token = $0.0001 an attempt; budget: W + $0.00015
	{ start; creq c1 1000; cerr c1 1 200 overloaded "$(usage_io 90 1)"; cerr c1 2 200 overloaded "$(usage_io 90 1)"; } |
		cave-budget --max-usd 0.05 --max-retry-usd 0.010342 > out.ndjson
	[ "$(sel breaker | jq -c 'map([.kind, .count, .attempt, .measured_spend, .spend_basis])')" = '[["retry_attempted",1,1,0.0001,"provider_reported"],["retry_exhausted",1,2,0.0001,"provider_reported"]]' ]
	sel breaker | jq -e '.[1] | .retry_spent == 0.0002 and .retry_budget == 0.010342 and .reserved_spend == '$W
	[ "$(sel budget.settle | jq -c 'map([.amount, .final, has("over_reported")])')" = '[[0.0001,false,false],[0.0001,false,false]]' ]
	# the spend is booked and the hold is whole again for the retry
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.spent, .reserved, .cap_breached]' out.ndjson)" = '[0.0002,'$W',false]' ]
	[ "$(sel run.stop | jq -c 'map(.reason)')" = '["budget_exhausted"]' ]
	[ "$(sel retry.cancel | jq -c 'map([.id, .code])')" = '[["c1","retry_budget_exhausted"]]' ]
	validate_events out.ndjson
	# in tokens: 91 an attempt, a hold of 96 + 1000; a budget of 1096 + 100
	{ start; creq c1 1000; cerr c1 1 200 overloaded "$(usage_io 90 1)"; cerr c1 2 200 overloaded "$(usage_io 90 1)"; } |
		cave-budget --max-tokens 100000 --max-retry-tokens 1196 > out.ndjson
	[ "$(sel breaker | jq -c 'map([.kind, .reserved_spend, .measured_spend, .spend_basis])')" = '[["retry_attempted",1096,91,"provider_reported"],["retry_exhausted",1096,91,"provider_reported"]]' ]
	sel breaker | jq -e '.[1] | .retry_spent == 182 and .retry_budget == 1196'
}

@test "a failed attempt the wallet can no longer cover gives its retry up, with no retry budget" {
	# $0.015: the first failure ($0.0001) leaves room for the hold; the
	# second, of unknown cost, is booked at the hold and leaves too little
	{ start; creq c1 1000; cerr c1 1 200 overloaded "$(usage_io 90 1)"; cerr c1 2 null truncated_stream; } |
		cave-budget --max-usd 0.015 > out.ndjson
	[ "$(sel breaker | jq -c 'map([.kind, .measured_spend, .spend_basis])')" = '[["retry_attempted",0.0001,"provider_reported"],["retry_exhausted",'$W',"unavailable_worst_case"]]' ]
	sel retry.cancel | jq -e '.[0].message | test("no longer covers another attempt")'
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.spent, .cap_breached]' out.ndjson)" = '[0.010292,false]' ]
}

@test "without a budget each retry is still recorded, its amounts 0" {
	{ start; creq c1 1000; cerr c1 1 429 http_429; cerr c1 2 200 overloaded; } | cave-budget > out.ndjson
	[ "$(sel breaker | jq -c 'map([.kind, .count, .reserved_spend, .measured_spend, .spend_basis])')" = '[["retry_attempted",1,0,0,"pre_stream_no_usage"],["retry_attempted",2,0,0,"unavailable_worst_case"]]' ]
	[ "$(sel retry.cancel)" = '[]' ]
}

# ---- cave-call obeys ----

@test "cave-call: a cancel between attempts ends the call at once, no further request" {
	script '{"responses":[{"status":429,"headers":{"retry-after":"5"}},{"text":"never"}]}'
	SECONDS=0
	run -69 --separate-stderr bash -c 'cave request -m anthropic/claude-haiku-4-5 hi | "$0" 1 cave-call > out.ndjson' "$FIX/cancel-driver.py"
	[ "$SECONDS" -lt 4 ] # not the five seconds the provider asked for
	[ "$(fake_requests)" = 1 ]
	[ "$(sel call.error | jq -c 'map([.attempt, .final, .code, .status])')" = '[[1,false,"http_429",429],[1,true,"retry_budget_exhausted",null]]' ]
	sel call.error | jq -e 'last | has("cause") | not'
}

@test "cave-call: an attempt under way when the cancel comes finishes and is the last" {
	script '{"responses":[{"status":500},{"status":503,"first_byte_delay_ms":400},{"text":"never"}]}'
	run -69 --separate-stderr bash -c 'cave request -m anthropic/claude-haiku-4-5 hi | "$0" 2 cave-call --retry-base-ms 0 > out.ndjson' "$FIX/cancel-driver.py"
	[ "$(fake_requests)" = 2 ]
	sel call.error | jq -e 'last | .final and .code == "retry_budget_exhausted" and .cause == "http_503" and .status == 503 and .attempt == 2'
}

# ---- cave run ----

@test "cave run --max-retry-usd 0: one request, exit 69, the receipt says retry_exhausted" {
	script '{"responses":[{"status":429,"headers":{"retry-after":"0.3"}},{"text":"never"}]}'
	cp -r "$CAVE_ROOT/contrib/examples/support" agent
	sed -i 's#^model: fixture/#model: #' agent/agent.yaml
	unset CAVE_CATALOG
	run -69 --separate-stderr cave-run --max-usd 0.5 --max-retry-usd 0 agent "hi"
	[ "$(fake_requests)" = 1 ]
	[[ $stderr == *"retry_budget_exhausted"* ]]
	validate_receipt .caveman/runs/*/receipt.json
	jq -e '.stopReason == "budget_exhausted" and ([.breakers[].kind] == ["retry_exhausted"])' .caveman/runs/*/receipt.json
	! grep -r "$FAKE_KEY_MARKER" .caveman
}

@test "cave run: retries within the budget are in the receipt, and the run completes" {
	script '{"responses":[{"status":503,"headers":{"retry-after":"0.1"}},{"text":"fine","usage":{"input":20,"output":3}}]}'
	cp -r "$CAVE_ROOT/contrib/examples/support" agent
	sed -i 's#^model: fixture/#model: #' agent/agent.yaml
	unset CAVE_CATALOG
	run -0 --separate-stderr cave-run --quiet --max-usd 0.5 --max-retry-usd 0.1 agent "hi"
	[ "$output" = fine ]
	[ "$(fake_requests)" = 2 ]
	validate_receipt .caveman/runs/*/receipt.json
	jq -e '.stopReason == "complete" and (.breakers | length == 1) and .breakers[0].kind == "retry_attempted" and .breakers[0].spendBasis == "pre_stream_no_usage" and .breakers[0].reservedSpend > 0' .caveman/runs/*/receipt.json
}
