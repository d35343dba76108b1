#!/usr/bin/python3
"""Seeded SIGKILL-and-resume trials of `cave run` against the fake provider.

Each trial scripts a fake provider (tests/fake-provider) with tool-using
turns and final answers, some streamed slowly and some slow to start, runs
an agent whose read tool takes a while, kills the whole run (its session:
cave run and every member of its ring) with SIGKILL at a seeded moment
(before the first call, in a call, in a stream, in a tool, between turns,
at a random time, or after the end), resumes it with `cave run --resume
ID` (killing the resume too, sometimes), and checks what the run left
against the provider's request log. Budgets are seeded too: ample, tight
enough that a resumed run must stop, or none. Where a kill landed is read
from the journal ("between turns": the next call's intent is on disk and
nothing after it; the head leaves no other gap between turns).
The checks:

- every request the provider answered is in the receipt's calls exactly
  once, or is a call whose outcome the journal does not know: there are no
  more of those than unknown calls, and resume.json then says
  possible_double_count;
- the provider saw no more requests than the journal has call.requests
  (the intent is on disk before any network work);
- each call's cost is the catalog's, to the last digit, and the total is
  their sum;
- under a budget, the receipt keeps the run's max; spent is the total
  plus the worst case of each call that was in flight at a crash, booked
  once (a restored budget.settle); the journal's settlements sum to spent;
  no reservation took the books past max; spent passes max only with
  capBreached;
- one journal line per (src, seq) for every writer of the ring; no key in
  the journal or the receipt; every receipt validates
  (tests/validate-receipt.py, run once over all of them).

Usage: resume-trials.py
  CAVE_TRIALS      trials (default 100)
  CAVE_TRIAL_SEED  the seed (default: a random one, printed)
  CAVE_TRIAL_ONLY  run only trial N of that seed
  CAVE_TRIAL_JOBS  trials at once (default 2)
  CAVE_TRIAL_KEEP  keep the trials' files in this directory
  CAVE_TRIAL_TAMPER  drop|double: spoil each receipt before it is checked
                   (a self-test: each trial that gets that far fails)
Prints the seed first and again on a failure: CAVE_TRIAL_SEED=S replays
the same trials (the same scripts, budgets and kill aims; the clock can
still move a kill by a little). Exit 0 when every trial passed, 1 when one failed, 2 on
bad usage.
"""
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import yaml

ROOT = os.environ.get("CAVE_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, "bin")
FAKE = os.path.join(ROOT, "tests", "fake-provider", "fakeprov.py")
MARKER = "cave-test-secret"
MODEL = "anthropic/claude-haiku-4-5"
PICO = Decimal(10) ** 12
MODES = ["call", "stream", "tool", "between", "time", "time", "end"]
LANDINGS = ["before-first-call", "in-call", "in-stream", "in-tool", "between-turns", "after-end"]


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def pico(x):
    return int(Decimal(x) * PICO)


def rates():
    cat = yaml.safe_load(open(os.path.join(ROOT, "catalog", "current.yaml")))
    m = next(m for m in cat["models"] if m["id"] == MODEL)
    return {k: Decimal(v) if v is not None else Decimal(0) for k, v in m["rates"].items()}


RATES = rates()


def cost(c):
    """A receipt call's list price, from the catalog with exact decimals."""
    return (c["inputTokens"] * RATES["input"] + c["outputTokens"] * RATES["output"]
            + c["cacheReadTokens"] * RATES["cache_read"]
            + c["cacheWriteTokens"] * RATES["cache_write_5m"]) / Decimal(1_000_000)


def script(rng, kills):
    """Tool turns, then enough final answers for every call a kill wastes.
    Each step's usage is its own, so a receipt line names the step."""
    steps, usage = [], {}
    tools = rng.randint(1, 3)
    for j in range(tools + kills + 2):
        u = {"input": 100 + 13 * j, "output": 7 + 3 * j}
        words = " ".join(f"w{j}x{k}" for k in range(rng.randint(3, 9)))
        st = {"usage": u}
        if j < tools:
            st["text"] = f"Looking that up {words}."
            st["tool_calls"] = [{"id": f"toolu_{j}", "name": "lookup_order",
                                 "input": {"order_id": str(1041 + j)}}]
        else:
            st["text"] = f"FINAL {j} {words}."
        r = rng.random()
        if r < 0.45:
            st["chunk_delay_ms"] = rng.randint(4, 20)
        elif r < 0.6:
            st["first_byte_delay_ms"] = rng.randint(20, 100)
        steps.append(st)
        usage[(u["input"], u["output"])] = j
    return {"responses": steps}, usage


def session_pgids(sid):
    """Process groups of the live processes in session sid."""
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if rest[0] != "Z" and int(rest[3]) == sid:
            out.add(int(rest[2]))
    return out


def kill_session(p):
    """SIGKILL to cave run's own group first, then to its ring's group: the
    whole run dies at once, as in a crash."""
    sid = p.pid
    groups = session_pgids(sid)
    for g in [sid] + sorted(groups - {sid}):
        try:
            os.killpg(g, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait()
    for _ in range(200):  # a member forked while we looked
        left = session_pgids(sid)
        if not left:
            return
        for g in left:
            try:
                os.killpg(g, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.002)
    raise Failed(f"session {sid} would not die")


def journal_path(d):
    j = glob.glob(os.path.join(d, ".caveman", "runs", "*", "events.ndjson"))
    return j[0] if j else None


def read_events(path):
    evs = []
    if not path:
        return evs
    with open(path, "rb") as f:
        data = f.read()
    for line in data.split(b"\n")[:-1]:  # a torn last line is not an event
        if line.strip():
            evs.append(json.loads(line, parse_float=Decimal))
    return evs


def landing(evs):
    """Where the kill came, from what the journal holds."""
    head = [e for e in evs if e.get("src") == "cave-run"]
    reqs = [e for e in head if e["type"] == "call.request"]
    if not reqs:
        return "before-first-call"
    if any(e["type"] == "run.end" for e in head):
        return "after-end"
    last = reqs[-1]["id"]
    done = any(e["type"] in ("call.response", "call.error") and e.get("id") == last
               and e.get("final", True) for e in evs)
    if not done:
        if any(e["type"] == "call.delta" and e.get("id") == last for e in evs):
            return "in-stream"
        if any(e["type"] == "budget.reserve" and e.get("id") == last for e in evs):
            return "in-call"
        return "between-turns"  # the next call's intent on disk, nothing after it
    treq = {e["id"] for e in head if e["type"] == "tool.request"}
    tres = {e.get("id") for e in evs if e["type"] == "tool.result"}
    return "in-tool" if treq - tres else "between-turns"


class Trial:
    def __init__(self, n, seed, base, agent):
        self.n, self.rng = n, random.Random(f"{seed}/{n}")
        self.d = os.path.join(base, f"t{n:03d}")
        self.agent = agent
        self.landed = []
        self.fake = None
        self.receipt_path = None
        self.stats = Counter()

    def env(self, port):
        env = {k: v for k, v in os.environ.items()
               if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")
               and k not in ("CAVE_CATALOG", "CAVE_FIXTURES")}
        env["PATH"] = BIN + ":" + env.get("PATH", "/usr/bin:/bin")
        env["HOME"] = self.d
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
        env["ANTHROPIC_API_KEY"] = f"sk-ant-test-{MARKER}-anthropic-0000"
        return env

    def start_fake(self, sc):
        path = os.path.join(self.d, "script.json")
        with open(path, "w") as f:
            json.dump(sc, f)
        portf = os.path.join(self.d, "port")
        self.log = os.path.join(self.d, "requests.ndjson")
        self.fake = subprocess.Popen(
            ["/usr/bin/python3", FAKE, "--script", path, "--log", self.log, "--port-file", portf,
             "--port", "0", "--watch-pid", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.d, "fake.err"), "w"))
        for _ in range(2000):
            if os.path.exists(portf) and os.path.getsize(portf):
                return int(open(portf).read())
            check(self.fake.poll() is None, "the fake provider exited")
            time.sleep(0.005)
        raise Failed("the fake provider did not listen")

    def stop_fake(self):
        if self.fake:
            self.fake.terminate()
            try:
                self.fake.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.fake.kill()
                self.fake.wait()

    def life(self, k, cmd, env, mode):
        """One run of cave run, killed by mode; returns its exit status
        (None when killed)."""
        rng = self.rng
        jp = journal_path(self.d)
        off = os.path.getsize(jp) if jp else 0
        out = open(os.path.join(self.d, f"life{k}.out"), "w")
        err = open(os.path.join(self.d, f"life{k}.err"), "w")
        p = subprocess.Popen(cmd, cwd=self.d, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=err, start_new_session=True)
        try:
            if mode == "final":
                return p.wait(timeout=60)
            if mode == "end":
                p.wait(timeout=60)
                self.landed.append(landing(read_events(journal_path(self.d))))
                return p.returncode
            if mode == "start":
                time.sleep(rng.uniform(0, 0.004))
            elif mode == "time":
                time.sleep(rng.uniform(0, 0.25))
            else:
                want = {"call": b'{"type":"call.request","src":"cave-run"',
                        "stream": b'{"type":"call.delta"',
                        "tool": b'{"type":"tool.request"',
                        "between": b'{"type":"tool.result"'}[mode]
                jitter = {"call": 0.03, "stream": 0.02, "tool": 0.03, "between": 0.0}[mode]
                seen, stop = b"", time.monotonic() + 10
                while p.poll() is None and time.monotonic() < stop:
                    jp = jp or journal_path(self.d)
                    if jp:
                        with open(jp, "rb") as f:
                            f.seek(off + len(seen))
                            seen += f.read()
                        if want in seen:
                            break
                    time.sleep(0.001 if jitter else 0)
                time.sleep(rng.uniform(0, jitter))
            rc = p.poll()
            kill_session(p)
            self.landed.append(landing(read_events(journal_path(self.d))))
            return rc
        finally:
            if p.poll() is None:
                kill_session(p)
            out.close()
            err.close()

    def run(self):
        rng = self.rng
        os.makedirs(self.d)
        kills = rng.choice([1, 1, 1, 2, 2, 3])
        self.max_usd = rng.choice(["0.05", "0.05", "0.05", "0.02", "0.014", None])
        sc, usage = script(rng, kills)
        try:
            env = self.env(self.start_fake(sc))
            cmd = [os.path.join(BIN, "cave-run"), "--quiet"]
            cmd += ["--max-usd", self.max_usd] if self.max_usd else []
            cmd += [self.agent, "Where are my orders?"]
            for k in range(kills):
                mode = rng.choice(MODES + ["start"] * (k == 0) * 2)
                self.life(k, cmd, env, mode)
                runs = glob.glob(os.path.join(self.d, ".caveman", "runs", "*"))
                if not runs:  # died before it made its run directory
                    check(self.requests() == [], "a request without a run directory")
                    return self.landed
                cmd = [os.path.join(BIN, "cave-run"), "--quiet", "--resume",
                       os.path.basename(runs[0])]
            jp = journal_path(self.d)
            if not any(e["type"] == "call.request" for e in read_events(jp)):
                rc = self.life(kills, cmd, env, "final")
                want = 65 if jp else 2  # nothing to resume; no journal at all
                check(rc == want, f"resuming a run that sent no call: exit {rc}, not {want}")
                check(self.requests() == [], "a request the journal has no call.request for")
                return self.landed
            rc = self.life(kills, cmd, env, "final")
            check(rc == 0, f"the last resume exited {rc}: "
                  + open(os.path.join(self.d, f"life{kills}.err")).read()[-400:])
            self.verify(usage)
            return self.landed
        finally:
            self.stop_fake()

    def requests(self):
        with open(self.log) as f:
            return [json.loads(x) for x in f if x.strip()]

    def verify(self, usage):
        jp = journal_path(self.d)
        evs = read_events(jp)
        rdir = os.path.dirname(jp)
        self.receipt_path = os.path.join(rdir, "receipt.json")
        with open(self.receipt_path) as f:
            rtext = f.read()
        r = json.loads(rtext, parse_float=Decimal)
        tamper = os.environ.get("CAVE_TRIAL_TAMPER")
        if tamper == "drop" and r["calls"]:  # spend lost
            r["calls"].pop()
        elif tamper == "double" and r["calls"]:  # spend booked twice
            r["calls"].append(r["calls"][-1])
        side = json.load(open(os.path.join(rdir, "resume.json")))
        check(MARKER not in rtext and MARKER not in open(jp).read(), "a key leaked")

        head = [e for e in evs if e.get("src") == "cave-run"]
        check(sum(e["type"] == "run.start" for e in head) == 1, "not one run.start")
        for src in ("cave-run", "cave-budget", "cave-call", "cave-sandbox"):
            seqs = Counter(e["seq"] for e in evs if e.get("src") == src)
            dup = [q for q, c in seqs.items() if c > 1]
            check(not dup, f"{src}: seq {dup[:3]} journaled twice")
        reqs = [e["id"] for e in head if e["type"] == "call.request"]
        done = {e["id"] for e in evs if e["type"] in ("call.response", "call.error")
                and e.get("final", True)}
        unknown = [i for i in reqs if i not in done]

        # the provider's log against the receipt
        log = self.requests()
        check(len(log) <= len(reqs),
              f"the provider saw {len(log)} requests, the journal has {len(reqs)} call.requests")
        answered = Counter(x["step"] for x in log if x.get("step") is not None)
        check(all(c == 1 for c in answered.values()), "a step answered twice")
        booked = Counter()
        for c in r["calls"]:
            key = (c["inputTokens"], c["outputTokens"])
            check(key in usage, f"a receipt call {key} the script never answered")
            booked[usage[key]] += 1
        twice = [s for s, c in booked.items() if c > 1]
        check(not twice, f"steps {twice} booked twice in the receipt")
        phantom = set(booked) - set(answered)
        check(not phantom, f"steps {sorted(phantom)} in the receipt but never requested")
        lost = set(answered) - set(booked)
        self.stats.update(requests=len(log), booked=len(r["calls"]), lost=len(lost),
                          unknown=len(unknown))
        check(len(lost) <= len(unknown),
              f"requests of steps {sorted(lost)} are not in the receipt, and only "
              f"{len(unknown)} calls are unknown")
        if lost:
            check(side.get("possible_double_count") is True and side["unknown_calls"] >= len(lost),
                  f"steps {sorted(lost)} unaccounted, resume.json says {side}")

        # money
        total = Decimal(0)
        for c in r["calls"]:
            check(Decimal(c["estimatedUsd"]) == cost(c),
                  f"a call costs {c['estimatedUsd']}, the catalog says {cost(c)}")
            total += cost(c)
        check(Decimal(r["totalEstimatedUsd"]) == total,
              f"total {r['totalEstimatedUsd']}, the calls sum to {total}")
        check(r["stopReason"] in ("complete", "budget_exhausted"), f"stopped: {r['stopReason']}")
        if not self.max_usd:  # no budget: nothing booked, nothing held
            check(r["denomination"] == "none" and "spent" not in r, "a budget appeared")
            check(not any(e.get("src") == "cave-budget" and e["type"].startswith("budget.")
                          for e in evs), "budget events without a budget")
            return
        check(Decimal(r["max"]) == Decimal(self.max_usd), f"max {r['max']}, not {self.max_usd}")
        settles = [e for e in evs if e.get("src") == "cave-budget" and e["type"] == "budget.settle"]
        worst = [e for e in settles if e.get("basis") == "unknown_worst_case"]
        ids = Counter(e["id"] for e in worst)
        check(all(c == 1 for c in ids.values()), f"an unknown call booked twice: {ids}")
        check(all(i in unknown for i in ids), "a known call booked at its worst case")
        check(all(e.get("restored") is True for e in worst), "an unknown booking not flagged")
        want = pico(r["totalEstimatedUsd"]) + sum(pico(e["amount"]) for e in worst)
        check(pico(r["spent"]) == want,
              f"spent {r['spent']}, but the calls ({r['totalEstimatedUsd']}) and the worst "
              f"cases of unknown calls ({[str(e['amount']) for e in worst]}) make "
              f"{Decimal(want) / PICO}")
        check(pico(r["spent"]) <= pico(r["max"]) or r["capBreached"], "spent > max, no capBreached")
        # the books, folded from the journal: no reservation passed max
        held, spent, breach = {}, 0, False
        for e in evs:
            if e.get("src") != "cave-budget":
                continue
            if e["type"] == "budget.reserve":
                held[e["id"]] = pico(e["amount"])
                check(breach or spent + sum(held.values()) <= pico(self.max_usd),
                      f"reserve {e['id']}: {Decimal(spent + sum(held.values())) / PICO} "
                      f"held and spent, past max {self.max_usd}")
            elif e["type"] == "budget.settle":
                spent += pico(e["amount"])
                breach = breach or e.get("over_reported", False)
                if e.get("final", True):
                    held.pop(e["id"], None)
        check(spent == pico(r["spent"]), f"the journal's settles make {Decimal(spent) / PICO}, "
              f"the receipt says spent {r['spent']}")
        check(not held, f"holds never settled: {sorted(held)}")
        self.stats.update(worst=len(worst))


def make_agent(base):
    agent = os.path.join(base, "agent")
    shutil.copytree(os.path.join(ROOT, "contrib", "examples", "support"), agent)
    tool = os.path.join(agent, "tools", "slow-lookup")
    with open(tool, "w") as f:  # a read tool that takes a while: kills land in it
        f.write('#!/bin/sh\nsleep 0.03\nexec "$(dirname "$0")/lookup-order"\n')
    os.chmod(tool, 0o755)
    y = os.path.join(agent, "agent.yaml")
    text = open(y).read().replace("model: fixture/", "model: ")
    text = text.replace("command: tools/lookup-order", "command: tools/slow-lookup")
    with open(y, "w") as f:
        f.write(text)
    return agent


def main():
    try:
        trials = int(os.environ.get("CAVE_TRIALS", "100"))
        jobs = int(os.environ.get("CAVE_TRIAL_JOBS", "2"))
        seed = int(os.environ.get("CAVE_TRIAL_SEED") or random.SystemRandom().randrange(1 << 31))
        only = os.environ.get("CAVE_TRIAL_ONLY")
        only = int(only) if only else None
    except ValueError as e:
        print(f"resume-trials: {e}", file=sys.stderr)
        return 2
    keep = os.environ.get("CAVE_TRIAL_KEEP")
    base = tempfile.mkdtemp(prefix="cave-trials.", dir=keep or None)
    print(f"# resume trials: CAVE_TRIAL_SEED={seed} CAVE_TRIALS={trials} in {base}", flush=True)
    agent = make_agent(base)
    t0 = time.monotonic()
    lock = threading.Lock()
    failures, landed, receipts, stats = [], Counter(), [], Counter()

    def one(n):
        t = Trial(n, seed, base, agent)
        try:
            where = t.run()
        except Failed as e:
            with lock:
                failures.append((n, str(e), t.landed))
            return
        except Exception as e:  # a bug in the harness is a failure too
            with lock:
                failures.append((n, f"{type(e).__name__}: {e}", t.landed))
            return
        with lock:
            landed.update(where)
            stats.update(t.stats)
            if t.receipt_path:
                receipts.append(t.receipt_path)

    numbers = [only] if only is not None else range(trials)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, numbers))
    if receipts:
        v = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "validate-receipt.py")]
                           + receipts, stderr=subprocess.PIPE, text=True)
        if v.returncode:
            failures.append((-1, "a receipt does not validate: " + v.stderr.strip(), []))
    secs = time.monotonic() - t0
    print(f"# {len(numbers)} trials, {sum(landed.values())} kills, {secs:.1f} s; kills landed: "
          + ", ".join(f"{k} {landed[k]}" for k in LANDINGS), flush=True)
    print(f"# provider requests {stats['requests']}: in receipts {stats['booked']}, not "
          f"({stats['lost']}) among {stats['unknown']} unknown calls; booked at worst case "
          f"{stats['worst']}", flush=True)
    if only is None and trials >= 50:
        missing = [k for k in LANDINGS if not landed[k]]
        if missing:
            failures.append((-1, f"no kill landed {', '.join(missing)}", []))
    for n, why, where in sorted(failures):
        print(f"FAIL trial {n} (kills landed {where}): {why}", flush=True)
    if failures:
        print(f"# replay: CAVE_TRIAL_SEED={seed} CAVE_TRIALS={trials} tests/resume-trials.py"
              f"  (one trial: CAVE_TRIAL_ONLY=N; files: CAVE_TRIAL_KEEP=DIR)", flush=True)
        return 1
    if not keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
