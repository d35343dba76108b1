#!/usr/bin/env bats
# The ledger under randomized load, seeded and reproducible. The heavy part
# (1,000 runs of children carving wallets and calls in flight at once, the
# provider reporting random usage up to the worst case and sometimes more)
# is the C stress in tests/unit/test_ledger.c; here it is run under several
# seeds, and the filter itself gets seeded interleavings of wallets, calls
# and responses whose output must keep the ledger's promises.

load test_helper
bats_require_minimum_version 1.5.0

FIX=${BATS_TEST_DIRNAME}/fixtures/cave-budget

setup() {
	setup_cave_env
	export CAVE_CATALOG=$FIX/catalog.yaml
	UNIT=$CAVE_ROOT/build/tests/test_ledger
	[ -x "$UNIT" ] || skip "build/tests/test_ledger not built"
}

@test "ledger stress: 1,000 runs under each of three seeds keep every invariant" {
	for seed in 1 42 20260801; do
		run -0 env CAVE_STRESS_SEED=$seed CAVE_STRESS_RUNS=1000 "$UNIT"
		[[ $output == *"# stress seed $seed runs 1000:"* ]]
		[[ $output != *"not ok"* ]]
	done
}

@test "ledger stress: the same seed gives the same run, another seed another" {
	a=$(CAVE_STRESS_SEED=7 "$UNIT" | grep '^# stress')
	b=$(CAVE_STRESS_SEED=7 "$UNIT" | grep '^# stress')
	c=$(CAVE_STRESS_SEED=8 "$UNIT" | grep '^# stress')
	[ -n "$a" ] && [ "$a" = "$b" ]
	[ "${a#*checksum }" != "${c#*checksum }" ]
}

# gen SEED: a random stream for the filter: a root and child spans carving
# wallets, calls in several spans in flight at once, responses (in any
# order) reporting usage no larger than any admitted reservation (at most
# the 96-token input ceiling, and the smaller of the request's allowance
# and half the output floor), child ends
gen() {
	/usr/bin/python3 - "$1" <<-'EOF'
	import json, random, sys
	r = random.Random(int(sys.argv[1]))
	run, root = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "a" * 16
	def ev(t, span, **kw):
	    d = {"type": t, "src": "cave-run", "v": 1, "run": run, "span": span}
	    d.update(kw)
	    print(json.dumps(d, separators=(",", ":")))
	ev("run.start", root, agent="stress")
	spans, flight, n = [root], [], 0
	for step in range(r.randint(20, 80)):
	    op = r.random()
	    if op < 0.15 and len(spans) < 8:
	        child = "%016x" % r.getrandbits(64)
	        ev("budget.carve", r.choice(spans), child_span=child,
	           amount=round(r.uniform(0, 0.02), 6))
	        spans.append(child)
	    elif op < 0.6:
	        n += 1
	        span = r.choice(spans)
	        mo = r.randint(1, 3000)
	        ev("call.request", span, id="c%d" % n, provider="anthropic",
	           model="budget-test", api="anthropic-messages",
	           messages=[{"role": "user", "content": "hi"}],
	           max_output_tokens=mo)
	        flight.append((span, "c%d" % n, mo))
	    elif op < 0.95 and flight:
	        span, cid, mo = flight.pop(r.randrange(len(flight)))
	        d = {"type": "call.response", "src": "cave-call", "v": 1, "run": run,
	             "span": span, "id": cid, "usage_basis": "provider_reported",
	             "usage": {"input": r.randint(0, 96), "cache_read": 0,
	                       "cache_write": 0, "cache_write_1h": 0,
	                       "output": r.randint(0, min(mo, 128)), "reasoning": None}}
	        print(json.dumps(d, separators=(",", ":")))
	    elif len(spans) > 1:
	        ev("run.end", spans.pop(r.randrange(1, len(spans))), stop_reason="complete")
	EOF
}

# check: the filter's output (stdin) keeps the ledger's promises
check() {
	/usr/bin/python3 -c '
import json, sys
from decimal import Decimal as D
evs = [json.loads(l, parse_float=D) for l in sys.stdin]
reserved, settled, fail = {}, {}, []
for e in evs:
    t, src = e["type"], e["src"]
    if t == "budget.reserve":
        reserved[(e["span"], e["id"])] = e["amount"]
    elif t == "call.request":
        if (e["span"], e["id"]) not in reserved:
            fail.append("call %s passed without a reservation" % e["id"])
    elif t == "budget.settle":
        k = (e["span"], e["id"])
        if k not in reserved:
            fail.append("settle without a reservation")
        elif e["amount"] > reserved[k]:
            fail.append("settle above its reservation")
        settled[k] = e["amount"]
    elif t == "budget.state":
        if e["cap_breached"]:
            fail.append("breach without an over-report")
        if e["spent"] + e["reserved"] > e["released"]:
            fail.append("used past released in %s" % e["span"])
        if e["spent"] > e["max"]:
            fail.append("spent past max")
root = [e for e in evs if e["type"] == "budget.state" and e["span"] == "a" * 16]
if root and root[-1]["spent"] != sum(settled.values(), D(0)):
    fail.append("root spent %s is not the sum of settles %s" % (root[-1]["spent"], sum(settled.values())))
if not reserved:
    fail.append("nothing was reserved")
print("\n".join(fail))
sys.exit(1 if fail else 0)
'
}

@test "filter stress: 100 seeded interleavings of wallets, calls and responses" {
	stops=0
	for seed in $(seq 1 100); do
		gen "$seed" > in.ndjson
		cave-budget --max-usd 0.05 --max-model-calls 1000 < in.ndjson > out.ndjson ||
			{ echo "seed $seed: exit $?"; return 1; }
		check < out.ndjson || { echo "seed $seed"; return 1; }
		stops=$((stops + $(jq -s '[.[] | select(.type=="run.stop")] | length' out.ndjson)))
	done
	# the budget was tight enough that some calls were stopped
	[ "$stops" -gt 0 ]
}
