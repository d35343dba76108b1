/* usage.c: provider usage to the neutral four numbers (DESIGN.md section
 * 3), one table a protocol. It owns the counting rules (what includes what)
 * and must never invent a count: a usage object without the fields that
 * carry input and output is not usage, and an unknown reasoning count stays
 * unknown rather than zero. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "catalog.h"
#include "proto.h"
#include "proto_impl.h"

enum kind { K_INPUT, K_CACHE_READ, K_CACHE_WRITE, K_CACHE_WRITE_1H, K_OUTPUT,
	    K_REASONING };

/* One term: sign * raw[path] added to a kind. required terms must be
 * present for the usage to count as reported. */
struct term {
	enum kind kind;
	int sign;
	const char *path[3];
	bool required;
};

#define T(k, s, req, ...) {k, s, {__VA_ARGS__}, req}

/* Anthropic: input_tokens excludes cache reads and writes; the cache write
 * is cache_creation_input_tokens, its 1-hour part under cache_creation;
 * output_tokens includes thinking, which is not reported apart. */
static const struct term anthropic[] = {
	T(K_INPUT, 1, true, "input_tokens"),
	T(K_CACHE_READ, 1, false, "cache_read_input_tokens"),
	T(K_CACHE_WRITE, 1, false, "cache_creation_input_tokens"),
	T(K_CACHE_WRITE_1H, 1, false, "cache_creation",
	  "ephemeral_1h_input_tokens"),
	T(K_OUTPUT, 1, true, "output_tokens"),
	{0, 0, {NULL}, false},
};

/* OpenAI Chat: prompt_tokens includes the cached tokens; completion_tokens
 * includes the reasoning tokens. */
static const struct term openai_chat[] = {
	T(K_INPUT, 1, true, "prompt_tokens"),
	T(K_INPUT, -1, false, "prompt_tokens_details", "cached_tokens"),
	T(K_CACHE_READ, 1, false, "prompt_tokens_details", "cached_tokens"),
	T(K_OUTPUT, 1, true, "completion_tokens"),
	T(K_REASONING, 1, false, "completion_tokens_details",
	  "reasoning_tokens"),
	{0, 0, {NULL}, false},
};

/* OpenAI Responses: the same rules under other names. */
static const struct term openai_responses[] = {
	T(K_INPUT, 1, true, "input_tokens"),
	T(K_INPUT, -1, false, "input_tokens_details", "cached_tokens"),
	T(K_CACHE_READ, 1, false, "input_tokens_details", "cached_tokens"),
	T(K_OUTPUT, 1, true, "output_tokens"),
	T(K_REASONING, 1, false, "output_tokens_details", "reasoning_tokens"),
	{0, 0, {NULL}, false},
};

/* Gemini: promptTokenCount includes cachedContentTokenCount; tool-use
 * prompt tokens are input billed apart; thoughtsTokenCount is NOT part of
 * candidatesTokenCount. A response with no candidates text may omit
 * candidatesTokenCount, so only the prompt count is required. */
static const struct term gemini[] = {
	T(K_INPUT, 1, true, "promptTokenCount"),
	T(K_INPUT, -1, false, "cachedContentTokenCount"),
	T(K_INPUT, 1, false, "toolUsePromptTokenCount"),
	T(K_CACHE_READ, 1, false, "cachedContentTokenCount"),
	T(K_OUTPUT, 1, false, "candidatesTokenCount"),
	T(K_OUTPUT, 1, false, "thoughtsTokenCount"),
	T(K_REASONING, 1, false, "thoughtsTokenCount"),
	{0, 0, {NULL}, false},
};

#undef T

static const struct term *const tables[CAVE_API_COUNT] = {
	[CAVE_API_ANTHROPIC] = anthropic,
	[CAVE_API_OPENAI_CHAT] = openai_chat,
	[CAVE_API_OPENAI_RESPONSES] = openai_responses,
	[CAVE_API_GEMINI] = gemini,
};

/* raw[path] as a count: 1 found, 0 absent (or null), -1 not a count. */
static int lookup(jv raw, const char *const path[3], int64_t *out)
{
	jv cur = jv_copy(raw);
	int ret = -1;
	for (int i = 0; i < 3 && path[i]; i++) {
		jv next = pj_get(cur, path[i]);
		jv_free(cur);
		cur = next;
		if (!jv_is_valid(cur) || jv_get_kind(cur) == JV_KIND_NULL) {
			ret = 0;
			goto out;
		}
	}
	if (jv_get_kind(cur) == JV_KIND_NUMBER) {
		double d = jv_number_value(cur);
		if (d >= 0 && d <= 9007199254740992.0 &&
		    d == (double)(int64_t)d) {
			*out = (int64_t)d;
			ret = 1;
		}
	}
out:
	jv_free(cur);
	return ret;
}

int cave_usage_from_provider(enum cave_api a, jv raw, struct cave_usage *u)
{
	int64_t sum[K_REASONING + 1] = {0};
	bool seen[K_REASONING + 1] = {false};
	const struct term *t;

	memset(u, 0, sizeof *u);
	if ((int)a < 0 || a >= CAVE_API_COUNT ||
	    jv_get_kind(raw) != JV_KIND_OBJECT)
		return -1;
	for (t = tables[a]; t->sign != 0; t++) {
		int64_t v = 0;
		int r = lookup(raw, t->path, &v);
		if (r < 0 || (r == 0 && t->required))
			return -1;
		if (r == 0)
			continue;
		sum[t->kind] += t->sign * v;
		seen[t->kind] = true;
	}
	for (int k = 0; k <= K_REASONING; k++)
		if (sum[k] < 0)
			return -1; /* a part larger than its whole */
	u->input = sum[K_INPUT];
	u->cache_read = sum[K_CACHE_READ];
	u->cache_write = sum[K_CACHE_WRITE];
	u->cache_write_1h = sum[K_CACHE_WRITE_1H];
	u->output = sum[K_OUTPUT];
	u->reasoning = sum[K_REASONING];
	u->reasoning_known = seen[K_REASONING];
	u->available = true;
	return 0;
}

jv cave_usage_to_jv(const struct cave_usage *u)
{
	if (!u || !u->available)
		return jv_null();
	return JV_OBJECT(jv_string("input"), jv_number((double)u->input),
			 jv_string("cache_read"),
			 jv_number((double)u->cache_read),
			 jv_string("cache_write"),
			 jv_number((double)u->cache_write),
			 jv_string("cache_write_1h"),
			 jv_number((double)u->cache_write_1h),
			 jv_string("output"), jv_number((double)u->output),
			 jv_string("reasoning"),
			 u->reasoning_known ? jv_number((double)u->reasoning)
					    : jv_null());
}

/* usage is borrowed. null is "not reported" (available false, 0); an
 * object needs every count but reasoning, which may be null. */
int cave_usage_from_jv(jv usage, struct cave_usage *u)
{
	static const char *const keys[] = {"input", "cache_read",
					   "cache_write", "cache_write_1h",
					   "output"};
	int64_t *dst[] = {&u->input, &u->cache_read, &u->cache_write,
			  &u->cache_write_1h, &u->output};
	memset(u, 0, sizeof *u);
	if (jv_get_kind(usage) == JV_KIND_NULL)
		return 0;
	if (jv_get_kind(usage) != JV_KIND_OBJECT)
		return -1;
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		int64_t v = pj_int(usage, keys[i]);
		if (v < 0) {
			memset(u, 0, sizeof *u);
			return -1;
		}
		*dst[i] = v;
	}
	if (pj_has(usage, "reasoning")) {
		u->reasoning = pj_int(usage, "reasoning");
		if (u->reasoning < 0) {
			memset(u, 0, sizeof *u);
			return -1;
		}
		u->reasoning_known = true;
	}
	if (u->cache_write_1h > u->cache_write) {
		memset(u, 0, sizeof *u);
		return -1;
	}
	u->available = true;
	return 0;
}
