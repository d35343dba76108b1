#!/usr/bin/python3
"""Validates receipts against the contract, agent-run-receipt.schema.json,
with python3-jsonschema (draft 2020-12): an independent validator.
Usage: validate-receipt.py [FILE...]  (stdin when none; one JSON per file or
the last non-empty line of stdin). Exits 1 naming the first error."""
import json, os, sys
import jsonschema

root = os.environ.get("CAVE_ROOT", os.path.join(os.path.dirname(__file__), ".."))
schema_path = os.environ.get("CAVE_RECEIPT_SCHEMA") or os.path.join(
    root, "..", "shared", "reference", "caveman", "schemas", "agent-run-receipt.schema.json")
if not os.path.exists(schema_path):
    schema_path = os.path.join(root, "schemas", "receipt.schema.json")
schema = json.load(open(schema_path))
validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())

def check(text, name):
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        print(f"{name}: empty", file=sys.stderr); return False
    try:
        doc = json.loads(text) if len(lines) > 1 and text.lstrip().startswith("{\n") else json.loads(lines[-1])
    except ValueError as e:
        print(f"{name}: not JSON: {e}", file=sys.stderr); return False
    errs = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errs[:5]:
        print(f"{name}: {'/'.join(map(str, e.path)) or '(root)'}: {e.message}", file=sys.stderr)
    return not errs

ok = True
if len(sys.argv) > 1:
    for f in sys.argv[1:]:
        ok = check(open(f).read(), f) and ok
else:
    ok = check(sys.stdin.read(), "<stdin>")
sys.exit(0 if ok else 1)
