#!/usr/bin/python3
"""Independent cost check: reads catalog/current.yaml with python3-yaml and a
receipt (stdin), recomputes each call's list price with exact decimals from
its token counts, and fails unless every call and the total match the
receipt to the last digit. Usage: expected-cost.py CATALOG < receipt.json"""
import json, sys
from decimal import Decimal
import yaml

cat = yaml.safe_load(open(sys.argv[1]))
models = {m["id"]: m for m in cat["models"]}
for m in cat["models"]:
    for a in m.get("aliases") or []:
        models.setdefault(m["provider"] + "/" + a, m)
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
M = Decimal(1_000_000)
total = Decimal(0)
for c in r["calls"]:
    mid = c["model"] if c["provider"] == "fixture" else c["provider"] + "/" + c["model"]
    m = models[mid]
    rates = {k: Decimal(v) if v is not None else None for k, v in m["rates"].items()}
    want = (c["inputTokens"] * rates["input"] + c["outputTokens"] * rates["output"]
            + c["cacheReadTokens"] * (rates["cache_read"] or 0)
            + c["cacheWriteTokens"] * (rates["cache_write_5m"] or 0)) / M
    if float(want) != c["estimatedUsd"]:
        sys.exit(f"{mid}: receipt says {c['estimatedUsd']}, catalog gives {want}")
    total += want
if float(total) != r["totalEstimatedUsd"]:
    sys.exit(f"total: receipt says {r['totalEstimatedUsd']}, catalog gives {total}")
print(total)
