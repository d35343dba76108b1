#!/usr/bin/python3
"""Cross-checks cave's price catalog against the two public references.

Usage: catalog-crosscheck.py CATALOG.json REFERENCE_DIR CATALOG_README

CATALOG.json is `cave-catalog --json` (the project's own YAML reader, so no
YAML module is needed here). The catalog is validated against
schemas/catalog.schema.json with an independent draft 2020-12 validator, then
every anthropic/openai/google model of the caveman catalog and of pi-ai is
looked up (by name or alias) and its rates compared exactly, as decimals:

  - a caveman model missing from the catalog fails;
  - a pi-ai model missing from the catalog fails unless catalog/README.md
    names it (the list of what was left out, and why);
  - a rate that differs fails unless the entry's `note` names that rate
    (cache_read, cache_write, long_context...). pi-ai has no null, so its 0
    for a cache price is read as "no such price".

Prints one line per problem and exits 1 if there is any.
"""
import json
import os
import re
import sys
from decimal import Decimal

import jsonschema

PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "gemini": "google",
             "google": "google"}
RATE_WORDS = {
    "input": r"\binput\b",
    "output": r"\boutput\b",
    "cache_read": r"cache[_ ]read|cacheRead|cached[- ]input",
    "cache_write_5m": r"cache[_ ]write|cacheWrite",
    "cache_write_1h": r"cache_write_1h|1-hour",
    "long_context": r"long[_ -]context",
}


def dec(v):
    return None if v is None else Decimal(str(v))


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    cat = json.load(open(argv[1]))
    refdir, readme = argv[2], open(argv[3]).read()
    here = os.path.dirname(os.path.abspath(__file__))
    schema = json.load(open(os.path.join(here, "..", "schemas", "catalog.schema.json")))
    problems = []
    for err in jsonschema.Draft202012Validator(schema).iter_errors(cat):
        problems.append("schema: %s: %s" % ("/".join(map(str, err.absolute_path)),
                                            err.message))

    index = {}
    for m in cat.get("models", []):
        for n in [m["name"]] + m.get("aliases", []):
            index[(m["provider"], n)] = m

    def compare(ref_name, m, field, ours, theirs):
        if ours == theirs:
            return 0
        note = m.get("note") or ""
        if re.search(RATE_WORDS[field], note):
            return 1
        problems.append("%s: %s: %s is %s here but %s in %s, and no note says why"
                        % (m["id"], ref_name, field, ours, theirs, ref_name))
        return 0

    noted = checked = 0
    # The caveman reference is YAML: it is read with python3-yaml, a reader
    # independent of the project's own.
    cav_path = os.path.join(refdir, "caveman", "provider-catalog.yaml")
    try:
        import yaml  # Debian: python3-yaml
    except ImportError:
        yaml = None
    if yaml is None:
        problems.append("python3-yaml is missing: cannot read %s" % cav_path)
        cav = []
    else:
        cav = yaml.safe_load(open(cav_path))
    for r in cav:
        prov = PROVIDERS.get(r["provider"])
        if not prov:
            continue
        m = index.get((prov, r["model"]))
        if not m:
            problems.append("caveman: %s/%s is missing from the catalog"
                            % (prov, r["model"]))
            continue
        checked += 1
        p, rates = r["pricing"], m["rates"]
        pairs = [("input", "input_per_million"), ("output", "output_per_million"),
                 ("cache_read", "cache_read_input_per_million"),
                 ("cache_write_5m", "cache_write_input_per_million")]
        if "cache_write_1h_input_per_million" in p:
            pairs.append(("cache_write_1h", "cache_write_1h_input_per_million"))
        for ours, theirs in pairs:
            noted += compare("caveman", m, ours, dec(rates[ours]), dec(p.get(theirs)))
        lc = m.get("long_context")
        mine = (None if not lc else
                (lc["threshold_tokens"], dec(lc["input_multiplier"]),
                 dec(lc["output_multiplier"])))
        t = p.get("long_context_threshold_tokens")
        ref = (None if t is None else
               (t, dec(p.get("long_context_input_multiplier")),
                dec(p.get("long_context_output_multiplier"))))
        noted += compare("caveman", m, "long_context", mine, ref)

    pi = json.load(open(os.path.join(refdir, "pi-ai-0.73.1-models.json")))
    for r in pi:
        prov = PROVIDERS.get(r["provider"])
        if not prov:
            continue
        m = index.get((prov, r["id"]))
        if not m:
            if not re.search(r"`%s`" % re.escape(r["id"]), readme):
                problems.append("pi-ai: %s/%s is neither in the catalog nor listed "
                                "as left out in catalog/README.md" % (prov, r["id"]))
            continue
        checked += 1
        c, rates = r["cost_per_million"], m["rates"]
        for ours, theirs in [("input", "input"), ("output", "output"),
                             ("cache_read", "cacheRead"),
                             ("cache_write_5m", "cacheWrite")]:
            v = dec(c.get(theirs))
            if ours.startswith("cache") and v == 0:
                v = None  # pi-ai writes 0 where there is no such price
            noted += compare("pi-ai", m, ours, dec(rates[ours]), v)

    for p in problems:
        print("catalog-crosscheck: " + p)
    print("catalog-crosscheck: %d catalog models, %d reference entries compared, "
          "%d noted deviations, %d problems"
          % (len(cat.get("models", [])), checked, noted, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
