/* bill.c: renders a receipt object as a bill a person reads (bill.h).
 * It reads the receipt only, so any receipt (a journal's, a subagent's)
 * bills the same way. It must never present money as anything but an
 * estimated list-price subtotal, and never call a difference a saving. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "bill.h"
#include "catalog.h"
#include "event.h"
#include "receipt.h"

#define BASIS "estimated list-price subtotal"

/* A member of o (borrowed), or jv_invalid; a new jv. */
static jv member(jv o, const char *key)
{
	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return jv_invalid();
	return jv_object_get(jv_copy(o), jv_string(key));
}

/* A member (borrowed receipt) as pico-USD, 0 when absent. */
static int64_t pico_of(jv o, const char *key)
{
	jv v = member(o, key);
	int64_t p = 0;

	if (jv_get_kind(v) == JV_KIND_NUMBER)
		p = cave_receipt_pico(jv_number_value(v));
	jv_free(v);
	return p;
}

/* A budget amount in its denomination: USD as a plain decimal, tokens as
 * an integer. */
static int add_amount(struct cave_buf *out, jv o, const char *key,
		      bool usd)
{
	char s[32];
	jv v = member(o, key);
	int ret;

	if (jv_get_kind(v) != JV_KIND_NUMBER)
		ret = cave_buf_addf(out, " %s -", key);
	else if (usd)
		ret = cave_buf_addf(out, " %s %s", key,
				    cave_usd_format(cave_receipt_pico(jv_number_value(v)), s));
	else
		ret = cave_buf_addf(out, " %s %" PRId64, key,
				    (int64_t)jv_number_value(v));
	jv_free(v);
	return ret;
}

struct tally {
	unsigned long unpriced, unavailable, worst_case;
};

static int add_call(struct cave_buf *out, jv c, int n, struct tally *t)
{
	char usd[32], model[96];
	bool unpriced = cave_jv_bool(c, "unpriced", true);
	bool unavailable = strcmp(cave_jv_str(c, "usageBasis", ""), "unavailable") == 0;
	int64_t clamp = cave_jv_int(c, "clampedOutputTokens", -1);
	const char *note = "";

	snprintf(model, sizeof model, "%s/%s", cave_jv_str(c, "provider", "?"),
		 cave_jv_str(c, "model", "?"));
	cave_usd_format(pico_of(c, "estimatedUsd"), usd);
	if (unpriced) {
		t->unpriced++;
		note = unavailable ? "  UNPRICED, USAGE UNAVAILABLE" : "  UNPRICED";
	} else if (unavailable) {
		t->worst_case++;
		note = "  usage unavailable: worst case held";
	}
	t->unavailable += unavailable;
	if (unavailable) {
		if (cave_buf_addf(out, "  %3d  %-40s %10s %10s %10s %10s %10s  %s%s",
				  n, model, "-", "-", "-", "-", "-",
				  unpriced ? "-" : usd, note) < 0)
			return -1;
	} else if (cave_buf_addf(out, "  %3d  %-40s %10" PRId64 " %10" PRId64 " %10" PRId64
				 " %10" PRId64 " %10" PRId64 "  %s%s", n, model,
				 cave_jv_int(c, "inputTokens", 0),
				 cave_jv_int(c, "cacheReadTokens", 0),
				 cave_jv_int(c, "cacheWriteTokens", 0),
				 cave_jv_int(c, "outputTokens", 0),
				 cave_jv_int(c, "reasoningTokens", 0),
				 unpriced ? "-" : usd, note) < 0) {
		return -1;
	}
	if (clamp >= 0 && cave_buf_addf(out, "  (output clamped to %" PRId64 ")", clamp) < 0)
		return -1;
	return cave_buf_addc(out, '\n');
}

static int add_list_counts(struct cave_buf *out, jv r)
{
	static const char *const keys[] = {
		"subagents", "tranches", "breakers", "compactions", NULL,
	};
	int ret = cave_buf_adds(out, "events:");

	for (size_t i = 0; ret == 0 && keys[i]; i++) {
		jv a = member(r, keys[i]);
		int n = jv_get_kind(a) == JV_KIND_ARRAY ? jv_array_length(jv_copy(a)) : 0;

		jv_free(a);
		ret = cave_buf_addf(out, " %s %d", keys[i], n);
	}
	return ret < 0 ? -1 : cave_buf_addc(out, '\n');
}

int cave_bill_format(jv r, unsigned long unknown_calls, struct cave_buf *out)
{
	struct tally t = { 0, 0, 0 };
	jv calls = member(r, "calls");
	jv tools = member(r, "tools");
	const char *denom = cave_jv_str(r, "denomination", "none");
	char usd[32];
	int ret = -1, n = 0;

	if (cave_buf_addf(out, "run %s  agent %s  stop %s\n",
			  cave_jv_str(r, "runId", "?"), cave_jv_str(r, "agentId", "?"),
			  cave_jv_str(r, "stopReason", "?")) < 0 ||
	    cave_buf_addf(out, "  %3s  %-40s %10s %10s %10s %10s %10s  %s\n", "#",
			  "model", "input", "cache rd", "cache wr", "output",
			  "reasoning", "USD") < 0)
		goto out;
	if (jv_get_kind(calls) == JV_KIND_ARRAY) {
		jv_array_foreach(calls, i, c) {
			int rc = add_call(out, c, i + 1, &t);

			jv_free(c);
			if (rc < 0)
				goto out;
			n++;
		}
	}
	if (n == 0 && cave_buf_adds(out, "  (no model calls)\n") < 0)
		goto out;
	if (jv_get_kind(tools) == JV_KIND_ARRAY && jv_array_length(jv_copy(tools)) > 0) {
		if (cave_buf_adds(out, "tools:") < 0)
			goto out;
		jv_array_foreach(tools, i, tl) {
			int rc = cave_buf_addf(out, "%s %s %" PRId64 " calls %" PRId64 " errors",
					       i ? "," : "", cave_jv_str(tl, "name", "?"),
					       cave_jv_int(tl, "calls", 0),
					       cave_jv_int(tl, "errors", 0));

			jv_free(tl);
			if (rc < 0)
				goto out;
		}
		if (cave_buf_addc(out, '\n') < 0)
			goto out;
	}
	if (strcmp(denom, "none") == 0) {
		if (cave_buf_adds(out, "budget: none\n") < 0)
			goto out;
	} else {
		bool is_usd = strcmp(denom, "usd") == 0;

		if (cave_buf_addf(out, "budget: %s", is_usd ? "USD" : "tokens") < 0 ||
		    add_amount(out, r, "max", is_usd) < 0 ||
		    add_amount(out, r, "released", is_usd) < 0 ||
		    add_amount(out, r, "spent", is_usd) < 0 ||
		    add_amount(out, r, "overspent", is_usd) < 0 ||
		    cave_buf_adds(out, cave_jv_bool(r, "capBreached", false)
				  ? "  CAP BREACHED\n" : "\n") < 0)
			goto out;
	}
	if (add_list_counts(out, r) < 0 ||
	    cave_buf_addf(out, "total: %" PRId64 " tokens, USD %s (%s%s)\n",
			  cave_jv_int(r, "totalTokens", 0),
			  cave_usd_format(pico_of(r, "totalEstimatedUsd"), usd), BASIS,
			  cave_jv_bool(r, "unpriced", true) ? ", INCOMPLETE: unpriced calls" : "") < 0)
		goto out;
	if (t.unpriced && cave_buf_addf(out,
			"UNPRICED: %lu call%s could not be priced from the catalog; "
			"the total leaves %s out, it is not $0\n", t.unpriced,
			t.unpriced == 1 ? "" : "s", t.unpriced == 1 ? "it" : "them") < 0)
		goto out;
	if (cave_jv_bool(r, "unpriced", false) && !t.unpriced &&
	    cave_buf_adds(out, "UNPRICED: a subagent has calls the catalog could not price\n") < 0)
		goto out;
	if (t.unavailable && cave_buf_addf(out,
			"USAGE UNAVAILABLE: %lu call%s had no provider-reported usage"
			"%s\n", t.unavailable, t.unavailable == 1 ? "" : "s",
			t.worst_case ? "; the worst case held for it is counted" : "") < 0)
		goto out;
	if (unknown_calls && cave_buf_addf(out,
			"UNKNOWN OUTCOME: %lu call%s in flight when the events ended; "
			"%s may have been billed and %s not in the total\n", unknown_calls,
			unknown_calls == 1 ? "" : "s", unknown_calls == 1 ? "it" : "they",
			unknown_calls == 1 ? "is" : "are") < 0)
		goto out;
	ret = 0;
out:
	jv_free(calls);
	jv_free(tools);
	return ret;
}
