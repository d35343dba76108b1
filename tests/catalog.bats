#!/usr/bin/env bats
# cave-catalog and the shipped catalog: validation, digest stability,
# lookups, pricing from the command line, and the cross-check of every rate
# against the public references (skipped when they are absent).
load test_helper

setup() {
	setup_cave_env
	CAT="$CAVE_ROOT/catalog/current.yaml"
	REF="$CAVE_ROOT/../shared/reference"
}

@test "the shipped catalog loads and validates" {
	run -0 cave-catalog --catalog "$CAT" --check
	assert_output --regexp '[0-9]+ models, sha256 [0-9a-f]{64}$'
}

@test "the default catalog is found beside bin/ and through CAVE_CATALOG" {
	run -0 cave-catalog --path
	assert_output --partial "catalog/current.yaml"
	cp "$CAT" mine.yaml
	CAVE_CATALOG="$PWD/mine.yaml" run -0 cave-catalog --path
	assert_output "$PWD/mine.yaml"
}

@test "the digest is the sha256 of the file's bytes, and stable" {
	run -0 cave-catalog --catalog "$CAT" --digest
	first=$output
	assert_equal "$first" "$(sha256sum "$CAT" | cut -d' ' -f1)"
	run -0 cave-catalog --catalog "$CAT" --digest
	assert_equal "$output" "$first"
}

@test "the digest changes when one byte changes" {
	cp "$CAT" a.yaml
	printf '# one more byte\n' >> a.yaml
	run -0 cave-catalog --catalog a.yaml --digest
	refute_output "$(cave-catalog --catalog "$CAT" --digest)"
	assert_equal "$output" "$(sha256sum a.yaml | cut -d' ' -f1)"
}

@test "price: known model, alias and fixture agree" {
	run -0 cave-catalog --catalog "$CAT" price anthropic/claude-haiku-4-5 1000000 1000000
	assert_output "6"
	run -0 cave-catalog --catalog "$CAT" price anthropic/claude-haiku-4-5-20251001 1000 1000
	assert_output "0.006"
	run -0 cave-catalog --catalog "$CAT" price fixture/anthropic/claude-haiku-4-5 1000 1000
	assert_output "0.006"
}

@test "price: cache kinds, the 1-hour split and long context" {
	# 100 in, 10 out, 1000 read, 1000 written of which 400 for 1 hour:
	# 100*1 + 10*5 + 1000*0.1 + 600*1.25 + 400*2 = 1800 micro-USD
	run -0 cave-catalog --catalog "$CAT" price anthropic/claude-haiku-4-5 100 10 1000 1000 400
	assert_output "0.0018"
	# gpt-5.4 above 272k prompt tokens: input x2, output x1.5
	run -0 cave-catalog --catalog "$CAT" price openai/gpt-5.4 300000 1000
	assert_output "1.5225"
	run -0 cave-catalog --catalog "$CAT" price openai/gpt-5.4 272000 1000
	assert_output "0.695"
}

@test "price: a used kind with no price is unpriced, never 0" {
	run -1 --separate-stderr cave-catalog --catalog "$CAT" price openai/gpt-5-pro 10 10 10
	assert_output ""
	assert_equal "$stderr" "cave-catalog: 'openai/gpt-5-pro' is unpriced for this usage"
}

@test "an unknown model is a definite no" {
	run -1 --separate-stderr cave-catalog --catalog "$CAT" price acme/nothing 1 1
	assert_equal "$stderr" "cave-catalog: unknown model 'acme/nothing' (expected provider/model)"
}

@test "bad usage exits 2" {
	run -2 cave-catalog --catalog "$CAT" price anthropic/claude-haiku-4-5 1
	run -2 cave-catalog --catalog "$CAT" price anthropic/claude-haiku-4-5 1 x
	run -2 cave-catalog --catalog "$CAT" frobnicate
}

@test "a malformed catalog is refused with the file and the model named" {
	sed 's/input: "1", output: "5"/input: 1, output: "5"/' "$CAT" > bad.yaml
	run -78 --separate-stderr cave-catalog --catalog bad.yaml --check
	assert_equal "$stderr" "cave-catalog: bad.yaml: model 'anthropic/claude-haiku-4-5': 'input' must be a quoted non-negative decimal or null with at most 6 decimals"
}

@test "a YAML error names file, line and column" {
	printf 'schema: cave.catalog.v1\nmodels: [\n' > broken.yaml
	run -78 --separate-stderr cave-catalog --catalog broken.yaml --check
	assert_regex "$stderr" '^cave-catalog: broken.yaml:[0-9]+:[0-9]+: '
	run -78 --separate-stderr cave-catalog --catalog missing.yaml --check
	assert_equal "$stderr" "cave-catalog: cannot open 'missing.yaml': No such file or directory"
}

@test "every rate agrees with both references, or says why" {
	[ -d "$REF" ] || skip "reference data not present"
	cave-catalog --catalog "$CAT" --json > cat.json
	run -0 /usr/bin/python3 "$CAVE_ROOT/tests/catalog-crosscheck.py" cat.json "$REF" "$CAVE_ROOT/catalog/README.md"
	assert_output --partial " 0 problems"
}

@test "the cross-check catches an unexplained price change" {
	[ -d "$REF" ] || skip "reference data not present"
	sed 's/id: anthropic\/claude-haiku-4-5$/&/; /id: anthropic\/claude-haiku-4-5$/,/verified:/ s/output: "5"/output: "6"/' "$CAT" > changed.yaml
	cave-catalog --catalog changed.yaml --json > cat.json
	run -1 /usr/bin/python3 "$CAVE_ROOT/tests/catalog-crosscheck.py" cat.json "$REF" "$CAVE_ROOT/catalog/README.md"
	assert_output --partial "anthropic/claude-haiku-4-5: caveman: output is 6 here but 5.0 in caveman"
}

@test "the cross-check catches a reference model left out without a word" {
	[ -d "$REF" ] || skip "reference data not present"
	cave-catalog --catalog "$CAT" --json > cat.json
	: > empty.md
	run -1 /usr/bin/python3 "$CAVE_ROOT/tests/catalog-crosscheck.py" cat.json "$REF" empty.md
	assert_output --partial "pi-ai: anthropic/claude-3-opus-20240229 is neither in the catalog"
}

@test "show prints one model as JSON" {
	run -0 cave-catalog --catalog "$CAT" show google/gemini-2.5-pro
	assert_equal "$(jq -r .rates.input <<<"$output")" "1.25"
	assert_equal "$(jq -r .long_context.threshold_tokens <<<"$output")" "200000"
}
