/* test_receipt.c: the receipt fold (lib/receipt.c) against a tiny test
 * catalog: exact money, unpriced and unavailable calls, budget fields,
 * tranches, tools, stop reasons, run ids, calls of unknown outcome. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "receipt.h"
#include "tap.h"

#define RUN "2b1c9a4e-8f3d-4c2a-9e1b-7d6f5a4c3b21"
#define ENV "\"v\":1,\"run\":\"" RUN "\",\"span\":\"a1b2c3d4e5f60718\""

static const struct cave_catalog *cat;

/* Folds one JSON event line; returns the fold's result. */
static int fold(struct cave_receipt *r, const char *json)
{
	jv ev = jv_parse(json);
	cave_err e;
	int rc;

	if (!jv_is_valid(ev)) {
		printf("# bad test JSON: %s\n", json);
		jv_free(ev);
		return -2;
	}
	rc = cave_receipt_fold(r, ev, &e);
	jv_free(ev);
	return rc;
}

/* A member of the receipt, dumped as compact JSON (caller frees). */
static char *dump_at(jv rj, const char *path)
{
	jv p = jv_parse(path), v = jv_getpath(jv_copy(rj), p), s;
	char *out;

	s = jv_dump_string(v, 0);
	out = strdup(jv_string_value(s));
	jv_free(s);
	return out;
}

static int count(jv rj, const char *key)
{
	jv a = jv_object_get(jv_copy(rj), jv_string(key));
	int n = jv_get_kind(a) == JV_KIND_ARRAY ? jv_array_length(jv_copy(a)) : -1;

	jv_free(a);
	return n;
}

/* A USD member as pico-USD (-1 when it is not a number). */
static long long usd_pico(jv rj, const char *path)
{
	jv v = jv_getpath(jv_copy(rj), jv_parse(path));
	long long p = jv_get_kind(v) == JV_KIND_NUMBER ? cave_receipt_pico(jv_number_value(v)) : -1;

	jv_free(v);
	return p;
}

static void check(jv rj, const char *path, const char *want, const char *name)
{
	char *got = dump_at(rj, path);

	is_str(got, want, name);
	free(got);
}

static const char *response(const char *id, const char *provider,
			    const char *model, const char *usage, char *buf,
			    size_t n)
{
	snprintf(buf, n,
		 "{\"type\":\"call.response\",\"src\":\"cave-call\"," ENV ",\"id\":\"%s\","
		 "\"provider\":\"%s\",\"model\":\"%s\",\"content\":[{\"type\":\"text\","
		 "\"text\":\"SECRET-TEXT\"}],\"usage\":%s,\"usage_basis\":\"%s\"}",
		 id, provider, model, usage,
		 strcmp(usage, "null") ? "provider_reported" : "unavailable");
	return buf;
}

static void test_exact_pricing(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, response("c1", "anthropic", "claude-test",
			 "{\"input\":1000,\"cache_read\":200,\"cache_write\":100,"
			 "\"cache_write_1h\":0,\"output\":500,\"reasoning\":null}", b, sizeof b));
	rj = cave_receipt_jv(r);
	check(rj, "[\"calls\",0,\"estimatedUsd\"]", "0.010935", "anthropic call priced to the last digit");
	check(rj, "[\"totalEstimatedUsd\"]", "0.010935", "total equals the one call");
	check(rj, "[\"totalTokens\"]", "1800", "total tokens: input + cache + output");
	check(rj, "[\"calls\",0,\"reasoningTokens\"]", "0", "unknown reasoning is 0 in the receipt");
	check(rj, "[\"unpriced\"]", "false", "a priced run is not unpriced");
	jv_free(rj);
	cave_receipt_free(r);
}

/* 0.1 + 0.2 in floating point is 0.30000000000000004; in pico-USD it is 0.3 */
static void test_exact_sum(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, response("c1", "openai", "gpt-test",
			 "{\"input\":80000,\"cache_read\":0,\"cache_write\":0,"
			 "\"cache_write_1h\":0,\"output\":0,\"reasoning\":0}", b, sizeof b));
	fold(r, response("c2", "openai", "gpt-test",
			 "{\"input\":160000,\"cache_read\":0,\"cache_write\":0,"
			 "\"cache_write_1h\":0,\"output\":0,\"reasoning\":0}", b, sizeof b));
	rj = cave_receipt_jv(r);
	check(rj, "[\"calls\",0,\"estimatedUsd\"]", "0.1", "first call 0.1");
	check(rj, "[\"calls\",1,\"estimatedUsd\"]", "0.2", "second call 0.2");
	check(rj, "[\"totalEstimatedUsd\"]", "0.3", "the sum is exact, not 0.30000000000000004");
	jv_free(rj);
	cave_receipt_free(r);
}

static void test_long_context_and_fixture(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, response("g1", "google", "gemini-test",
			 "{\"input\":150000,\"cache_read\":60000,\"cache_write\":0,"
			 "\"cache_write_1h\":0,\"output\":2000,\"reasoning\":500}", b, sizeof b));
	fold(r, response("f1", "fixture", "anthropic/claude-test",
			 "{\"input\":100,\"cache_read\":0,\"cache_write\":0,"
			 "\"cache_write_1h\":0,\"output\":10,\"reasoning\":null}", b, sizeof b));
	rj = cave_receipt_jv(r);
	check(rj, "[\"calls\",0,\"estimatedUsd\"]", "0.4422", "long-context multipliers apply");
	check(rj, "[\"calls\",0,\"reasoningTokens\"]", "500", "reasoning tokens reported");
	check(rj, "[\"calls\",1,\"estimatedUsd\"]", "0.00045", "a fixture prices as the model it impersonates");
	check(rj, "[\"calls\",1,\"provider\"]", "\"fixture\"", "the fixture provider is named as it was");
	check(rj, "[\"totalEstimatedUsd\"]", "0.44265", "total of both");
	jv_free(rj);
	cave_receipt_free(r);
}

static void test_unpriced(void)
{
	struct cave_receipt *r = cave_receipt_new(cat), *nocat = cave_receipt_new(NULL);
	const char *u = "{\"input\":10,\"cache_read\":0,\"cache_write\":0,"
			"\"cache_write_1h\":0,\"output\":5,\"reasoning\":null}";
	char b[1024];
	jv rj;

	fold(r, response("c1", "openai", "gpt-mystery", u, b, sizeof b));
	fold(r, response("c2", "openai", "gpt-noprice", u, b, sizeof b));
	fold(r, response("c3", "openai", "gpt-test", u, b, sizeof b));
	rj = cave_receipt_jv(r);
	check(rj, "[\"calls\",0,\"unpriced\"]", "true", "a model the catalog lacks is unpriced");
	check(rj, "[\"calls\",0,\"estimatedUsd\"]", "0", "an unpriced call carries 0, flagged");
	check(rj, "[\"calls\",1,\"unpriced\"]", "true", "a listed model without rates is unpriced");
	check(rj, "[\"calls\",2,\"unpriced\"]", "false", "a priced call beside them is priced");
	check(rj, "[\"unpriced\"]", "true", "the receipt says some call is unpriced");
	is_int(usd_pico(rj, "[\"totalEstimatedUsd\"]"), 62500000,
	       "the total holds the priced call only (0.0000625)");
	check(rj, "[\"totalTokens\"]", "45", "tokens of unpriced calls still count");
	jv_free(rj);
	fold(nocat, response("c1", "openai", "gpt-test", u, b, sizeof b));
	rj = cave_receipt_jv(nocat);
	check(rj, "[\"unpriced\"]", "true", "without a catalog every call is unpriced");
	jv_free(rj);
	cave_receipt_free(r);
	cave_receipt_free(nocat);
}

static void test_unavailable(void)
{
	struct cave_receipt *r = cave_receipt_new(cat), *t = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, "{\"type\":\"call.request\",\"src\":\"x\"," ENV ",\"id\":\"c1\","
		"\"provider\":\"openai\",\"model\":\"gpt-test\"}");
	is_int(fold(r, "{\"type\":\"budget.reserve\",\"src\":\"cave-budget\"," ENV
		       ",\"id\":\"c1\",\"amount\":0.02,\"max_output_tokens\":2000,"
		       "\"clamped_output_tokens\":1500}"), 0, "reserve folds");
	fold(r, "{\"type\":\"budget.state\",\"src\":\"cave-budget\"," ENV
		",\"denomination\":\"usd\",\"max\":1,\"released\":1,\"spent\":0.02,"
		"\"cap_breached\":false,\"overspent\":0}");
	fold(r, response("c1", "openai", "gpt-test", "null", b, sizeof b));
	fold(r, response("c2", "openai", "gpt-test", "null", b, sizeof b));
	rj = cave_receipt_jv(r);
	check(rj, "[\"calls\",0,\"usageBasis\"]", "\"unavailable\"", "usage basis unavailable");
	check(rj, "[\"calls\",0,\"inputTokens\"]", "0", "no tokens without usage");
	check(rj, "[\"calls\",0,\"estimatedUsd\"]", "0.02", "the worst case held stands in for it");
	check(rj, "[\"calls\",0,\"unpriced\"]", "false", "a worst-case estimate is a price");
	check(rj, "[\"calls\",0,\"clampedOutputTokens\"]", "1500", "clamp from the matching reserve");
	check(rj, "[\"calls\",1,\"unpriced\"]", "true", "no reserve, no usage: unpriced");
	check(rj, "[\"calls\",1,\"clampedOutputTokens\"]", "null", "no clamp where none was reserved");
	check(rj, "[\"unpriced\"]", "true", "the receipt says so");
	jv_free(rj);
	/* a token budget's reserve is not money */
	fold(t, "{\"type\":\"budget.reserve\",\"src\":\"cave-budget\"," ENV
		",\"id\":\"c1\",\"amount\":9000}");
	fold(t, "{\"type\":\"budget.state\",\"src\":\"cave-budget\"," ENV
		",\"denomination\":\"tokens\",\"max\":20000,\"released\":20000,\"spent\":0,"
		"\"cap_breached\":false,\"overspent\":0}");
	fold(t, response("c1", "openai", "gpt-test", "null", b, sizeof b));
	rj = cave_receipt_jv(t);
	check(rj, "[\"calls\",0,\"unpriced\"]", "true", "a token reserve does not price a call");
	check(rj, "[\"denomination\"]", "\"tokens\"", "token denomination");
	check(rj, "[\"max\"]", "20000", "token max");
	jv_free(rj);
	cave_receipt_free(r);
	cave_receipt_free(t);
}

static void test_budget(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	jv rj = cave_receipt_jv(r);

	check(rj, "[\"denomination\"]", "\"none\"", "no budget: denomination none");
	check(rj, "[\"capBreached\"]", "false", "no budget: not breached");
	check(rj, "[\"overspent\"]", "0", "no budget: overspent 0");
	check(rj, "[\"max\"]", "null", "no budget: no max");
	check(rj, "[\"stopReason\"]", "\"complete\"", "default stop reason");
	check(rj, "[\"agentId\"]", "\"adhoc\"", "default agent");
	check(rj, "[\"calls\"]", "[]", "no calls");
	jv_free(rj);
	fold(r, "{\"type\":\"budget.state\",\"src\":\"cave-budget\"," ENV
		",\"denomination\":\"usd\",\"max\":0.5,\"released\":0.5,\"spent\":0,"
		"\"cap_breached\":false,\"overspent\":0}");
	fold(r, "{\"type\":\"budget.state\",\"src\":\"cave-budget\"," ENV
		",\"denomination\":\"usd\",\"max\":0.5,\"released\":0.75,\"spent\":0.5123,"
		"\"cap_breached\":true,\"overspent\":0.0123}");
	is_int(fold(r, "{\"type\":\"budget.state\",\"src\":\"cave-budget\"," ENV
		       ",\"denomination\":\"euro\"}"), -1, "an unknown denomination is refused");
	rj = cave_receipt_jv(r);
	check(rj, "[\"denomination\"]", "\"usd\"", "denomination from the last state");
	check(rj, "[\"released\"]", "0.75", "released from the last state");
	check(rj, "[\"spent\"]", "0.5123", "spent from the last state");
	check(rj, "[\"capBreached\"]", "true", "an over-report is recorded");
	check(rj, "[\"overspent\"]", "0.0123", "overspent as it was, not clamped");
	jv_free(rj);
	cave_receipt_free(r);
}

static void test_tranches_tools(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, response("c1", "openai", "gpt-test",
			 "{\"input\":1,\"cache_read\":0,\"cache_write\":0,"
			 "\"cache_write_1h\":0,\"output\":1}", b, sizeof b));
	is_int(fold(r, "{\"type\":\"budget.release\",\"src\":\"control\"," ENV
		       ",\"amount\":0.25,\"reason\":\"topup\",\"at_call\":3}"), 0, "release folds");
	fold(r, "{\"type\":\"budget.release\",\"src\":\"control\"," ENV ",\"amount\":0.1}");
	is_int(fold(r, "{\"type\":\"budget.release\",\"src\":\"control\"," ENV
		       ",\"amount\":0}"), -1, "a zero tranche is refused");
	fold(r, "{\"type\":\"tool.result\",\"src\":\"cave-sandbox\"," ENV
		",\"id\":\"t1\",\"name\":\"ls\",\"exit\":0,\"output\":\"SECRET-TOOL\",\"denied\":false}");
	fold(r, "{\"type\":\"tool.result\",\"src\":\"cave-sandbox\"," ENV
		",\"id\":\"t2\",\"name\":\"ls\",\"exit\":1,\"denied\":false}");
	fold(r, "{\"type\":\"tool.result\",\"src\":\"cave-sandbox\"," ENV
		",\"id\":\"t3\",\"name\":\"rm\",\"exit\":null,\"denied\":true}");
	fold(r, "{\"type\":\"tool.result\",\"src\":\"cave-sandbox\"," ENV
		",\"id\":\"t4\",\"name\":\"cat\",\"exit\":null,\"signal\":9}");
	rj = cave_receipt_jv(r);
	check(rj, "[\"tranches\"]",
	      "[{\"amount\":0.25,\"reason\":\"topup\",\"atCall\":3},"
	      "{\"amount\":0.1,\"reason\":\"release\",\"atCall\":1}]",
	      "tranches in order, atCall defaults to calls so far");
	check(rj, "[\"tools\"]",
	      "[{\"name\":\"ls\",\"calls\":2,\"errors\":1},"
	      "{\"name\":\"rm\",\"calls\":1,\"errors\":1},"
	      "{\"name\":\"cat\",\"calls\":1,\"errors\":1}]",
	      "tools: calls and errors (exit, denial, signal)");
	{
		jv s = jv_dump_string(jv_copy(rj), 0);

		ok(!strstr(jv_string_value(s), "SECRET"), "the receipt is content-blind");
		jv_free(s);
	}
	jv_free(rj);
	cave_receipt_free(r);
}

static void test_stop_and_run(void)
{
	struct cave_receipt *r = cave_receipt_new(cat), *n = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, "{\"type\":\"call.delta\",\"src\":\"cave-call\",\"v\":1,"
		"\"run\":\"7c0e5f3a-1d2b-4e8f-a9c6-3b5d7e9f1a2c\",\"id\":\"c1\",\"text\":\"x\"}");
	fold(r, "{\"type\":\"run.start\",\"src\":\"cave-run\"," ENV ",\"agent\":\"coder\"}");
	fold(r, "{\"type\":\"run.stop\",\"src\":\"cave-budget\"," ENV ",\"reason\":\"budget_exhausted\"}");
	is_int(fold(r, "{\"type\":\"run.stop\",\"src\":\"x\"," ENV ",\"reason\":\"bored\"}"), -1,
	       "an unknown stop reason is refused");
	rj = cave_receipt_jv(r);
	check(rj, "[\"runId\"]", "\"" RUN "\"", "run.start names the run");
	check(rj, "[\"agentId\"]", "\"coder\"", "run.start names the agent");
	check(rj, "[\"stopReason\"]", "\"budget_exhausted\"", "run.stop's reason");
	jv_free(rj);
	fold(r, "{\"type\":\"run.end\",\"src\":\"cave-run\"," ENV ",\"stop_reason\":\"deadline\"}");
	rj = cave_receipt_jv(r);
	check(rj, "[\"stopReason\"]", "\"deadline\"", "run.end's reason wins");
	jv_free(rj);

	rj = cave_receipt_jv(n);
	{
		char *id = dump_at(rj, "[\"runId\"]");

		ok(strlen(id) == 38 && id[15] == '4', "no run named: a fresh UUID v4 (%s)", id);
		free(id);
	}
	jv_free(rj);
	fold(n, response("c1", "openai", "gpt-test", "null", b, sizeof b));
	rj = cave_receipt_jv(n);
	check(rj, "[\"runId\"]", "\"" RUN "\"", "else the first event names the run");
	jv_free(rj);
	is_int(fold(n, "{\"type\":\"run.start\",\"src\":\"x\",\"run\":\"not-a-uuid\"}"), -1,
	       "a run.start run that is not a UUID is refused");
	cave_receipt_free(r);
	cave_receipt_free(n);
}

static void test_outcomes(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	const char *u = "{\"input\":40,\"cache_read\":0,\"cache_write\":0,"
			"\"cache_write_1h\":0,\"output\":0}";
	char b[1024];
	jv rj;

	fold(r, "{\"type\":\"call.request\",\"src\":\"x\"," ENV ",\"id\":\"c1\","
		"\"provider\":\"openai\",\"model\":\"gpt-test\"}");
	fold(r, "{\"type\":\"call.request\",\"src\":\"x\"," ENV ",\"id\":\"c2\","
		"\"provider\":\"openai\",\"model\":\"gpt-test\"}");
	is_int(cave_receipt_unknown_calls(r), 2, "two calls in flight");
	fold(r, "{\"type\":\"call.error\",\"src\":\"cave-call\"," ENV ",\"id\":\"c1\","
		"\"code\":\"http_529\",\"final\":false}");
	is_int(cave_receipt_unknown_calls(r), 2, "a retried error leaves the call in flight");
	snprintf(b, sizeof b, "{\"type\":\"call.error\",\"src\":\"cave-call\"," ENV
		 ",\"id\":\"c1\",\"code\":\"malformed_stream\",\"final\":true,"
		 "\"usage\":%s,\"usage_basis\":\"provider_reported\"}", u);
	fold(r, b);
	is_int(cave_receipt_unknown_calls(r), 1, "a final error settles the outcome");
	fold(r, response("c2", "openai", "gpt-test", u, b, sizeof b));
	is_int(cave_receipt_unknown_calls(r), 0, "a response settles the outcome");
	is_int(fold(r, response("c2", "openai", "gpt-test", u, b, sizeof b)), -1,
	       "a second response to one call is refused");
	rj = cave_receipt_jv(r);
	is_int(count(rj, "calls"), 2, "error with usage and response: two calls, no double count");
	check(rj, "[\"calls\",0,\"model\"]", "\"gpt-test\"", "the error names its model from the request");
	check(rj, "[\"totalEstimatedUsd\"]", "0.0001", "both priced: 2 x 40 tokens at 1.25");
	jv_free(rj);
	cave_receipt_free(r);
}

static void test_subagents(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	char b[1024];
	jv rj;

	fold(r, "{\"type\":\"run.start\",\"src\":\"cave-run\"," ENV "}");
	fold(r, "{\"type\":\"call.request\",\"src\":\"x\",\"v\":1,\"run\":\"" RUN "\","
		"\"span\":\"cccccccccccccccc\",\"id\":\"k1\",\"provider\":\"openai\",\"model\":\"gpt-test\"}");
	snprintf(b, sizeof b, "{\"type\":\"call.response\",\"src\":\"cave-call\",\"v\":1,"
		 "\"run\":\"" RUN "\",\"span\":\"cccccccccccccccc\",\"id\":\"k1\","
		 "\"provider\":\"openai\",\"model\":\"gpt-test\",\"usage\":{\"input\":80000,"
		 "\"cache_read\":0,\"cache_write\":0,\"cache_write_1h\":0,\"output\":0}}");
	fold(r, b);
	rj = cave_receipt_jv(r);
	check(rj, "[\"calls\"]", "[]", "a subagent's call is not the root's");
	is_int(count(rj, "subagents"), 1, "it is a subagent");
	check(rj, "[\"subagents\",0,\"totalEstimatedUsd\"]", "0.1", "priced inside the subagent");
	check(rj, "[\"totalEstimatedUsd\"]", "0.1", "the root's total holds the tree");
	jv_free(rj);
	cave_receipt_free(r);
}

static void test_wants_and_write(void)
{
	struct cave_receipt *r = cave_receipt_new(cat);
	char dir[] = "/tmp/test_receipt.XXXXXX", path[64], line[4096];
	cave_err e;
	FILE *f;
	jv rj, back;

	ok(cave_receipt_wants("call.response", 13), "wants call.response");
	ok(!cave_receipt_wants("call.delta", 10), "skips call.delta");
	ok(!cave_receipt_wants("call.res", 8), "a prefix is not a type");
	rj = cave_receipt_jv(r);
	ok(mkdtemp(dir) != NULL, "temp dir");
	snprintf(path, sizeof path, "%s/receipt.json", dir);
	is_int(cave_receipt_write(path, rj, &e), 0, "receipt written");
	f = fopen(path, "r");
	ok(f && fgets(line, sizeof line, f), "receipt read back");
	back = jv_parse(line);
	ok(jv_equal(jv_copy(rj), back), "the file holds the receipt");
	if (f)
		fclose(f);
	unlink(path);
	snprintf(path, sizeof path, "%s/no/such/receipt.json", dir);
	is_int(cave_receipt_write(path, rj, &e), -1, "an unwritable path fails");
	rmdir(dir);
	jv_free(rj);
	cave_receipt_free(r);
}

int main(void)
{
	const char *root = getenv("CAVE_ROOT");
	char path[4096];
	cave_err e;
	struct cave_catalog *c;

	snprintf(path, sizeof path, "%s/tests/fixtures/cave-receipt/catalog.yaml",
		 root ? root : ".");
	c = cave_catalog_load(path, &e);
	if (!ok(c != NULL, "test catalog loads")) {
		printf("# %s\n", e.msg);
		return tap_done();
	}
	cat = c;
	test_exact_pricing();
	test_exact_sum();
	test_long_context_and_fixture();
	test_unpriced();
	test_unavailable();
	test_budget();
	test_tranches_tools();
	test_stop_and_run();
	test_outcomes();
	test_subagents();
	test_wants_and_write();
	cave_catalog_free(c);
	return tap_done();
}
