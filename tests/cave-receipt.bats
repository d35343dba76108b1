#!/usr/bin/env bats
# cave-receipt: hand-written event streams (one per provider API, and one
# with every part of the receipt) folded into receipts that must validate
# against the contract; the bill, --events, bad input and a closed stdout.

load test_helper

FIX="$CAVE_ROOT/tests/fixtures/cave-receipt"

setup() {
	setup_cave_env
	export CAVE_CATALOG="$FIX/catalog.yaml"
}

# The receipt of a fixture stream, in receipt.json; status of cave-receipt.
receipt_of() {
	run --separate-stderr cave-receipt "$@"
	printf '%s\n' "$output" > receipt.json
}

@test "anthropic-messages response: priced exactly, clamp recorded, valid" {
	receipt_of < "$FIX/anthropic.ndjson"
	[ "$status" -eq 0 ]
	validate_receipt receipt.json
	[ "$(jq -c .totalEstimatedUsd receipt.json)" = 0.010935 ]
	[ "$(jq -c .totalTokens receipt.json)" = 1800 ]
	[ "$(jq -c '.calls[0] | [.provider, .model, .inputTokens, .cacheReadTokens, .cacheWriteTokens, .outputTokens, .clampedOutputTokens]' receipt.json)" = '["anthropic","claude-test",1000,200,100,500,1000]' ]
	[ "$(jq -r '.runId + " " + .agentId + " " + .stopReason + " " + .denomination' receipt.json)" = "2b1c9a4e-8f3d-4c2a-9e1b-7d6f5a4c3b21 helper complete usd" ]
	[ "$(jq -c '[.max, .released, .spent, .capBreached, .overspent]' receipt.json)" = '[0.5,0.5,0.010935,false,0]' ]
	[ -z "$stderr" ]
}

@test "openai-responses response: token budget, reasoning, tools and their errors" {
	receipt_of < "$FIX/openai-responses.ndjson"
	[ "$status" -eq 0 ]
	validate_receipt receipt.json
	[ "$(jq -c '[.denomination, .max, .spent]' receipt.json)" = '["tokens",20000,2440]' ]
	[ "$(jq -c '[.calls[].estimatedUsd]' receipt.json)" = '[0.00415,0.000525]' ]
	[ "$(jq -c .totalEstimatedUsd receipt.json)" = 0.004675 ]
	[ "$(jq -c '.calls[0].reasoningTokens' receipt.json)" = 120 ]
	[ "$(jq -c .tools receipt.json)" = '[{"name":"ls","calls":2,"errors":1},{"name":"rm","calls":1,"errors":1}]' ]
}

@test "openai-chat response: unavailable usage costs its worst case, unknown model is unpriced" {
	receipt_of < "$FIX/openai-chat.ndjson"
	[ "$status" -eq 0 ]
	validate_receipt receipt.json
	[ "$(jq -c '.calls[0] | [.usageBasis, .inputTokens, .outputTokens, .estimatedUsd, .unpriced]' receipt.json)" = '["unavailable",0,0,0.02,false]' ]
	[ "$(jq -c '.calls[1] | [.model, .estimatedUsd, .unpriced]' receipt.json)" = '["gpt-mystery",0,true]' ]
	[ "$(jq -c '[.unpriced, .totalEstimatedUsd, .totalTokens]' receipt.json)" = '[true,0.02,67]' ]
}

@test "gemini response: long-context rates, a retried error is not a call" {
	receipt_of < "$FIX/gemini.ndjson"
	[ "$status" -eq 0 ]
	validate_receipt receipt.json
	[ "$(jq -c '[(.calls | length), .calls[0].estimatedUsd, .calls[0].reasoningTokens]' receipt.json)" = '[1,0.4422,500]' ]
	[ "$(jq -c '[.denomination, .capBreached, .overspent, has("max")]' receipt.json)" = '["none",false,0,false]' ]
}

@test "a run with everything: fixture pricing, subagents, tranches, breakers, compactions" {
	receipt_of < "$FIX/full.ndjson"
	[ "$status" -eq 0 ]
	validate_receipt receipt.json
	[ "$(jq -c '[.stopReason, .capBreached, .overspent, .totalEstimatedUsd, .totalTokens]' receipt.json)" = '["budget_exhausted",true,0.0001,0.0061,1270]' ]
	[ "$(jq -c '[.calls[].estimatedUsd]' receipt.json)" = '[0.00045,0.00015]' ]
	[ "$(jq -c '[.subagents[].totalEstimatedUsd]' receipt.json)" = '[0.0045,0.001]' ]
	[ "$(jq -c .tranches receipt.json)" = '[{"amount":0.25,"reason":"user_topup","atCall":1}]' ]
	[ "$(jq -c '[.breakers[].kind]' receipt.json)" = '["loop_detected","retry_attempted"]' ]
	[ "$(jq -c '.compactions[0] | [.tier, .preTokens, .postTokens, .cacheState]' receipt.json)" = '["evicted",9000,3000,"cold"]' ]
}

@test "a call still in flight is counted on stderr, exit 0" {
	receipt_of < "$FIX/full.ndjson"
	[ "$status" -eq 0 ]
	[[ "$stderr" == "cave-receipt: 1 model call in flight when the events ended"* ]]
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
}

@test "receipts are content-blind" {
	for f in "$FIX"/*.ndjson; do
		grep -q SECRET "$f" || grep -q '"messages"' "$f"
		run cave-receipt "$f"
		[ "$status" -eq 0 ]
		[[ "$output" != *SECRET* ]]
		[[ "$output" != *'"plan"'* ]]
	done
}

@test "the receipt is the last and only line of stdout: jq .totalEstimatedUsd works" {
	run bash -c 'cave-receipt < "$1" | jq .totalEstimatedUsd' _ "$FIX/anthropic.ndjson"
	[ "$status" -eq 0 ]
	[ "$output" = 0.010935 ]
	run cave-receipt < "$FIX/anthropic.ndjson"
	[ "${#lines[@]}" -eq 1 ]
}

@test "an events file operand gives the same receipt as stdin" {
	a=$(cave-receipt "$FIX/openai-responses.ndjson")
	b=$(cave-receipt < "$FIX/openai-responses.ndjson")
	[ "$a" = "$b" ]
}

@test "--human: a bill with the basis, unpriced and unavailable flagged, never 'saved'" {
	run --separate-stderr cave-receipt --human < "$FIX/openai-chat.ndjson"
	[ "$status" -eq 0 ]
	[[ "$output" == *"estimated list-price subtotal"* ]]
	[[ "$output" == *"UNPRICED"* ]]
	[[ "$output" == *"USAGE UNAVAILABLE"* ]]
	[[ "$output" == *"openai/gpt-mystery"* ]]
	[[ "$output" == *"total: 67 tokens, USD 0.02"* ]]
	for f in "$FIX"/*.ndjson; do
		run cave-receipt --human "$f"
		! grep -qi saved <<<"$output"
		! grep -qi saving <<<"$output"
	done
}

@test "--human: a priced run shows per-call tokens and no unpriced warning" {
	run cave-receipt --human < "$FIX/anthropic.ndjson"
	[ "$status" -eq 0 ]
	grep -Eq 'anthropic/claude-test +1000 +200 +100 +500 +0 +0\.010935' <<<"$output"
	[[ "$output" != *UNPRICED* ]]
	run cave-receipt --human < "$FIX/full.ndjson"
	[[ "$output" == *"UNKNOWN OUTCOME: 1 call"* ]]
	[[ "$output" == *"CAP BREACHED"* ]]
}

@test "--events: every event passes through, then one receipt event" {
	run --separate-stderr cave-receipt --events < "$FIX/full.ndjson"
	[ "$status" -eq 0 ]
	n=$(wc -l < "$FIX/full.ndjson")
	[ "${#lines[@]}" -eq $((n + 1)) ]
	[ "$(printf '%s\n' "${lines[@]:0:$n}")" = "$(cat "$FIX/full.ndjson")" ]
	last=${lines[$n]}
	[ "$(jq -r '.type + " " + .src + " " + .run + " " + .span' <<<"$last")" = "receipt cave-receipt 3f2e1d0c-9b8a-4766-a544-332211009988 aaaaaaaaaaaaaaaa" ]
	[[ "$last" == '{"type":"receipt","src":"cave-receipt",'* ]]
	jq -c .receipt <<<"$last" > receipt.json
	validate_receipt receipt.json
	[ "$(jq -c .totalEstimatedUsd receipt.json)" = 0.0061 ]
}

@test "--events output folds again to the same receipt" {
	cave-receipt --events < "$FIX/full.ndjson" > events.ndjson 2>/dev/null
	a=$(cave-receipt < "$FIX/full.ndjson" 2>/dev/null)
	b=$(cave-receipt < events.ndjson 2>/dev/null)
	[ "$a" = "$b" ]
}

@test "malformed lines: named with their line, skipped, receipt still printed, exit 65" {
	{ head -n 3 "$FIX/anthropic.ndjson"; echo '{"type":"call.response", oops'
	  echo 'not json at all'; tail -n +4 "$FIX/anthropic.ndjson"; } > bad.ndjson
	run --separate-stderr cave-receipt < bad.ndjson
	[ "$status" -eq 65 ]
	[[ "$stderr" == *"cave-receipt: <stdin>:4: "* ]]
	[[ "$stderr" == *"cave-receipt: <stdin>:5: "* ]]
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 2 ]
	printf '%s\n' "$output" > receipt.json
	validate_receipt receipt.json
	[ "$(jq -c .totalEstimatedUsd receipt.json)" = 0.010935 ]
}

@test "an event that breaks its type's promise is reported with its file and line" {
	{ cat "$FIX/gemini.ndjson"; echo '{"type":"run.stop","src":"x","reason":"bored"}'; } > bad.ndjson
	run --separate-stderr cave-receipt bad.ndjson
	[ "$status" -eq 65 ]
	[ "$stderr" = "cave-receipt: bad.ndjson:6: run.stop: stop reason 'bored' is not one the receipt knows" ]
	printf '%s\n' "$output" | validate_receipt
}

@test "a closed stdout (EPIPE) is a quiet end" {
	{ head -n 5 "$FIX/anthropic.ndjson"
	  sed -n 6p "$FIX/anthropic.ndjson" > delta
	  for i in $(seq 12); do cat delta delta delta delta delta delta delta delta; done > d8
	  for i in $(seq 200); do cat d8; done
	  tail -n +7 "$FIX/anthropic.ndjson"; } > big.ndjson
	[ "$(wc -c < big.ndjson)" -gt 500000 ]
	run bash -c 'cave-receipt --events < big.ndjson 2>err | head -c1; echo " ${PIPESTATUS[0]}"'
	[ "$output" = '{ 0' ]
	[ ! -s err ]
	run bash -c 'cave-receipt < "$1" 2>err | head -c1; echo " ${PIPESTATUS[0]}"' _ "$FIX/anthropic.ndjson"
	[ "$output" = '{ 0' ]
	[ ! -s err ]
}

@test "-o FILE writes the same receipt, and leaves no temporary file" {
	run cave-receipt -o out.json < "$FIX/anthropic.ndjson"
	[ "$status" -eq 0 ]
	[ "$(cat out.json)" = "$output" ]
	validate_receipt out.json
	[ "$(ls | grep -c tmp)" -eq 0 ]
	run --separate-stderr cave-receipt -o no/such/dir/out.json < "$FIX/anthropic.ndjson"
	[ "$status" -eq 74 ]
	[[ "$stderr" == "cave-receipt: cannot "*"no/such/dir/out.json"* ]]
	printf '%s\n' "$output" | validate_receipt
}

@test "no catalog: exit 78, and the receipt still comes, every call unpriced" {
	run --separate-stderr cave-receipt --catalog no-such.yaml < "$FIX/anthropic.ndjson"
	[ "$status" -eq 78 ]
	[[ "$stderr" == "cave-receipt: "*"no-such.yaml"*"every call is unpriced"* ]]
	printf '%s\n' "$output" > receipt.json
	validate_receipt receipt.json
	[ "$(jq -c '[.unpriced, .calls[0].unpriced, .totalEstimatedUsd]' receipt.json)" = '[true,true,0]' ]
}

@test "empty input: a valid empty receipt with a fresh run id" {
	run cave-receipt < /dev/null
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" > receipt.json
	validate_receipt receipt.json
	[ "$(jq -c '[.calls, .agentId, .stopReason, .totalEstimatedUsd]' receipt.json)" = '[[],"adhoc","complete",0]' ]
	a=$(jq -r .runId receipt.json)
	b=$(cave-receipt < /dev/null | jq -r .runId)
	[ "$a" != "$b" ]
}

@test "--help and bad usage" {
	run cave-receipt --help
	[ "$status" -eq 0 ]
	[[ "$output" == "usage: cave-receipt "* ]]
	run cave-receipt --no-such-option
	[ "$status" -eq 2 ]
	run cave-receipt --human --events
	[ "$status" -eq 2 ]
	run cave-receipt a.ndjson b.ndjson
	[ "$status" -eq 2 ]
}

@test "the fixture events validate against schemas/event.schema.json" {
	run /usr/bin/python3 - "$CAVE_ROOT/schemas/event.schema.json" "$FIX"/*.ndjson <<-'PY'
	import json, sys, jsonschema
	schema = json.load(open(sys.argv[1]))
	v = jsonschema.Draft202012Validator(schema)
	jsonschema.Draft202012Validator.check_schema(schema)
	bad = 0
	for f in sys.argv[2:]:
	    for n, line in enumerate(open(f), 1):
	        for e in v.iter_errors(json.loads(line)):
	            print(f"{f}:{n}: {e.message}"); bad += 1
	# a wrong event must fail: the schema is not vacuous
	for ev in ({"type": "call.response", "src": "x", "v": 1},
	           {"type": "run.end", "src": "x", "v": 1, "stop_reason": "bored"},
	           {"type": "call.response", "src": "x", "v": 1, "id": "c1",
	            "provider": "p", "model": "m", "usage_basis": "provider_reported",
	            "usage": {"input": -1, "output": 0}},
	           {"type": "budget.state", "src": "x", "v": 1, "denomination": "euro"}):
	    if not list(v.iter_errors(ev)):
	        print("accepted", ev); bad += 1
	sys.exit(1 if bad else 0)
	PY
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "schemas/receipt.schema.json is the contract with notes only, and receipts validate against it" {
	contract="$CAVE_ROOT/../shared/reference/caveman/schemas/agent-run-receipt.schema.json"
	[ -f "$contract" ] || skip "the contract is not beside the checkout"
	run /usr/bin/python3 - "$CAVE_ROOT/schemas/receipt.schema.json" "$contract" <<-'PY'
	import json, sys
	NOTES = {"description", "$comment", "title", "$id"}
	def strip(v):
	    if isinstance(v, dict):
	        return {k: strip(x) for k, x in v.items() if k not in NOTES}
	    if isinstance(v, list):
	        return [strip(x) for x in v]
	    return v
	a, b = (strip(json.load(open(f))) for f in sys.argv[1:3])
	sys.exit(0 if a == b else 1)
	PY
	[ "$status" -eq 0 ]
	for f in anthropic full openai-chat; do
		cave-receipt "$FIX/$f.ndjson" 2>/dev/null > r.json
		CAVE_RECEIPT_SCHEMA="$CAVE_ROOT/schemas/receipt.schema.json" validate_receipt r.json
	done
}

@test "events that break their type's promise: each named, the rest still folded, valid receipt" {
	{ cat "$FIX/full.ndjson"
	  echo '{"type":"breaker","src":"x","v":1,"kind":"retry_attempted","count":1}'
	  echo '{"type":"compaction","src":"x","v":1,"tier":"evicted","elided_segment_digests":["zz"]}'
	  echo '{"type":"receipt","src":"x","v":1,"span":"eeeeeeeeeeeeeeee","receipt":{"schema":"nope"}}'
	  echo '{"type":"tool.result","src":"x","v":1}'
	  echo '[1]'; } > mixed.ndjson
	run --separate-stderr cave-receipt mixed.ndjson
	[ "$status" -eq 65 ]
	for n in 19 20 21 22 23; do [[ "$stderr" == *"cave-receipt: mixed.ndjson:$n: "* ]]; done
	printf '%s\n' "$output" > receipt.json
	validate_receipt receipt.json
	[ "$(jq -c '[(.subagents | length), (.breakers | length), .totalEstimatedUsd, .tools]' receipt.json)" = '[2,2,0.0061,[{"name":"unknown","calls":1,"errors":1}]]' ]
}
