# Shared set-up for the bats files: each test gets its own HOME, TMPDIR and
# working directory, PATH starts with the freshly built bin/, and no real
# provider key or base URL leaks in from the caller's environment.
CAVE_ROOT=${CAVE_ROOT:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
export CAVE_ROOT

bats_load_library bats-support
bats_load_library bats-assert

setup_cave_env() {
	export HOME="$BATS_TEST_TMPDIR/home"
	mkdir -p "$HOME"
	export PATH="$CAVE_ROOT/bin:$PATH"
	unset ANTHROPIC_API_KEY OPENAI_API_KEY GEMINI_API_KEY GOOGLE_API_KEY
	unset ANTHROPIC_BASE_URL OPENAI_BASE_URL GOOGLE_GEMINI_BASE_URL
	unset CAVE_CATALOG CAVE_FIXTURES
	cd "$BATS_TEST_TMPDIR" || return 1
}

# Validates a receipt (file or stdin) against the contract with an
# independent draft 2020-12 validator, not the project's own code.
validate_receipt() {
	/usr/bin/python3 "$CAVE_ROOT/tests/validate-receipt.py" "$@"
}

if [ -f "$CAVE_ROOT/tests/fake-provider/fake.bash" ]; then
	source "$CAVE_ROOT/tests/fake-provider/fake.bash"
fi
