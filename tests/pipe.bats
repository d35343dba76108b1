#!/usr/bin/env bats
# The first slice end to end, as the README gives it:
#   cave request ... | cave-call | cave-receipt
# for each protocol, against the fake provider: the receipt validates against
# the contract and its cost matches the catalog to the last digit.

load test_helper

setup() {
	setup_cave_env
}

teardown() {
	fake_stop
}

@test "each protocol's call: a valid receipt whose cost matches the catalog exactly" {
	for m in "anthropic/claude-haiku-4-5 anthropic-messages" "openai/gpt-5-mini openai-chat" \
		 "openai/gpt-5-mini openai-responses" "google/gemini-2.5-flash gemini"; do
		set -- $m
		printf '%s\n' '{"responses":[{"text":"One line.","usage":{"input":1234,"cache_read":567,"output":89,"reasoning":20}}]}' > s.json
		fake_start s.json
		cave request -m "$1" --api "$2" "Summarise RFC 8259 in one line" | cave-call | cave-receipt > receipt.json
		validate_receipt receipt.json
		jq -e '.calls | length == 1 and .[0].inputTokens == 1234 and .[0].cacheReadTokens == 567 and .[0].outputTokens == 89 and .[0].unpriced == false' receipt.json
		usd=$(/usr/bin/python3 "$CAVE_ROOT/tests/expected-cost.py" "$CAVE_ROOT/catalog/current.yaml" < receipt.json)
		[ "$(jq .totalEstimatedUsd receipt.json)" != 0 ]
		! grep -q "$FAKE_KEY_MARKER" receipt.json
		fake_stop
	done
}

@test "the README's pipe prints a number with jq, and the human bill never says saved" {
	printf '%s\n' '{"responses":[{"text":"ok","usage":{"input":100,"output":10}},{"text":"ok","usage":{"input":100,"output":10}}]}' > s.json
	fake_start s.json
	run bash -c 'cave request -m anthropic/claude-haiku-4-5 "Summarise RFC 8259 in one line" | cave-call | cave-receipt | jq .totalEstimatedUsd'
	[ "$status" -eq 0 ]
	[ "$output" = "0.00015" ]
	run bash -c 'cave request -m anthropic/claude-haiku-4-5 "x" | cave-call | cave-receipt --human'
	[ "$status" -eq 0 ]
	[[ $output == *"estimated list-price subtotal"* ]]
	! grep -qi saved <<<"$output"
}

@test "an unknown model is unpriced in the receipt, never \$0 quietly" {
	printf '%s\n' '{"responses":[{"text":"ok","usage":{"input":100,"output":10}}]}' > s.json
	fake_start s.json
	cave request -m anthropic/claude-imaginary-9 "x" | cave-call | cave-receipt > receipt.json
	validate_receipt receipt.json
	jq -e '.unpriced == true and .calls[0].unpriced == true' receipt.json
}

@test "the offline default answers with no key and no network, priced as the model it impersonates" {
	run bash -c 'cave request "Summarise RFC 8259 in one line" | cave-call | cave-receipt'
	[ "$status" -eq 0 ]
	validate_receipt <<<"$output"
	jq -e '.calls[0].provider == "fixture" and .calls[0].unpriced == false and .totalEstimatedUsd > 0' <<<"$output"
}
