/* test_catalog.c: lib/catalog.c: exact decimals, table-driven pricing (each
 * kind, the 1-hour split, long context, unpriced, overflow), lookups by
 * name, alias, id and fixture, and refusal of malformed catalogs. The
 * shipped catalog is checked too when CAVE_ROOT is set. */
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "tap.h"

static const char good[] =
	"schema: cave.catalog.v1\n"
	"version: \"t\"\n"
	"models:\n"
	"  - id: acme/big\n"
	"    provider: acme\n"
	"    name: big\n"
	"    api: anthropic-messages\n"
	"    aliases: [big-2026, big-latest]\n"
	"    rates: {input: \"3\", output: \"15\", cache_read: \"0.3\", cache_write_5m: \"3.75\", cache_write_1h: \"6\"}\n"
	"    long_context: {threshold_tokens: 200000, input_multiplier: \"2\", output_multiplier: \"1.5\"}\n"
	"    context_window: 1000000\n"
	"    max_output: 64000\n"
	"    reasoning: true\n"
	"    sources: [https://example.com/pricing]\n"
	"    verified: \"2026-11-30\"\n"
	"  - id: acme/small\n"
	"    provider: acme\n"
	"    name: small\n"
	"    api: openai-responses\n"
	"    rates: {input: \"0.075\", output: \"0.3\", cache_read: null, cache_write_5m: null, cache_write_1h: null}\n"
	"    context_window: 8192\n"
	"    max_output: null\n"
	"    reasoning: false\n"
	"    sources: [https://example.com/pricing]\n"
	"    verified: \"2026-11-30\"\n"
	"  - id: other/big\n"
	"    provider: other\n"
	"    name: big\n"
	"    api: gemini\n"
	"    rates: {input: null, output: \"1\", cache_read: null, cache_write_5m: null, cache_write_1h: null}\n"
	"    reasoning: false\n"
	"    sources: [https://example.com/pricing]\n"
	"    verified: \"2026-11-30\"\n"
	"    note: no input price\n";

static struct cave_catalog *parse(const char *text, cave_err *e)
{
	return cave_catalog_parse(text, strlen(text), "t.yaml", e);
}

/* Replaces the first occurrence of from in good by to; caller frees. */
static char *mutate(const char *from, const char *to)
{
	const char *at = strstr(good, from);
	size_t n = strlen(good) - strlen(from) + strlen(to) + 1;
	char *s = malloc(n);
	if (!at) {
		snprintf(s, n, "%s", "not found");
		return s;
	}
	snprintf(s, n, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
	return s;
}

static void refuses(const char *from, const char *to, const char *want, const char *name)
{
	cave_err e = { { 0 }, { 0 }, 0 };
	char *text = mutate(from, to);
	struct cave_catalog *c = parse(text, &e);
	int good_err = !c && strstr(e.msg, want) && !strcmp(e.code, "catalog");
	ok(good_err, "malformed: %s", name);
	if (!good_err)
		printf("#   got '%s', want '%s'\n", c ? "(loaded)" : e.msg, want);
	cave_catalog_free(c);
	free(text);
}

static void decimals(void)
{
	static const struct { const char *s; int scale; int rc; int64_t want; } t[] = {
		{ "0.075", 6, 0, 75000 },
		{ "3", 6, 0, 3000000 },
		{ "0.01875", 6, 0, 18750 },
		{ "0", 6, 0, 0 },
		{ "007.5", 6, 0, 7500000 },
		{ "1.500000000", 6, 0, 1500000 }, /* zeros past scale are exact */
		{ "0.0000001", 6, -1, 0 },        /* finer than scale */
		{ "1.25e0", 6, -1, 0 },
		{ "", 6, -1, 0 },
		{ ".5", 6, -1, 0 },
		{ "5.", 6, -1, 0 },
		{ "+1", 6, -1, 0 },
		{ " 1", 6, -1, 0 },
		{ "1 ", 6, -1, 0 },
		{ "0x10", 6, -1, 0 },
		{ "-2.5", 3, 0, -2500 },
		{ "9223372036854.775807", 6, 0, INT64_MAX },
		{ "9223372036854.775808", 6, -1, 0 },     /* overflow */
		{ "99999999999999999999", 0, -1, 0 },
		{ "1", 19, -1, 0 },                       /* scale out of range */
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		int64_t v = -7;
		int rc = cave_decimal_parse(t[i].s, t[i].scale, &v);
		char name[80];
		snprintf(name, sizeof name, "decimal_parse('%s', %d)", t[i].s, t[i].scale);
		if (t[i].rc == 0)
			ok(rc == 0 && v == t[i].want, "%s = %lld", name, (long long)t[i].want);
		else
			ok(rc == -1, "%s refused", name);
	}
	{
		static const struct { int64_t pico; const char *want; } f[] = {
			{ 0, "0" },
			{ 1, "0.000000000001" },
			{ 1500000000, "0.0015" },
			{ 1000000000000, "1" },
			{ 1234500000000, "1.2345" },
			{ -250000000000, "-0.25" },
			{ INT64_MAX, "9223372.036854775807" },
			{ INT64_MIN, "-9223372.036854775808" },
		};
		for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
			char out[32];
			char name[80];
			snprintf(name, sizeof name, "usd_format(%lld)", (long long)f[i].pico);
			is_str(cave_usd_format(f[i].pico, out), f[i].want, name);
		}
	}
	{
		jv n = cave_usd_jv(1500000000);
		jv s = jv_dump_string(n, 0);
		is_str(jv_string_value(s), "0.0015", "usd_jv dumps the exact decimal");
		jv_free(s);
		n = cave_usd_jv(INT64_C(999999999999999)); /* 999.999999999999 */
		s = jv_dump_string(n, 0);
		is_str(jv_string_value(s), "999.999999999999", "usd_jv exact at 15 digits");
		jv_free(s);
	}
}

struct price_case {
	const char *name;
	const char *id;
	struct cave_usage u;
	int rc;
	int64_t pico;
};

static void pricing(const struct cave_catalog *c)
{
	const int64_t M = 1000000;
	const struct price_case t[] = {
		{ "input only", "acme/big", { .input = 100000, .available = true }, 0, 100000 * 3 * M },
		{ "output only", "acme/big", { .output = 1000, .available = true }, 0, 15000 * M },
		{ "one token of input", "acme/big", { .input = 1, .available = true }, 0, 3000000 },
		{ "cache read", "acme/big", { .cache_read = 1000, .available = true }, 0, 300 * M },
		{ "cache write is 5m by default", "acme/big",
		  { .cache_write = 1000, .available = true }, 0, 3750 * M },
		{ "1h part at the 1h rate, rest at 5m", "acme/big",
		  { .cache_write = 1000, .cache_write_1h = 400, .available = true }, 0,
		  INT64_C(600) * 3750000 + INT64_C(400) * 6000000 },
		{ "all 1h", "acme/big",
		  { .cache_write = 10, .cache_write_1h = 10, .available = true }, 0, 60 * M },
		{ "every kind", "acme/big",
		  { .input = 100, .cache_read = 200, .cache_write = 300, .cache_write_1h = 100,
		    .output = 50, .reasoning = 20, .reasoning_known = true, .available = true },
		  0, 100 * 3 * M + 200 * 300000 + 200 * 3750000 + 100 * 6 * M + 50 * 15 * M },
		{ "at the threshold: no long context", "acme/big",
		  { .input = 150000, .cache_read = 50000, .output = 10, .available = true }, 0,
		  150000 * 3 * M + INT64_C(50000) * 300000 + 10 * 15 * M },
		{ "one past: every input kind x2, output x1.5", "acme/big",
		  { .input = 150000, .cache_read = 50000, .cache_write = 1, .output = 10,
		    .available = true }, 0,
		  2 * (150000 * 3 * M + INT64_C(50000) * 300000 + 3750000) + 10 * 15 * M * 3 / 2 },
		{ "long context rounds up per side", "acme/big",
		  { .input = 200001, .output = 1, .available = true }, 0,
		  2 * 200001 * 3 * M + 22500000 },
		{ "by alias", "acme/big-2026", { .input = 1, .available = true }, 0, 3 * M },
		{ "fixture prices as its target", "fixture/acme/big-latest",
		  { .output = 2, .available = true }, 0, 30 * M },
		{ "sub-cent rate", "acme/small", { .input = 3, .available = true }, 0, 225000 },
		{ "zero usage costs zero", "acme/small", { .available = true }, 0, 0 },
		{ "null cache rate, used: unpriced", "acme/small",
		  { .input = 1, .cache_read = 1, .available = true }, -1, 0 },
		{ "null 1h rate, used: unpriced", "acme/small",
		  { .cache_write = 1, .cache_write_1h = 1, .available = true }, -1, 0 },
		{ "null cache rate, unused: priced", "acme/small",
		  { .input = 1, .output = 1, .available = true }, 0, 75000 + 300000 },
		{ "no input price: unpriced even for output", "other/big",
		  { .output = 1, .available = true }, -1, 0 },
		{ "usage unavailable: unpriced", "acme/big", { .input = 1 }, -1, 0 },
		{ "unknown model: unpriced", "acme/nope", { .input = 1, .available = true }, -1, 0 },
		{ "negative count refused", "acme/big", { .input = -1, .available = true }, -1, 0 },
		{ "1h part larger than the whole refused", "acme/big",
		  { .cache_write = 1, .cache_write_1h = 2, .available = true }, -1, 0 },
		{ "overflow refused, not wrapped", "acme/big",
		  { .output = INT64_MAX / 1000, .available = true }, -1, 0 },
		{ "overflow in the sum refused", "acme/big",
		  { .input = INT64_MAX / 3000000, .output = INT64_MAX / 15000000,
		    .available = true }, -1, 0 },
		{ "overflow in the prompt size refused", "acme/small",
		  { .input = INT64_MAX, .cache_read = 1, .available = true }, -1, 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		int64_t got = -42;
		int rc = cave_price_usage(cave_catalog_find_id(c, t[i].id), &t[i].u, &got);
		if (t[i].rc == 0) {
			ok(rc == 0 && got == t[i].pico, "price: %s", t[i].name);
			if (rc != 0 || got != t[i].pico)
				printf("#   rc %d, got %lld, want %lld\n", rc, (long long)got,
				       (long long)t[i].pico);
		} else {
			ok(rc == -1 && got == -42, "price: %s", t[i].name);
		}
	}
	ok(cave_price_usage(NULL, &t[0].u, &(int64_t){ 0 }) == -1, "price: NULL model");
}

static void lookups(const struct cave_catalog *c)
{
	const struct cave_model *m = cave_catalog_find(c, "acme", "big");
	ok(m && !strcmp(m->id, "acme/big"), "find by provider and name");
	ok(cave_catalog_find(c, "acme", "big-latest") == m, "find by alias");
	ok(cave_catalog_find_id(c, "acme/big-2026") == m, "find_id by alias");
	ok(cave_catalog_find(c, "other", "big") != m, "same name, other provider");
	ok(cave_catalog_find(c, "other", "big-2026") == NULL, "aliases are per provider");
	ok(cave_catalog_find(c, "fixture", "acme/big") == m, "fixture P/M finds P/M");
	ok(cave_catalog_find_id(c, "fixture/acme/big") == m, "fixture id finds P/M");
	ok(cave_catalog_find(c, "fixture", "fixture/acme/big") == NULL,
	   "a fixture of a fixture is unknown");
	ok(cave_catalog_find(c, "fixture", "big") == NULL, "fixture without provider");
	ok(cave_catalog_find_id(c, "big") == NULL, "id without provider");
	ok(cave_catalog_find_id(c, "/big") == NULL, "id with empty provider");
	ok(cave_catalog_find(c, "acme", "BIG") == NULL, "names are case-sensitive");
	ok(m && m->priced && m->reasoning && m->context_window == 1000000 &&
	   m->max_output == 64000, "limits and flags read");
	ok(m && m->rates.lc_threshold == 200000 && m->rates.lc_in_mult_milli == 2000 &&
	   m->rates.lc_out_mult_milli == 1500, "long context read in thousandths");
	m = cave_catalog_find_id(c, "acme/small");
	ok(m && m->rates.input == 75000 && m->rates.cache_read == CAVE_RATE_UNKNOWN &&
	   m->max_output == 0 && m->rates.lc_threshold == 0, "null rates are unknown");
	m = cave_catalog_find_id(c, "other/big");
	ok(m && !m->priced, "a model without an input price is unpriced");
	is_int(cave_catalog_count(c), 3, "count");
	ok(cave_catalog_at(c, 3) == NULL, "at past the end");
	{
		char want[CAVE_SHA256_HEX];
		cave_sha256_hex(good, strlen(good), want);
		is_str(cave_catalog_digest(c), want, "digest is sha256 of the bytes");
	}
	{
		jv j = cave_catalog_json(c);
		jv id = jv_object_get(jv_array_get(jv_object_get(j, jv_string("models")), 1),
				      jv_string("id"));
		is_str(jv_string_value(id), "acme/small", "json keeps model order");
		jv_free(id);
	}
}

static void malformed(void)
{
	refuses("input: \"3\"", "input: 3", "model 'acme/big': 'input' must be a quoted",
		"unquoted rate");
	refuses("input: \"3\"", "input: \"-3\"", "'input' must be a quoted non-negative",
		"negative rate");
	refuses("input: \"3\"", "input: \"3.0000001\"", "at most 6 decimals",
		"rate finer than a micro-USD");
	refuses("cache_read: \"0.3\", ", "", "'rates' lacks 'cache_read'", "missing rate key");
	refuses("output: \"15\"", "output: \"15\", outptu: \"1\"", "unknown key 'outptu'",
		"misspelt rate key");
	refuses("  - id: acme/small\n    provider: acme\n    name: small\n",
		"  - id: acme/big\n    provider: acme\n    name: big\n",
		"model 'acme/big': duplicate id", "duplicate id");
	refuses("  - id: acme/small\n    provider: acme\n    name: small\n    api: openai-responses\n",
		"  - id: acme/small\n    provider: acme\n    name: small\n    api: openai-responses\n"
		"    aliases: [big-latest]\n",
		"alias 'big-latest' also names 'acme/big'", "duplicate alias");
	refuses("  - id: acme/small\n    provider: acme\n    name: small\n    api: openai-responses\n",
		"  - id: acme/small\n    provider: acme\n    name: small\n    api: openai-responses\n"
		"    aliases: [big]\n",
		"alias 'big' is the name of 'acme/big'", "alias shadows a name");
	refuses("id: acme/small", "id: acme/tiny", "'id' must be provider/name", "id mismatch");
	refuses("api: gemini", "api: grpc", "model 'other/big': unknown api", "unknown api");
	refuses("reasoning: true", "reasoning: yes", "'reasoning' must be true or false",
		"YAML 1.1 boolean");
	refuses("threshold_tokens: 200000", "threshold_tokens: 0", "must be positive",
		"zero threshold");
	refuses("sources: [https://example.com/pricing]\n    verified: \"2026-11-30\"\n  - id: acme/small",
		"sources: []\n    verified: \"2026-11-30\"\n  - id: acme/small",
		"'sources' must be a non-empty list", "no sources");
	refuses("schema: cave.catalog.v1", "schema: cave.catalog.v9", "'schema' must be",
		"wrong schema");
	refuses("name: big\n    api: anthropic", "name: big\n    name: big\n    api: anthropic",
		"t.yaml:7:5: duplicate key 'name'", "duplicate key names line and column");
	refuses("provider: acme\n    name: big\n", "provider: fixture\n    name: big\n",
		"'id' must be provider/name", "fixture id mismatch");
	{
		cave_err e = { { 0 }, { 0 }, 0 };
		struct cave_catalog *c = cave_catalog_load("/nonexistent/cat.yaml", &e);
		ok(!c && strstr(e.msg, "cannot open '/nonexistent/cat.yaml'"),
		   "missing file named");
	}
	{
		cave_err e = { { 0 }, { 0 }, 0 };
		setenv("CAVE_CATALOG", "/nonexistent/env.yaml", 1);
		struct cave_catalog *c = cave_catalog_load(NULL, &e);
		ok(!c && strstr(e.msg, "/nonexistent/env.yaml"), "CAVE_CATALOG is honoured");
		unsetenv("CAVE_CATALOG");
	}
}

static void shipped(void)
{
	const char *root = getenv("CAVE_ROOT");
	char path[4096];
	cave_err e = { { 0 }, { 0 }, 0 };
	struct cave_catalog *c;

	if (!root) {
		ok(1, "# skip CAVE_ROOT not set");
		return;
	}
	snprintf(path, sizeof path, "%s/catalog/current.yaml", root);
	c = cave_catalog_load(path, &e);
	ok(c != NULL, "the shipped catalog loads");
	if (!c) {
		printf("#   %s\n", e.msg);
		return;
	}
	ok(cave_catalog_count(c) >= 20, "the shipped catalog has models");
	for (size_t i = 0; i < cave_catalog_count(c); i++) {
		const struct cave_model *m = cave_catalog_at(c, i);
		if (!m->priced)
			ok(0, "shipped model %s is priced", m->id);
	}
	{
		static const char *const ids[] = {
			"anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5-20250929",
			"openai/gpt-5.5-2026-04-23", "google/gemini-2.5-pro",
			"gemini/gemini-2.5-flash", NULL
		};
		for (size_t i = 0; ids[i]; i++)
			ok(cave_catalog_find_id(c, ids[i]) != NULL, "shipped catalog knows %s",
			   ids[i]);
	}
	{
		struct cave_usage u = { .input = 1000, .output = 1000, .available = true };
		int64_t p = 0;
		ok(cave_price_usage(cave_catalog_find_id(c, "anthropic/claude-haiku-4-5"), &u,
				    &p) == 0 && p == 6000 * INT64_C(1000000),
		   "haiku-4-5: 1k in + 1k out = 0.006 USD");
	}
	cave_catalog_free(c);
}

int main(void)
{
	cave_err e = { { 0 }, { 0 }, 0 };
	struct cave_catalog *c = parse(good, &e);

	decimals();
	ok(c != NULL, "a good catalog loads");
	if (!c)
		printf("#   %s\n", e.msg);
	else {
		pricing(c);
		lookups(c);
		cave_catalog_free(c);
	}
	malformed();
	shipped();
	return tap_done();
}
