#!/usr/bin/env bats
# cave-doctor: reports what the kernel offers and what required mode does.

load test_helper

setup() {
	setup_cave_env
}

@test "doctor reports Landlock, namespaces, seccomp and required mode" {
	run cave-doctor
	[ "$status" -eq 0 ]
	[[ "$output" == *"landlock           ABI "* ]]
	[[ "$output" == *"user namespaces    yes"* ]]
	[[ "$output" == *"seccomp            yes"* ]]
	[[ "$output" == *"required mode      available"* ]]
}

@test "doctor --json agrees with the kernel's Landlock ABI" {
	run cave-doctor --json
	[ "$status" -eq 0 ]
	[ "$(jq -r .required_mode <<<"$output")" = available ]
	[ "$(jq -r .landlock.abi <<<"$output")" -ge 1 ]
	[ "$(jq -r .policy <<<"$output")" = default.policy ]
	[ "$(jq -r .missing <<<"$output")" = null ]
}

@test "doctor says whether network: true tools can be served" {
	run cave-doctor --json
	[ "$status" -eq 0 ]
	[ "$(jq -r .network.available <<<"$output")" = true ]
	[ "$(jq -r .network.slirp4netns <<<"$output")" = "$(command -v slirp4netns)" ]
	[ "$(jq -r .network.tun <<<"$output")" = true ]
	run cave-doctor
	[[ "$output" == *"network: true      served: "*"never the host's loopback"* ]]
	# without slirp4netns: named as missing; required mode itself stays available
	PATH="$CAVE_ROOT/bin" run cave-doctor
	[ "$status" -eq 0 ]
	[[ "$output" == *"network: true      refused in required mode: missing slirp4netns ('slirp4netns' is not in PATH)"* ]]
	PATH="$CAVE_ROOT/bin" run cave-doctor --json
	[ "$(/usr/bin/jq -r .network.available <<<"$output")" = false ]
	[[ "$(/usr/bin/jq -r .network.missing <<<"$output")" == slirp4netns* ]]
}

@test "doctor inside the sandbox finds the kernel's features gone" {
	[ -z "${CAVE_SANITIZE:-}" ] || skip "an ASan build cannot map its shadow memory under the sandbox's address-space limit"
	tools="$CAVE_ROOT/tests/fixtures/cave-sandbox/tools"
	jq -cn --arg cmd "$tools/nested-doctor" --arg ws "$CAVE_ROOT" \
		'{type:"tool.request",src:"cave-run",id:"d",name:"d",input:{},effect:"read",command:$cmd,workspace:$ws}' |
		cave-sandbox > "$BATS_TEST_TMPDIR/o"
	out=$(jq -r 'select(.type=="tool.result") | .output' "$BATS_TEST_TMPDIR/o")
	[[ "$out" == *"doctor exit 1"* ]]
	[ "$(head -1 <<<"$out" | jq -r .required_mode)" = refuses ]
	[[ "$(head -1 <<<"$out" | jq -r .missing)" == *namespaces* ]]
}

@test "doctor rejects unknown options" {
	run cave-doctor --bogus
	[ "$status" -eq 2 ]
}
