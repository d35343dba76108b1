#!/usr/bin/env bats
# cave-budget: reserve, clamp, stop, settle, tranches, wallets and ceilings.
# Hand-written event streams for the ledger's own decisions; the fake
# provider (a real HTTP server on loopback) behind cave-call where what a
# provider sees or reports matters. Prices come from a small test catalog
# with round rates (input $1, dearest input $2, output $10 per million
# tokens), so every amount below can be checked by hand.

load test_helper
bats_require_minimum_version 1.5.0

FIX=${BATS_TEST_DIRNAME}/fixtures/cave-budget
RUN=1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b
SPAN=aaaaaaaaaaaaaaaa

setup() {
	setup_cave_env
	export CAVE_CATALOG=$FIX/catalog.yaml
}

teardown() {
	fake_stop
}

script() { # a fake-provider script from its argument
	printf '%s\n' "$1" > "$BATS_TEST_TMPDIR/script.json"
	fake_start "$BATS_TEST_TMPDIR/script.json"
}

start() {
	printf '{"type":"run.start","src":"cave-run","v":1,"run":"%s","span":"%s","seq":0,"agent":"budget-test"}\n' "$RUN" "${1:-$SPAN}"
}

# creq ID MAX_OUTPUT [MODEL] [SPAN]: a call.request whose input ceiling is
# 64 + 32 = 96 tokens (worst input $0.000192 at the test rates)
creq() {
	printf '{"type":"call.request","src":"cave-run","v":1,"run":"%s","span":"%s","seq":1,"id":"%s","provider":"anthropic","model":"%s","api":"anthropic-messages","messages":[{"role":"user","content":"hi"}],"max_output_tokens":%s,"stream":true}\n' \
		"$RUN" "${4:-$SPAN}" "$1" "${3:-budget-test}" "$2"
}

# cresp ID USAGE [SPAN]: the call.response a lap brings back
cresp() {
	printf '{"type":"call.response","src":"cave-call","v":1,"run":"%s","span":"%s","seq":2,"id":"%s","provider":"anthropic","model":"budget-test","api":"anthropic-messages","content":[],"stop_reason":"end_turn","usage":%s,"usage_basis":"%s"}\n' \
		"$RUN" "${3:-$SPAN}" "$1" "$2" "$([ "$2" = null ] && echo unavailable || echo provider_reported)"
}

usage_io() { # usage_io INPUT OUTPUT
	printf '{"input":%s,"cache_read":0,"cache_write":0,"cache_write_1h":0,"output":%s,"reasoning":null}' "$1" "$2"
}

sel() { # sel TYPE [FILE]: the events of one type, as a JSON array
	jq -c -s --arg t "$1" 'map(select(.type == $t))' "${2:-out.ndjson}"
}

# ring PLAN ARGS...: runs the plan through head -> cave-budget ARGS ->
# cave-call -> head, as `cave run` wires it; the journal is journal.ndjson
ring() {
	local plan=$1
	shift
	rm -f back
	mkfifo back
	/usr/bin/python3 "$FIX/ring-head.py" "$plan" journal.ndjson < back |
		cave-budget "$@" 2> budget.err | cave-call > back
	ring_status=("${PIPESTATUS[@]}")
	cave-receipt < journal.ndjson > receipt.json 2> receipt.err
}

# ---- command line ----

@test "exactly one denomination, and --max-cost-usd alone" {
	run -2 cave-budget --max-usd 1 --max-tokens 10 < /dev/null
	[[ $output == *"exactly one"* ]]
	run -2 cave-budget --max-cost-usd 1 --max-usd 1 < /dev/null
	[[ $output == *"--max-cost-usd cannot be combined"* ]]
	run -2 cave-budget --initial-usd 1 < /dev/null
	run -2 cave-budget --max-tokens 10 --initial-usd 1 < /dev/null
	run -2 cave-budget --max-usd 1 --initial-usd 2 < /dev/null
	run -2 cave-budget --max-usd 0.1.2 < /dev/null
	run -2 cave-budget --max-usd 0.0000000000001 < /dev/null
	run -2 cave-budget --max-tokens 1.5 < /dev/null
	run -2 cave-budget --output-floor -1 < /dev/null
	run -0 cave-budget --help
	[[ $output == usage:* ]]
}

@test "lines it does not own pass through byte for byte; its own lap is dropped" {
	{
		echo '{"type":"call.delta","src":"cave-call","v":1,"id":"c1","text":"a  b"}'
		echo '{"type":"budget.state","src":"cave-budget","v":1,"spent":0}'
		echo 'not json at all'
		echo '{"type":"route","src":"cave-route",  "v":1}'
	} > in.ndjson
	cave-budget --max-usd 1 < in.ndjson > out.ndjson
	run diff <(sed -n '1p;3p;4p' in.ndjson) out.ndjson
	[ "$status" -eq 0 ]
}

@test "a malformed call.request is bad input that names its place" {
	{ start; echo '{"type":"call.request","src":"cave-run",'; } > in.ndjson
	run -65 --separate-stderr cave-budget --max-usd 1 < in.ndjson
	[[ $stderr == *"<stdin>:2"* ]]
}

# ---- reserve and clamp ----

@test "reserve: input ceiling x dearest input rate + allowance x output rate, exactly" {
	{ start; creq c1 1000; } | cave-budget --max-usd 0.02 > out.ndjson
	[ "$(sel budget.reserve | jq -c '.[0] | [.id, .amount, .max_output_tokens, .input_ceiling, has("clamped_output_tokens")]')" = '["c1",0.010192,1000,96,false]' ]
	# the request goes on untouched, after its reservation
	[ "$(jq -s -r 'map(.type) | join(",")' out.ndjson)" = "run.start,budget.state,budget.reserve,budget.state,call.request" ]
	[ "$(sel call.request | jq '.[0].max_output_tokens')" = 1000 ]
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.denomination, .max, .reserved, .spent, .cap_breached]' out.ndjson)" = '["usd",0.02,0.010192,0,false]' ]
	# every event of ours carries the run and span it belongs to
	[ "$(jq -s -c '[.[] | select(.src=="cave-budget") | .run == "'$RUN'" and .span == "'$SPAN'"] | all' out.ndjson)" = true ]
}

@test "clamp: max_output_tokens lowered to what the remainder affords" {
	# 0.01 - 0.000192 affords 980 output tokens at $10 per million
	{ start; creq c1 1000; } | cave-budget --max-usd 0.01 > out.ndjson
	[ "$(sel budget.reserve | jq -c '.[0] | [.amount, .clamped_output_tokens]')" = '[0.009992,980]' ]
	[ "$(sel call.request | jq '.[0].max_output_tokens')" = 980 ]
	[ "$(sel call.request | jq -r '.[0].src')" = cave-run ]
	[ "$(sel run.stop)" = '[]' ]
}

@test "tokens: the same clamp in tokens, integers throughout" {
	{ start; creq c1 1000; } | cave-budget --max-tokens 500 > out.ndjson
	[ "$(sel budget.reserve | jq -c '.[0] | [.amount, .clamped_output_tokens]')" = '[500,404]' ]
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.denomination, .max, .reserved]' out.ndjson)" = '["tokens",500,500]' ]
}

@test "stop: below the floor the call is not passed on; run.stop, exit 0" {
	# 0.0025 affords 230 tokens, below the default floor of 256
	{ start; creq c1 1000; } | cave-budget --max-usd 0.0025 > out.ndjson
	[ "$(sel call.request)" = '[]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = budget_exhausted ]
	[[ $(sel run.stop | jq -r '.[0].message') == *"affords 230 output tokens, below the floor of 256"* ]]
	# a lower floor lets the same call through, clamped
	{ start; creq c1 1000; } | cave-budget --max-usd 0.0025 --output-floor 200 > out.ndjson
	[ "$(sel call.request | jq '.[0].max_output_tokens')" = 230 ]
}

@test "a request that asks for less than the floor and fits is sent as it is" {
	{ start; creq c1 100; } | cave-budget --max-usd 0.0025 > out.ndjson
	[ "$(sel call.request | jq '.[0].max_output_tokens')" = 100 ]
}

@test "holds add up: in a straight pipe unsettled calls stay reserved" {
	# each worst case is 0.010192: two fit in 0.021, the third is clamped
	# to the 0.000616 left, which affords 42 tokens: stop
	{ start; creq c1 1000; creq c2 1000; creq c3 1000; } | cave-budget --max-usd 0.021 > out.ndjson
	[ "$(sel call.request | jq -c 'map(.id)')" = '["c1","c2"]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = budget_exhausted ]
}

@test "a USD budget refuses a model the catalog cannot price, never as \$0" {
	{ start; creq c1 100 budget-unpriced; creq c2 100 no-such-model; } > in.ndjson
	run -77 --separate-stderr cave-budget --max-usd 1 < in.ndjson
	[ "$(jq -s -c '[.[] | select(.type=="call.error") | [.id, .code, .final]]' <<<"$output")" = '[["c1","cave_budget_denomination_unavailable",true],["c2","cave_budget_denomination_unavailable",true]]' ]
	[ "$(jq -s '[.[] | select(.type=="call.request")] | length' <<<"$output")" = 0 ]
	[[ $stderr == *"cave_budget_denomination_unavailable"* ]]
	# a token budget can bound it
	{ start; creq c1 100 budget-unpriced; } | cave-budget --max-tokens 1000 > out.ndjson
	[ "$(sel call.request | jq length)" = 1 ]
}

@test "--max-cost-usd: exhaustion is an error (cave_run_cost_budget_exceeded), not a stop" {
	{ start; creq c1 1000; } > in.ndjson
	run -77 --separate-stderr cave-budget --max-cost-usd 0.001 < in.ndjson
	[ "$(jq -s -c '[.[] | select(.type=="call.error") | .code]' <<<"$output")" = '["cave_run_cost_budget_exceeded"]' ]
	[ "$(jq -s '[.[] | select(.type=="run.stop" or .type=="call.request")] | length' <<<"$output")" = 0 ]
	run -0 cave-budget --max-cost-usd 1 < in.ndjson
}

# ---- settle ----

@test "settle: the measured amount is booked and the hold released" {
	{ start; creq c1 1000; cresp c1 "$(usage_io 50 500)"; creq c2 1000; } |
		cave-budget --max-usd 0.02 > out.ndjson
	[ "$(sel budget.settle | jq -c '.[0] | [.id, .amount, .basis, .usd, .reserved, has("over_reported")]')" = '["c1",0.00505,"provider_reported",0.00505,0.010192,false]' ]
	# 0.02 - 0.00505 = 0.01495 covers the second call in full
	[ "$(sel budget.reserve | jq -c '.[1] | [.amount, has("clamped_output_tokens")]')" = '[0.010192,false]' ]
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.spent, .reserved]' out.ndjson)" = '[0.00505,0.010192]' ]
}

@test "usage unavailable settles at the reserved worst case and says so" {
	{ start; creq c1 1000; cresp c1 null; } | cave-budget --max-usd 0.02 > out.ndjson
	[ "$(sel budget.settle | jq -c '.[0] | [.amount, .basis, has("usd")]')" = '[0.010192,"unavailable_worst_case",false]' ]
}

@test "a final call.error without usage releases the hold; with usage settles it" {
	err='{"type":"call.error","src":"cave-call","v":1,"run":"'$RUN'","span":"'$SPAN'","id":"c1","code":"http_500","final":%s%s}\n'
	{ start; creq c1 1000; printf "$err" false ''; printf "$err" true ''; } |
		cave-budget --max-usd 0.02 > out.ndjson
	[ "$(sel budget.settle | jq -c 'map([.amount, .basis])')" = '[[0,"error_no_usage"]]' ]
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.spent, .reserved]' out.ndjson)" = '[0,0]' ]
	{ start; creq c1 1000; printf "$err" true ",\"usage\":$(usage_io 10 100)"; } |
		cave-budget --max-usd 0.02 > out.ndjson
	[ "$(sel budget.settle | jq -c 'map([.amount, .basis])')" = '[[0.00101,"provider_reported"]]' ]
}

@test "an over-report is booked as reported: capBreached, overspent, nothing further" {
	# reserved 0.010192; the provider reports 3000 output tokens ($0.03)
	{ start; creq c1 1000; cresp c1 "$(usage_io 50 3000)"; creq c2 1000; } > in.ndjson
	run -0 --separate-stderr cave-budget --max-usd 0.02 < in.ndjson
	echo "$output" > out.ndjson
	[ "$(sel budget.settle | jq -c '.[0] | [.amount, .over_reported]')" = '[0.03005,true]' ]
	[ "$(jq -s -c 'map(select(.type=="budget.state")) | last | [.spent, .cap_breached, .overspent]' out.ndjson)" = '[0.03005,true,0.01005]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = budget_exhausted ]
	[ "$(sel call.request | jq length)" = 1 ]
	[[ $stderr == *"more than the 0.010192 reserved"* ]]
	# spent > max never appears without the flag
	[ "$(jq -s '[.[] | select(.type=="budget.state" and .spent > .max and (.cap_breached | not))] | length' out.ndjson)" = 0 ]
}

# ---- tranches ----

@test "tranche: a release from the control channel; none from anything else" {
	rel='{"type":"budget.release","src":"%s","v":1,"amount":%s,"reason":"checkpoint"}\n'
	{ start; printf "$rel" control 0.02; creq c1 1000; } |
		cave-budget --max-usd 0.05 --initial-usd 0.001 > out.ndjson
	[ "$(sel budget.release | jq -c 'map([.src, .amount, .reason, .at_call])')" = '[["cave-budget",0.02,"checkpoint",0]]' ]
	[ "$(sel call.request | jq length)" = 1 ]
	# a release from anything but the control channel is ignored
	{ start; printf "$rel" cave-call 0.02; creq c1 1000; } > in.ndjson
	run -0 --separate-stderr cave-budget --max-usd 0.05 --initial-usd 0.001 < in.ndjson
	[[ $stderr == *"not from 'control' ignored"* ]]
	[ "$(jq -s '[.[] | select(.type=="budget.release" or .type=="call.request")] | length' <<<"$output")" = 0 ]
	# past max is refused where it is asked for
	{ start; printf "$rel" control 0.06; creq c1 1000; } > in.ndjson
	run -0 --separate-stderr cave-budget --max-usd 0.05 --initial-usd 0.001 < in.ndjson
	[[ $stderr == *"refused: past max"* ]]
	[ "$(jq -s '[.[] | select(.type=="budget.release")] | length' <<<"$output")" = 0 ]
}

@test "tranche: --control FIFO releases while the run goes on" {
	mkfifo ctl in
	cave-budget --max-usd 0.05 --initial-usd 0.001 --control ctl < in > out.ndjson 3>&- &
	pid=$!
	exec 7> in
	start >&7
	echo '{"type":"budget.release","src":"control","amount":0.03,"reason":"fifo"}' > ctl
	sleep 0.3
	creq c1 1000 >&7
	exec 7>&-
	wait "$pid"
	[ "$(sel budget.release | jq -c 'map([.amount, .reason, .source])')" = '[[0.03,"fifo","control"]]' ]
	[ "$(sel call.request | jq length)" = 1 ]
}

@test "tranche: the --on-exhausted hook gets the context and releases once" {
	cat > hook.sh <<-'EOF'
	#!/bin/sh
	cat > "$HOOK_SEEN"
	echo "${HOOK_ANSWER}"
	EOF
	chmod +x hook.sh
	export HOOK_SEEN=$PWD/seen.json HOOK_ANSWER='{"release":0.02,"reason":"checkpoint 1"}'
	{ start; creq c1 1000; } | cave-budget --max-usd 0.05 --initial-usd 0.001 --on-exhausted ./hook.sh > out.ndjson
	jq -e '.denomination == "usd" and .released == 0.001 and .remaining == 0.001 and .needed == 0.010192 and .at_call == 0 and .model == "budget-test"' seen.json
	[ "$(sel budget.release | jq -c 'map([.amount, .reason, .source])')" = '[[0.02,"checkpoint 1","hook"]]' ]
	[ "$(sel call.request | jq length)" = 1 ]
	# "stop" stops; a release past max is refused; either way one asking
	for HOOK_ANSWER in stop '{"release":1,"reason":"too much"}' 'junk'; do
		export HOOK_ANSWER
		{ start; creq c1 1000; } | cave-budget --max-usd 0.05 --initial-usd 0.001 \
			--on-exhausted 'echo x >> calls; ./hook.sh' > out.ndjson 2> err
		[ "$(wc -l < calls)" -eq 1 ]
		rm calls
		[ "$(sel run.stop | jq -r '.[0].reason')" = budget_exhausted ]
		[ "$(sel call.request)" = '[]' ]
	done
}

# ---- ceilings ----

@test "--max-model-calls stops between calls with call_budget_exhausted" {
	{ start; creq c1 10; creq c2 10; } | cave-budget --max-model-calls 1 > out.ndjson
	[ "$(sel call.request | jq -c 'map(.id)')" = '["c1"]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = call_budget_exhausted ]
	# the default is 64
	{ start; for i in $(seq 1 65); do creq "c$i" 10; done; } | cave-budget > out.ndjson
	[ "$(sel call.request | jq length)" = 64 ]
}

@test "--max-tool-calls blocks the tool call past it and the run goes on" {
	treq='{"type":"tool.request","src":"cave-run","v":1,"run":"'$RUN'","span":"'$SPAN'","id":"%s","call_id":"c1","name":"ls","input":{}}\n'
	{ start; printf "$treq" t1; printf "$treq" t2; creq c2 10; } | cave-budget --max-tool-calls 1 > out.ndjson
	[ "$(sel tool.request | jq -c 'map(.id)')" = '["t1"]' ]
	[ "$(sel tool.result | jq -c '.[0] | [.id, .name, .denied, .src, .span]')" = '["t2","ls","tool_budget_exhausted","cave-budget","'$SPAN'"]' ]
	[ "$(sel call.request | jq length)" = 1 ]
	[ "$(sel run.stop)" = '[]' ]
}

@test "--deadline-ms stops at the next call with deadline" {
	{ start; creq c1 10; sleep 0.4; creq c2 10; } | cave-budget --deadline-ms 200 > out.ndjson
	[ "$(sel call.request | jq -c 'map(.id)')" = '["c1"]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = deadline ]
}

# ---- wallets ----

carve() { # carve PARENT_SPAN CHILD_SPAN AMOUNT
	printf '{"type":"budget.carve","src":"cave-run","v":1,"run":"%s","span":"%s","child_span":"%s","amount":%s}\n' "$RUN" "$1" "$2" "$3"
}

@test "wallets: carved synchronously, no double-spend, remainder returns at the end" {
	B=bbbbbbbbbbbbbbbb C=cccccccccccccccc
	{
		start; carve $SPAN $B 0.015; carve $SPAN $C 0.036
		creq k1 1000 budget-test $B
		cresp k1 "$(usage_io 50 500)" $B
		creq k2 1000 budget-test $B
		printf '{"type":"run.end","src":"cave-run","v":1,"run":"%s","span":"%s","stop_reason":"complete"}\n' "$RUN" $B
	} | cave-budget --max-usd 0.05 > out.ndjson
	# the second carve does not fit in the 0.035 the first left
	[ "$(sel budget.carve | jq -c 'map([.child_span, .amount, .refused])')" = '[["'$B'",0.015,null],["'$C'",0,"budget_exhausted"]]' ]
	# the child's second call is clamped to its own remainder, 0.00995
	[ "$(sel budget.reserve | jq -c 'map([.span, .clamped_output_tokens])')" = '[["'$B'",null],["'$B'",975]]' ]
	# at the child's end the parent counts only what it used: 0.00505
	# spent and 0.009942 still held by the call in flight
	[ "$(jq -s -c 'map(select(.type=="budget.state" and .span=="'$SPAN'")) | last | [.spent, .reserved]' out.ndjson)" = '[0.00505,0.009942]' ]
}

@test "wallets: a child's exhaustion stops the child; breach rolls up, amount does not" {
	B=bbbbbbbbbbbbbbbb
	{
		start; carve $SPAN $B 0.011
		creq k1 1000 budget-test $B
		cresp k1 "$(usage_io 50 1500)" $B
		creq k2 1000 budget-test $B
	} | cave-budget --max-usd 0.05 2> /dev/null > out.ndjson
	[ "$(sel run.stop | jq -c 'map([.span, .reason])')" = '[["'$B'","budget_exhausted"]]' ]
	[ "$(jq -s -c 'map(select(.type=="budget.state" and .span=="'$B'")) | last | [.spent, .cap_breached, .overspent]' out.ndjson)" = '[0.01505,true,0.00405]' ]
	[ "$(jq -s -c 'map(select(.type=="budget.state" and .span=="'$SPAN'")) | last | [.spent, .cap_breached, .overspent]' out.ndjson)" = '[0.01505,true,0]' ]
}

@test "wallets: a revoked parent revokes every wallet under it" {
	B=bbbbbbbbbbbbbbbb G=dddddddddddddddd
	{
		start; carve $SPAN $B 0.03; carve $B $G 0.02
		printf '{"type":"budget.revoke","src":"cave-run","v":1,"run":"%s","span":"%s","child_span":"%s"}\n' "$RUN" $SPAN $B
		creq g1 10 budget-test $G
	} | cave-budget --max-usd 0.05 > out.ndjson
	[ "$(sel run.stop | jq -c 'map([.span, .reason])')" = '[["'$G'","wallet_revoked"]]' ]
	[ "$(sel call.request)" = '[]' ]
}

# ---- through the fake provider ----

@test "provider: the clamped limit is what the provider is asked for; receipt valid" {
	script '{"responses":[{"text":"ok","usage":{"input":20,"output":30}}]}'
	cave request -m anthropic/budget-test --max-output-tokens 1000 "hi" |
		cave-budget --max-usd 0.01 | cave-call > out.ndjson
	[ "$(fake_requests)" = 1 ]
	want=$(sel budget.reserve | jq '.[0].clamped_output_tokens')
	[ "$want" -gt 256 ] && [ "$want" -lt 1000 ]
	[ "$(fake_request 1 | jq '.body | fromjson? // . | .max_tokens')" = "$want" ]
	cave-receipt < out.ndjson > receipt.json
	validate_receipt receipt.json
	[ "$(jq -c '[.denomination, .max, .calls[0].clampedOutputTokens]' receipt.json)" = '["usd",0.01,'$want']' ]
}

@test "provider: a stop happens before send; the provider sees no request" {
	script '{"responses":[{"text":"ok","usage":{"input":20,"output":30}}]}'
	cave request -m anthropic/budget-test --max-output-tokens 1000 "hi" |
		cave-budget --max-usd 0.001 | cave-call > out.ndjson
	[ "$(fake_requests)" = 0 ]
	cave-receipt < out.ndjson > receipt.json
	validate_receipt receipt.json
	[ "$(jq -r .stopReason receipt.json)" = budget_exhausted ]
}

@test "provider: an unpriced model is refused before any request" {
	script '{"responses":[{"text":"ok","usage":{"input":20,"output":30}}]}'
	run -77 --separate-stderr bash -c 'set -o pipefail; cave request -m anthropic/budget-unpriced "hi" | cave-budget --max-usd 1 | cave-call > out.ndjson'
	[ "$(fake_requests)" = 0 ]
	[[ $stderr == *cave_budget_denomination_unavailable* ]]
}

@test "provider: a deadline stops before send" {
	script '{"responses":[{"text":"ok","usage":{"input":20,"output":30}}]}'
	{ cave request -m anthropic/budget-test "hi"; } | { sleep 0.3; cat; } |
		cave-budget --deadline-ms 100 --max-usd 1 | cave-call > out.ndjson
	[ "$(fake_requests)" = 0 ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = deadline ]
}

@test "ring: over-report by the provider is recorded, the next call is not sent" {
	script '{"responses":[{"text":"a","usage":{"input":50,"output":3000}},{"text":"b","usage":{"input":50,"output":10}}]}'
	{ start; creq c1 1000; creq c2 1000; } > plan.ndjson
	ring plan.ndjson --max-usd 0.02
	[ "${ring_status[1]}" = 0 ]
	[ "$(fake_requests)" = 1 ]
	sel budget.settle journal.ndjson | jq -e '.[0] | .amount == 0.03005 and .over_reported'
	validate_receipt receipt.json
	jq -e '.capBreached and .spent == 0.03005 and .overspent == 0.01005 and .max == 0.02 and .stopReason == "budget_exhausted"' receipt.json
}

@test "ring: a tranche released by the hook at exhaustion; the receipt lists it" {
	script '{"responses":[{"text":"a","usage":{"input":50,"output":500}},{"text":"b","usage":{"input":50,"output":500}}]}'
	{ start; creq c1 1000; creq c2 1000; } > plan.ndjson
	ring plan.ndjson --max-usd 0.05 --initial-usd 0.011 --output-floor 900 \
		--on-exhausted 'cat > /dev/null; echo "{\"release\":0.02,\"reason\":\"checkpoint\"}"'
	[ "${ring_status[1]}" = 0 ]
	[ "$(fake_requests)" = 2 ]
	validate_receipt receipt.json
	jq -e '.tranches == [{"amount":0.02,"reason":"checkpoint","atCall":1}] and .released == 0.031 and .spent == 0.0101 and .stopReason == "complete" and (.capBreached | not)' receipt.json
}

# ---- large requests: measured from the line (lib/json.h), not parsed ----

# big_request FILE: a call.request of about 1 MB of mixed text (escapes,
# multi-byte UTF-8, a raw DEL, numbers jq rewrites) with tools; its model
# is not in the catalog, so the ceiling is not capped at a context window
big_request() {
	/usr/bin/python3 - "$RUN" "$SPAN" > "$1" <<'PY'
import json, random, sys
r = random.Random(3)
words = ["plain", "words", "\"quoted\"", "back\\slash", "tab\there", "new\nline", "/slash",
         "caf\u00e9", "\u6f22\u5b57", "\U0001F600", "del\x7f", "ctl\x01"]
text = " ".join(r.choice(words) for _ in range(150000))
ev = {"type": "call.request", "src": "cave-run", "v": 1, "run": sys.argv[1], "span": sys.argv[2],
      "seq": 1, "id": "c1", "provider": "anthropic", "model": "budget-big",
      "api": "anthropic-messages", "system": "sys \u00e9 \"q\"",
      "messages": [{"role": "user", "content": text},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                                      "input": {"n": 1.5, "m": 1e20, "k": 10}}]}],
      "tools": [{"name": "f", "input_schema": {"type": "object"}}], "max_output_tokens": 100}
# and "\/", which JSON allows and Python never writes
print(json.dumps(ev, separators=(",", ":"), ensure_ascii=False).replace("/slash", "\\/slash"))
PY
}

@test "reserve: a 1 MB request is measured as jq measures it, and passed on byte for byte" {
	big_request big.ndjson
	[ "$(wc -c < big.ndjson)" -gt 1000000 ]
	cave-budget --max-tokens 100000000 < big.ndjson > out.ndjson
	want=$(jq '64 + (.system | utf8bytelength) + (.messages | tojson | utf8bytelength) + (.tools | tojson | utf8bytelength) + 1024' big.ndjson)
	[ "$(sel budget.reserve | jq '.[0].input_ceiling')" = "$want" ]
	[ "$(grep '"type":"call.request"' out.ndjson)" = "$(cat big.ndjson)" ]
	# the same request with an escaped key is parsed whole: the same ceiling
	sed 's/"role":"user"/"r\\u006fle":"user"/' big.ndjson > escaped.ndjson
	cave-budget --max-tokens 100000000 < escaped.ndjson > out.ndjson
	[ "$(sel budget.reserve | jq '.[0].input_ceiling')" = "$want" ]
}

@test "reserve: lines the scan is not sure of are parsed whole, with the same result" {
	creq c1 1000 > plain.ndjson
	sed 's/"model":/"mod\\u0065l":/' plain.ndjson > escaped.ndjson
	sed 's/"max_output_tokens":1000/"max_output_tokens":5,"max_output_tokens":1000/' plain.ndjson > repeated.ndjson
	for f in plain escaped repeated; do
		{ start; cat "$f.ndjson"; } | cave-budget --max-usd 0.01 > out.ndjson
		[ "$(sel budget.reserve | jq -c '.[0] | [.amount, .clamped_output_tokens, .input_ceiling]')" = '[0.009992,980,96]' ]
		[ "$(sel call.request | jq '.[0].max_output_tokens')" = 980 ]
	done
}

@test "clamp: the lowered request keeps every other byte of its line" {
	{ start; creq c1 1000 | sed 's/"content":"hi"/"content":"h\\u0069"/; s/"stream":true/"stream" : true /'; } > in.ndjson
	cave-budget --max-tokens 500 < in.ndjson > out.ndjson
	[ "$(sel budget.reserve | jq -c '.[0] | [.amount, .clamped_output_tokens]')" = '[500,404]' ]
	[ "$(grep '"type":"call.request"' out.ndjson)" = "$(grep '"type":"call.request"' in.ndjson | sed 's/"max_output_tokens":1000/"max_output_tokens":404/')" ]
}

# ---- --restore: a resumed run's ledger, from its journal ----

# journal EVENTS...: what a run's journal holds after those events passed
# cave-budget --max-usd 0.01 (its own events among them, in ring order)
journal() {
	cave-budget --max-usd 0.01 > j.ndjson 2> /dev/null
}

@test "restore: the run's max, the journal's spend and its calls counted" {
	{ start; creq c1 100; cresp c1 "$(usage_io 100 50)"; } | journal
	run -0 --separate-stderr cave-budget --max-usd 0.01 --max-model-calls 2 --restore j.ndjson < /dev/null
	printf '%s\n' "$output" > out.ndjson
	# one state, the whole run's: c1 cost 100 x $1 + 50 x $10 per million
	[ "$(sel budget.state | jq -c 'map([.max, .spent, .reserved])')" = '[[0.01,0.0006,0]]' ]
	# its counter goes on from the journal's: one line per (src, seq)
	[ "$(jq -s 'map(select(.src == "cave-budget") | .seq) | max' j.ndjson)" -eq 5 ]
	[ "$(sel budget.state | jq '.[0].seq')" -eq 6 ]
	# --max-model-calls counts the journal's call
	{ start; creq c2 100; creq c3 100; } | cave-budget --max-usd 0.01 --max-model-calls 2 \
		--restore j.ndjson > out.ndjson
	[ "$(sel budget.reserve | jq -c 'map(.id)')" = '["c2"]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = call_budget_exhausted ]
}

@test "restore: a call in flight at the crash is booked at its worst case, and flagged" {
	{ start; creq c1 100; } | journal
	run -0 --separate-stderr cave-budget --max-usd 0.01 --restore j.ndjson < /dev/null
	printf '%s\n' "$output" > out.ndjson
	[ "$(sel budget.settle | jq -c 'map([.id, .amount, .basis, .restored])')" = \
		'[["c1",0.001192,"unknown_worst_case",true]]' ]
	[ "$(sel budget.state | jq -c 'map(.spent) | last')" = 0.001192 ]
	[[ $stderr == *"1 call in flight at the crash may have been billed"* ]]
	# restored again (that settle journaled too): booked once, not twice
	cat out.ndjson >> j.ndjson
	cave-budget --max-usd 0.01 --restore j.ndjson < /dev/null > out.ndjson
	[ "$(sel budget.settle)" = '[]' ]
	[ "$(sel budget.state | jq -c 'map(.spent)')" = '[0.001192]' ]
}

@test "restore: only what is left is admitted" {
	{ start; creq c1 100; } | journal
	# 0.002 - 0.001192 affords 61 output tokens, below the floor: stop
	{ start; creq c2 100; } | cave-budget --max-usd 0.002 --restore j.ndjson > out.ndjson
	[ "$(sel budget.reserve)" = '[]' ]
	[ "$(sel run.stop | jq -r '.[0].reason')" = budget_exhausted ]
	# without the journal the same call goes
	{ start; creq c2 100; } | cave-budget --max-usd 0.002 > out.ndjson
	[ "$(sel budget.reserve | jq -c 'map(.id)')" = '["c2"]' ]
}

@test "restore: a settlement or a reservation the crash kept out of the journal is made again" {
	{ start; creq c1 100; cresp c1 "$(usage_io 100 50)"; } | journal
	grep -v '"type":"budget.settle"' j.ndjson > cut.ndjson
	cave-budget --max-usd 0.01 --restore cut.ndjson < /dev/null > out.ndjson
	[ "$(sel budget.settle | jq -c 'map([.id, .amount, .basis, .restored])')" = \
		'[["c1",0.0006,"provider_reported",true]]' ]
	[ "$(sel budget.state | jq -c 'map(.spent) | last')" = 0.0006 ]
	# the request is on disk, its reservation is not: held as it would
	# have been, and booked, since it may have left
	{ start; creq c1 100; } > cut.ndjson
	cave-budget --max-usd 0.01 --restore cut.ndjson < /dev/null > out.ndjson
	[ "$(sel budget.reserve | jq -c 'map([.id, .amount, .restored])')" = '[["c1",0.001192,true]]' ]
	[ "$(sel budget.settle | jq -c 'map([.id, .basis])')" = '[["c1","unknown_worst_case"]]' ]
}

@test "restore: only the first --restore-bytes of the journal, which the run appends to" {
	{ start; creq c1 100; cresp c1 "$(usage_io 100 50)"; } | journal
	size=$(stat -c %s j.ndjson)
	creq c2 100 >> j.ndjson
	cave-budget --max-usd 0.01 --restore j.ndjson --restore-bytes "$size" < /dev/null > out.ndjson
	[ "$(sel budget.settle)" = '[]' ]
	[ "$(sel budget.state | jq -c 'map(.spent)')" = '[0.0006]' ]
	cave-budget --max-usd 0.01 --restore j.ndjson < /dev/null > out.ndjson
	[ "$(sel budget.settle | jq -c 'map(.id)')" = '["c2"]' ]
}

@test "restore: a journal it cannot read, or of another denomination" {
	run -74 --separate-stderr cave-budget --max-usd 0.01 --restore nope.ndjson < /dev/null
	[[ $stderr == *"--restore: cannot open 'nope.ndjson'"* ]]
	{ start; creq c1 100; } | journal
	run -2 --separate-stderr cave-budget --max-tokens 1000 --restore j.ndjson < /dev/null
	[[ $stderr == *"keeps a budget in usd, not tokens"* ]]
	run -2 --separate-stderr cave-budget --max-usd 1 --restore-bytes x < /dev/null
	run -2 --separate-stderr cave-budget --max-usd 1 --restore-bytes 10 < /dev/null
	[[ $stderr == *"--restore-bytes needs --restore"* ]]
}
