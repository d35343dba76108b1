#!/usr/bin/env bats
# cave-sandbox: hostile tools must be contained by the kernel, and the
# result must say so; ordinary tools must keep working.

load test_helper

setup() {
	setup_cave_env
	TOOLS="$CAVE_ROOT/tests/fixtures/cave-sandbox/tools"
	WS="$BATS_TEST_TMPDIR/ws"
	mkdir -p "$WS"
	listeners=()
	export ANTHROPIC_API_KEY=sk-ant-cave-test-secret-0001
	export CAVE_TEST_TOKEN=cave-test-token-0002
	export MY_SERVICE_TOKEN=svc-token-0003
}

# sbx TOOL EFFECT [INPUT-JSON] [EXTRA-FIELDS-JSON]: runs one tool.request
# through cave-sandbox; the tool.result lands in $result, every line out
# in $BATS_TEST_TMPDIR/out.
sbx() {
	local tool=$1 effect=$2 input=${3:-'{}'} extra=${4:-'{}'}
	jq -cn --arg cmd "$TOOLS/$tool" --arg eff "$effect" --arg ws "$WS" \
		--argjson input "$input" --argjson extra "$extra" \
		'{type:"tool.request",src:"cave-run",v:1,run:"r1",span:"00000000000000aa",seq:1,
		  id:"t1",call_id:"c1",name:"tool",input:$input,effect:$eff,command:$cmd,
		  workspace:$ws,timeout_ms:3000} + $extra' |
		${SBX_ENV:+env "$SBX_ENV"} cave-sandbox --store "$BATS_TEST_TMPDIR/store" --nproc 48 --mem-mb 512 \
			--cpu-sec 5 --fsize-mb 8 --tmp-mb 16 ${SBX_OPTS:-} \
			> "$BATS_TEST_TMPDIR/out"
	sbx_rc=$?
	result=$(jq -c 'select(.type=="tool.result")' "$BATS_TEST_TMPDIR/out")
	output_text=$(jq -r .output <<<"$result")
}

field() { jq -r "$1" <<<"$result"; }

# listen ADDR: a TCP listener on ADDR in the background, stopped by
# teardown; its port lands in $port, and each connection it accepts adds a
# line to $BATS_TEST_TMPDIR/hits.ADDR.
listen() {
	local pf="$BATS_TEST_TMPDIR/port.$1"
	/usr/bin/python3 - "$1" "$pf" "$BATS_TEST_TMPDIR/hits.$1" <<'PY' &
import os, socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(8); s.settimeout(20)
open(sys.argv[2] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
while True:
    try:
        c, a = s.accept()
    except socket.timeout:
        break
    with open(sys.argv[3], "a") as f:
        f.write("hit from %s\n" % a[0])
    c.close()
PY
	listeners+=("$!")
	for _ in $(seq 100); do [ -s "$pf" ] && break; sleep 0.05; done
	port=$(cat "$pf")
}

# hits ADDR: how many connections the listener on ADDR accepted.
hits() { cat "$BATS_TEST_TMPDIR/hits.$1" 2>/dev/null | wc -l; }

# The host's own non-loopback IPv4 address ("" when it has none): a UDP
# connect picks the route and sends nothing.
host_addr() {
	/usr/bin/python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(("192.0.2.1", 9)); print(s.getsockname()[0])
except OSError:
    pass' 2>/dev/null
}

teardown() {
	local p
	for p in "${listeners[@]}"; do kill "$p" 2>/dev/null || true; done
}

# --- ordinary tools ---------------------------------------------------------

@test "a read tool reads a file of its workspace" {
	echo "hello workspace" > "$WS/note.txt"
	sbx read-file read '{"path":"note.txt"}'
	[ "$sbx_rc" -eq 0 ]
	[ "$(field .exit)" = 0 ]
	[ "$output_text" = "hello workspace" ]
	[ "$(field .denied)" = null ]
	[ "$(field .sandbox.mode)" = required ]
	[ "$(field .id)" = t1 ] && [ "$(field .call_id)" = c1 ] && [ "$(field .run)" = r1 ]
	[ "$(field .digest)" = "$(printf 'hello workspace\n' | sha256sum | cut -d' ' -f1)" ]
}

@test "grep runs over the workspace" {
	printf 'alpha\nneedle here\n' > "$WS/a.txt"
	sbx grep-tool read '{"pattern":"needle"}'
	[ "$(field .exit)" = 0 ]
	[[ "$output_text" == *"a.txt:2:needle here"* ]]
}

@test "a write tool writes a file in its workspace" {
	sbx write-file write '{"path":"made.txt","text":"written"}'
	[ "$(field .exit)" = 0 ]
	[ "$(cat "$WS/made.txt")" = written ]
}

@test "stdin carries the input JSON and is then closed" {
	sbx echo-input read '{"q":"x"}'
	[[ "$output_text" == '{"q":"x"}'*"stdin closed" ]]
}

@test "other events pass through unchanged and our own are dropped" {
	printf '%s\n' '{"type":"call.delta","src":"cave-call","v":1,"id":"x","text":"hi"}' \
		'{"type":"tool.result","src":"cave-sandbox","v":1,"id":"old"}' \
		'not json at all' | cave-sandbox > "$BATS_TEST_TMPDIR/o"
	[ "$(sed -n 1p "$BATS_TEST_TMPDIR/o")" = '{"type":"call.delta","src":"cave-call","v":1,"id":"x","text":"hi"}' ]
	[ "$(sed -n 2p "$BATS_TEST_TMPDIR/o")" = 'not json at all' ]
	[ "$(wc -l < "$BATS_TEST_TMPDIR/o")" -eq 2 ]
}

@test "the tool.request itself is passed on for its lap" {
	sbx read-file read '{"path":"/dev/null"}'
	[ "$(jq -r 'select(.type=="tool.request") | .id' "$BATS_TEST_TMPDIR/out")" = t1 ]
}

@test "several tools run at once" {
	for i in 1 2 3; do
		jq -cn --arg cmd "$TOOLS/sleep-short" --arg ws "$WS" --arg id "p$i" \
			'{type:"tool.request",src:"cave-run",id:$id,name:"s",input:{},effect:"read",command:$cmd,workspace:$ws}'
	done > "$BATS_TEST_TMPDIR/reqs"
	start=$(date +%s%N)
	cave-sandbox < "$BATS_TEST_TMPDIR/reqs" > "$BATS_TEST_TMPDIR/o"
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$(jq -r 'select(.type=="tool.result") | .exit' "$BATS_TEST_TMPDIR/o" | grep -c '^0$')" -eq 3 ]
	[ "$ms" -lt 1500 ]
}

# --- refusals ---------------------------------------------------------------

@test "a request without an effect is refused" {
	sbx read-file read '{"path":"x"}' '{"effect":null}'
	[ "$(field .denied.code)" = cave_sandbox_no_effect ]
	[ "$(field .exit)" = null ]
}

@test "host mode under a required ancestor is refused" {
	sbx read-env-key read '{}' '{"sandbox":"host","sandbox_ancestry":["required"]}'
	[ "$(field .denied.code)" = cave_host_sandbox_nested_under_required ]
	[ "$output_text" = "" ]
}

@test "host mode runs on explicit opt-in, still without credentials" {
	sbx write-file write "{\"path\":\"$BATS_TEST_TMPDIR/host-wrote\",\"text\":\"on the host\"}" '{"sandbox":"host"}'
	[ "$(field .sandbox.mode)" = host ]
	[ "$(cat "$BATS_TEST_TMPDIR/host-wrote")" = "on the host" ]
	sbx read-env-key read '{}' '{"sandbox":"host"}'
	[[ "$output_text" != *sk-ant-cave-test* ]]
	[[ "$output_text" == *PATH=* ]]
}

@test "a relative command may not resolve out of the workspace" {
	sbx read-file read '{}' '{"command":"../../etc/passwd"}'
	[ "$(field .denied.code)" = cave_sandbox_bad_path ]
}

# network: true needs /dev/net/tun and slirp4netns; where the machine has
# no tun device, required mode refuses such tools (the tests above), and
# the tests that need a network say why they cannot run.
need_user_network() {
	[ -c /dev/net/tun ] || skip "no /dev/net/tun here: network: true fails closed (tested above)"
}

@test "network: true without slirp4netns fails closed, naming what is missing" {
	sbx net-info read '{}' "{\"network\":true}"
	[ "$(field .exit)" = 0 ] # it runs where slirp4netns is found
	SBX_OPTS="--slirp4netns $BATS_TEST_TMPDIR/no-such/slirp4netns" sbx net-info read '{}' '{"network":true}'
	[ "$(field .denied.code)" = cave_sandbox_unavailable ]
	[[ "$(field .denied.message)" == *"missing slirp4netns ('$BATS_TEST_TMPDIR/no-such/slirp4netns' is not an executable)"* ]]
	[ "$(field .exit)" = null ]
	[ "$output_text" = "" ]
	# the same when PATH has no slirp4netns in it
	SBX_ENV="PATH=$CAVE_ROOT/bin" sbx net-info read '{}' '{"network":true}'
	[ "$(field .denied.code)" = cave_sandbox_unavailable ]
	[[ "$(field .denied.message)" == *"slirp4netns ('slirp4netns' is not in PATH)"* ]]
	[ "$(field .exit)" = null ]
}

@test "network: true fails closed when slirp4netns cannot bring the network up" {
	printf '#!/bin/sh\necho "cannot open /dev/net/tun: test refusal" >&2\nexit 1\n' \
		> "$BATS_TEST_TMPDIR/broken-slirp4netns"
	chmod +x "$BATS_TEST_TMPDIR/broken-slirp4netns"
	SBX_OPTS="--slirp4netns $BATS_TEST_TMPDIR/broken-slirp4netns" sbx net-info read '{}' '{"network":true}'
	[ "$(field .denied.code)" = cave_sandbox_unavailable ]
	[[ "$(field .denied.message)" == "network: slirp4netns did not bring the interface up"*"(slirp4netns: cannot open /dev/net/tun: test refusal)" ]]
	[ "$(field .exit)" = null ]
	[ "$output_text" = "" ]
}

@test "network and host_loopback must be booleans; host_loopback needs network" {
	for req in '{"network":{"host_loopback":true}}' '{"network":true,"host_loopback":"yes"}' \
		   '{"host_loopback":true}' '{"network":false,"host_loopback":true}'; do
		sbx net-info read '{}' "$req"
		[ "$(field .denied.code)" = cave_sandbox_bad_request ] || { echo "$req"; false; }
		[ "$(field .exit)" = null ]
	done
}

@test "required mode fails closed where the kernel cannot do its part" {
	[ -z "${CAVE_SANITIZE:-}" ] || skip "an ASan build cannot map its shadow memory under the sandbox's address-space limit"
	# cave-sandbox run as a tool: inside the sandbox no namespaces can be
	# made, so the inner one must refuse instead of running the tool bare.
	inner=$(jq -cn --arg cmd "$TOOLS/read-env-key" --arg ws "$WS" \
		'{type:"tool.request",src:"cave-run",id:"inner",name:"t",input:{},effect:"read",command:$cmd,workspace:$ws}')
	sbx nested-sandbox read "$inner" "{\"workspace\":\"$CAVE_ROOT\"}"
	inner_result=$(jq -c 'select(.type=="tool.result")' <<<"$output_text")
	[ "$(jq -r .id <<<"$inner_result")" = inner ]
	[ "$(jq -r .denied.code <<<"$inner_result")" = cave_sandbox_unavailable ]
	[[ "$(jq -r .denied.message <<<"$inner_result")" == *namespaces* ]]
	[ "$(jq -r .exit <<<"$inner_result")" = null ]
}

# --- hostile tools ----------------------------------------------------------

@test "hostile: read ~/.ssh keys" {
	mkdir -p "$HOME/.ssh"
	echo "PRIVATE-KEY-MATERIAL" > "$HOME/.ssh/id_rsa"
	sbx read-ssh read "{\"path\":\"$HOME/.ssh/id_rsa\"}"
	[[ "$output_text" != *PRIVATE-KEY-MATERIAL* ]]
	[[ "$output_text" == *"Permission denied"* ]]
	[ "$(field .sandbox.landlock_abi)" -ge 1 ]
}

@test "hostile: read /etc/shadow" {
	sbx read-shadow read
	[[ "$output_text" == *"/etc/shadow: Permission denied"* ]]
	[[ "$output_text" != *"root:"* ]]
}

@test "hostile: read /proc/1/environ" {
	sbx read-proc1-environ read
	[[ "$output_text" != *sk-ant-cave-test* ]]
	[[ "$output_text" != *cave-test-token* ]]
	[[ "$output_text" == *"Permission denied"* ]]
}

@test "hostile: read the run's API key from the environment" {
	sbx read-env-key read
	[ "$(field .exit)" = 0 ]
	[[ "$output_text" == *"PATH=/usr/local/bin:/usr/bin:/bin"* ]]
	[[ "$output_text" != *sk-ant-cave-test* ]]
	[[ "$output_text" != *CAVE_TEST_TOKEN* ]]
	[[ "$output_text" != *svc-token* ]]
	[[ "$output_text" != *"HOME=$HOME"* ]]
}

@test "hostile: write outside the workspace" {
	sbx write-outside write "{\"path\":\"$BATS_TEST_TMPDIR/planted\"}"
	[ ! -e "$BATS_TEST_TMPDIR/planted" ]
	[ ! -e /etc/cave-pwned ]
	[[ "$output_text" == *"Permission denied"* ]]
	[[ "$output_text" != *wrote* ]]
}

@test "hostile: write as an effect: read tool" {
	sbx write-file read '{"path":"made.txt","text":"written"}'
	[ ! -s "$WS/made.txt" ]
	[ "$(field .exit)" != 0 ]
	[[ "$output_text" == *"Permission denied"* ]]
}

@test "hostile: escape through a symlink" {
	echo "OUTSIDE-SECRET" > "$BATS_TEST_TMPDIR/secret.txt"
	mkdir -p "$BATS_TEST_TMPDIR/outdir"
	ln -s "$BATS_TEST_TMPDIR/secret.txt" "$WS/link-to-secret"
	ln -s "$BATS_TEST_TMPDIR/outdir" "$WS/link-to-dir"
	sbx symlink-escape write
	[[ "$output_text" != *OUTSIDE-SECRET* ]]
	[ ! -e "$BATS_TEST_TMPDIR/outdir/planted" ]
	[[ "$output_text" == *"Permission denied"* ]]
}

@test "hostile: escape through .." {
	echo "OUTSIDE-SECRET" > "$BATS_TEST_TMPDIR/secret.txt"
	sbx dotdot-escape write
	[[ "$output_text" != *OUTSIDE-SECRET* ]]
	[ ! -e "$BATS_TEST_TMPDIR/planted" ]
}

@test "hostile: connect to a listener on loopback" {
	/usr/bin/python3 - "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/hits" <<'PY' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4); s.settimeout(4)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
try:
    c, _ = s.accept(); open(sys.argv[2], "w").write("hit")
except socket.timeout:
    pass
PY
	srv=$!
	for _ in $(seq 50); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.05; done
	port=$(cat "$BATS_TEST_TMPDIR/port")
	# the listener is reachable from the host itself
	bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
	sleep 0.2
	[ -e "$BATS_TEST_TMPDIR/hits" ]
	rm -f "$BATS_TEST_TMPDIR/hits"
	/usr/bin/python3 - "$port" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.close()
PY
	sbx connect-loopback read "{\"port\":$port}"
	kill "$srv" 2>/dev/null || true
	[[ "$output_text" == *"connect failed"* ]]
	[[ "$output_text" != *CONNECTED* ]]
	[ ! -e "$BATS_TEST_TMPDIR/hits" ]
}

@test "network: true gives the tool a network of its own" {
	need_user_network
	addr=$(host_addr)
	to='[]'
	if [ -n "$addr" ] && [[ "$addr" != 10.0.2.* ]]; then
		listen "$addr"
		to="[[\"$addr\",$port]]"
	fi
	sbx net-info read "{\"to\":$to}" '{"network":true}'
	[ "$(field .exit)" = 0 ]
	[ "$(field .sandbox.network)" = true ]
	[ "$(field .denied)" = null ]
	[[ "$output_text" == *"ifaces lo tap0"* ]]
	[[ "$output_text" == *"addr 10.0.2.100"* ]]
	[[ "$output_text" == *"resolv nameserver 10.0.2.3"* ]]
	[ -z "$(pgrep -x slirp4netns)" ] # gone with the tool
	[ -n "$addr" ] || skip "this machine has no non-loopback IPv4 address to connect to"
	[[ "$addr" != 10.0.2.* ]] || skip "this machine's address $addr is inside slirp4netns's own 10.0.2.0/24"
	[[ "$output_text" == *"CONNECTED $addr:$port"* ]]
	[ "$(hits "$addr")" -eq 1 ]
}

@test "hostile: network: true cannot reach the host's loopback" {
	need_user_network
	listen 127.0.0.1
	# the listener is reachable from the host itself
	bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
	for _ in $(seq 40); do [ "$(hits 127.0.0.1)" -eq 1 ] && break; sleep 0.05; done
	[ "$(hits 127.0.0.1)" -eq 1 ]
	# 10.0.2.2 is where slirp4netns would map the host's loopback
	sbx net-info read "{\"to\":[[\"127.0.0.1\",$port],[\"10.0.2.2\",$port]]}" '{"network":true}'
	[ "$(field .exit)" = 0 ]
	[[ "$output_text" == *"addr 10.0.2.100"* ]] # it does have a network
	[[ "$output_text" == *"connect 127.0.0.1:$port failed"* ]]
	[[ "$output_text" == *"connect 10.0.2.2:$port failed"* ]]
	[[ "$output_text" != *CONNECTED* ]]
	sleep 0.2
	[ "$(hits 127.0.0.1)" -eq 1 ]
}

@test "network: true with a declared host_loopback reaches the host's loopback at 10.0.2.2" {
	need_user_network
	listen 127.0.0.1
	sbx net-info read "{\"to\":[[\"10.0.2.2\",$port]]}" '{"network":true,"host_loopback":true}'
	[ "$(field .exit)" = 0 ]
	[ "$(field .sandbox.host_loopback)" = true ]
	[[ "$output_text" == *"CONNECTED 10.0.2.2:$port"* ]]
	for _ in $(seq 40); do [ "$(hits 127.0.0.1)" -eq 1 ] && break; sleep 0.05; done
	[ "$(hits 127.0.0.1)" -eq 1 ]
}

@test "hostile: network: false has no network at all" {
	addr=$(host_addr)
	listen 127.0.0.1
	to="[[\"127.0.0.1\",$port],[\"10.0.2.2\",$port]]"
	if [ -n "$addr" ]; then
		lport=$port
		listen "$addr"
		to="[[\"127.0.0.1\",$lport],[\"$addr\",$port]]"
	fi
	sbx net-info read "{\"to\":$to}" '{"network":false}'
	[ "$(field .exit)" = 0 ]
	[ "$(field .sandbox.network)" = false ]
	[[ "$output_text" == *"ifaces lo"$'\n'* ]]
	[[ "$output_text" == *"addr none"* ]]
	[[ "$output_text" != *CONNECTED* ]]
	[ "$(grep -c 'failed' <<<"$output_text")" -eq 2 ]
	sleep 0.2
	[ "$(hits 127.0.0.1)" -eq 0 ]
	[ -z "$addr" ] || [ "$(hits "$addr")" -eq 0 ]
}

@test "hostile: raw and packet sockets and TCP listeners with network: true" {
	need_user_network
	sbx net-sockets read '{}' '{"network":true}'
	[[ "$output_text" == *"tcp MADE"* ]]
	[[ "$output_text" == *"udp MADE"* ]]
	[[ "$output_text" == *"raw refused: [Errno 1]"* ]]
	[[ "$output_text" == *"raw6 refused: [Errno 1]"* ]]
	[[ "$output_text" == *"packet refused: [Errno 1]"* ]]
	[[ "$output_text" == *"bind refused: [Errno 13]"* ]] # Landlock: no TCP bind
	[ "$(field .denied.code)" = cave_sandbox_seccomp ]
	[ "$(field '[.denied.rules[] | select(.syscall=="socket")] | length')" -eq 3 ]
	[ "$(field '.denied.rules[] | select(.rule | test("AF_PACKET")) | .action')" = errno ]
}

@test "hostile: resolve a host name" {
	sbx resolve-host read
	[[ "$output_text" == *"resolve failed"* ]]
	[[ "$output_text" != *RESOLVED* ]]
	[ "$(field .sandbox.network)" = false ]
}

@test "hostile: fork bomb" {
	SBX_OPTS="--nproc 32" sbx fork-bomb read '{}' '{"timeout_ms":1500}'
	[ "$(field .denied.code)" = cave_sandbox_pids_limit ]
	[[ "$(field .denied.message)" == "process limit: pids.max 32 reached, "*"the tool tree was killed at its 1500 ms timeout" ]]
	[ "$(field .denied.pids_refused)" -gt 0 ]
	[ "$(field .timed_out)" = true ]
	[ "$(field .ms)" -lt 4000 ]
	# the tree is gone
	! pgrep -f "$TOOLS/fork-bomb" >/dev/null
}

@test "hostile: memory bomb" {
	sbx memory-bomb read
	[ "$(field .exit)" = 3 ]
	[[ "$output_text" == *"memory refused"* ]]
	[[ "$output_text" != *ALLOCATED* ]]
}

@test "hostile: fill the disk" {
	sbx fill-disk write
	[ "$(field .signal)" = SIGXFSZ ] || [[ "$output_text" == *"tmp rc=1"* ]]
	[[ "$(field .denied.code)" == cave_sandbox_rlimit ]] || [[ "$output_text" == *"No space"* ]]
	if [ -e "$WS/fill" ]; then [ "$(stat -c %s "$WS/fill")" -le $((8 << 20)) ]; fi
}

@test "hostile: print forever" {
	SBX_OPTS="--keep-max 1048576" sbx print-forever read '{}' '{"timeout_ms":800}'
	[ "$(field .timed_out)" = true ]
	[ "$(field .truncated)" = true ]
	[ "$(field .denied.code)" = cave_sandbox_timeout ]
	[ "$(field .size)" -gt 32768 ]
	[ "$(field '.output | length')" -le 32768 ]
	[ "$(field .stored)" = false ]
}

@test "big output is truncated inline and kept whole in the store" {
	sbx print-big read
	[ "$(field .truncated)" = true ]
	[ "$(field .size)" -eq 100000 ]
	[ "$(field '.output | length')" -eq 32768 ]
	[ "$(field .stored)" = true ]
	digest=$(field .digest)
	[ "$(head -c 100000 /dev/zero | tr '\0' a | sha256sum | cut -d' ' -f1)" = "$digest" ]
	[ "$(sha256sum < "$BATS_TEST_TMPDIR/store/$digest" | cut -d' ' -f1)" = "$digest" ]
}

@test "hostile: sleep forever" {
	sbx sleep-forever read '{}' '{"timeout_ms":500}'
	[ "$(field .timed_out)" = true ]
	[ "$(field .signal)" = SIGKILL ]
	[ "$(field .ms)" -lt 2000 ]
	! pgrep -x -f "sleep 100000" >/dev/null
}

@test "hostile: leave a background child holding stdout" {
	sbx background-holder read '{}' '{"timeout_ms":5000}'
	[ "$(field .exit)" = 0 ]
	[ "$(field .timed_out)" = false ]
	[ "$(field .ms)" -lt 2000 ]
	[[ "$output_text" == *"left a child"* ]]
	! pgrep -f "sleep 987654" >/dev/null
}

@test "hostile: ptrace a sibling" {
	sbx ptrace-sibling read '{}' '{"timeout_ms":3000}'
	[ "$(field .denied.code)" = cave_sandbox_seccomp ]
	[ "$(field '.denied.rules[] | select(.syscall=="ptrace") | .action')" = kill ]
	[ "$(field '.denied.rules[] | select(.syscall=="ptrace") | .rule')" = "ptrace: kill" ]
}

@test "hostile: execute a setuid binary" {
	cp /bin/cat "$WS/suid-cat"
	chmod 4755 "$WS/suid-cat"
	sbx setuid-exec read
	[[ "$output_text" == *"CapEff:	0000000000000000"* ]]
	[[ "$output_text" == *"CapPrm:	0000000000000000"* ]]
	[[ "$output_text" == *"NoNewPrivs:	1"* ]]
	[[ "$output_text" != *"uid=0(root) gid"* ]] || [[ "$output_text" == *"CapEff:	0000000000000000"* ]]
}

@test "hostile: mount" {
	sbx mount-fs read
	[[ "$output_text" != *MOUNTED* ]]
	[ "$(field '.denied.rules[] | select(.syscall=="mount") | .rule')" = "mount: errno EPERM" ]
}

@test "hostile: unshare again" {
	sbx unshare-again read
	[[ "$output_text" != *UNSHARED* ]]
	[ "$(field '.denied.rules[] | select(.syscall=="unshare") | .action')" = errno ]
}

@test "hostile: open /dev/mem or a block device" {
	devs=$(find /dev -maxdepth 1 -type b | head -3 | jq -R . | jq -cs .)
	[ "$devs" != "[]" ] || devs='["/dev/null"]'
	sbx open-devices read "{\"devices\":$devs}"
	[[ "$output_text" == *"refused /dev/kmsg"* ]]
	[[ "$output_text" == *"refused $(jq -r '.[0]' <<<"$devs")"* ]]
	[[ "$output_text" != *READ\ /dev/* ]]
}

@test "hostile: kill the parent" {
	printf '%s\n' "$(jq -cn --arg cmd "$TOOLS/kill-parent" --arg ws "$WS" \
		'{type:"tool.request",src:"cave-run",id:"k1",name:"k",input:{},effect:"read",command:$cmd,workspace:$ws}')" \
		"$(jq -cn --arg cmd "$TOOLS/read-env-key" --arg ws "$WS" \
		'{type:"tool.request",src:"cave-run",id:"k2",name:"k",input:{},effect:"read",command:$cmd,workspace:$ws}')" |
		cave-sandbox --jobs 1 > "$BATS_TEST_TMPDIR/o"
	[[ "$(jq -r 'select(.type=="tool.result" and .id=="k1") | .output' "$BATS_TEST_TMPDIR/o")" == *"still here"* ]]
	[ "$(jq -r 'select(.type=="tool.result" and .id=="k2") | .exit' "$BATS_TEST_TMPDIR/o")" = 0 ]
}

@test "a signal aborts the running tool tree and still answers" {
	mkfifo "$BATS_TEST_TMPDIR/in"
	cave-sandbox < "$BATS_TEST_TMPDIR/in" > "$BATS_TEST_TMPDIR/o" &
	pid=$!
	exec 7>"$BATS_TEST_TMPDIR/in"
	jq -cn --arg cmd "$TOOLS/sleep-forever" --arg ws "$WS" \
		'{type:"tool.request",src:"cave-run",id:"a1",name:"s",input:{},effect:"read",command:$cmd,workspace:$ws,timeout_ms:20000}' >&7
	sleep 0.5
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 143 ]
	exec 7>&-
	[ "$(jq -r 'select(.type=="tool.result") | .denied.code' "$BATS_TEST_TMPDIR/o")" = cave_sandbox_aborted ]
	[ "$(jq -r 'select(.type=="tool.result") | .ms' "$BATS_TEST_TMPDIR/o")" -lt 2000 ]
	! pgrep -x -f "sleep 100000" >/dev/null
}
