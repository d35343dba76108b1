/* test_usage.c: provider usage to the neutral numbers, one table a
 * provider: cached tokens inside OpenAI and Gemini prompt counts, Gemini
 * thoughts outside candidates, Anthropic cache writes and their 1-hour
 * part, reasoning unknown as null (never zero), bad counts refused; and the
 * neutral object to and from the struct. */
#include <string.h>
#include <jv.h>

#include "catalog.h"
#include "proto.h"
#include "tap.h"

struct row {
	const char *name;
	const char *raw;
	const char *want; /* neutral usage JSON, or NULL: refused */
};

static void run(enum cave_api a, const struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		jv raw = jv_parse(rows[i].raw);
		struct cave_usage u;
		int rc = cave_usage_from_provider(a, raw, &u);
		if (!rows[i].want) {
			is_int(rc, -1, rows[i].name);
		} else {
			jv got = rc == 0 ? cave_usage_to_jv(&u) : jv_invalid();
			jv want = jv_parse(rows[i].want);
			jv gs = jv_dump_string(jv_copy(got), JV_PRINT_SORTED);
			int eq = rc == 0 && jv_equal(got, want);
			ok(eq, "%s", rows[i].name);
			if (!eq)
				printf("#   rc %d, got %s\n", rc,
				       jv_is_valid(gs) ? jv_string_value(gs) : "-");
			jv_free(gs);
		}
		jv_free(raw);
	}
}

static const struct row anthropic[] = {
	{"anthropic: plain", "{\"input_tokens\":10,\"output_tokens\":5}",
	 "{\"input\":10,\"cache_read\":0,\"cache_write\":0,\"cache_write_1h\":0,"
	 "\"output\":5,\"reasoning\":null}"},
	{"anthropic: input excludes cache reads and writes",
	 "{\"input_tokens\":3,\"cache_read_input_tokens\":1000,"
	 "\"cache_creation_input_tokens\":2000,\"output_tokens\":40}",
	 "{\"input\":3,\"cache_read\":1000,\"cache_write\":2000,"
	 "\"cache_write_1h\":0,\"output\":40,\"reasoning\":null}"},
	{"anthropic: the 1-hour cache write part",
	 "{\"input_tokens\":3,\"cache_read_input_tokens\":0,"
	 "\"cache_creation_input_tokens\":2000,\"cache_creation\":"
	 "{\"ephemeral_5m_input_tokens\":1500,\"ephemeral_1h_input_tokens\":500},"
	 "\"output_tokens\":40,\"server_tool_use\":{\"web_search_requests\":1}}",
	 "{\"input\":3,\"cache_read\":0,\"cache_write\":2000,"
	 "\"cache_write_1h\":500,\"output\":40,\"reasoning\":null}"},
	{"anthropic: null counts are absent",
	 "{\"input_tokens\":3,\"cache_read_input_tokens\":null,"
	 "\"cache_creation_input_tokens\":null,\"output_tokens\":1}",
	 "{\"input\":3,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":1,\"reasoning\":null}"},
	{"anthropic: no output count is not usage", "{\"input_tokens\":3}", NULL},
	{"anthropic: negative count", "{\"input_tokens\":-3,\"output_tokens\":1}",
	 NULL},
	{"anthropic: fractional count",
	 "{\"input_tokens\":1.5,\"output_tokens\":1}", NULL},
	{"anthropic: string count",
	 "{\"input_tokens\":\"1\",\"output_tokens\":1}", NULL},
	{"anthropic: not an object", "[1,2]", NULL},
};

static const struct row chat[] = {
	{"chat: prompt includes cached",
	 "{\"prompt_tokens\":1117,\"completion_tokens\":46,\"total_tokens\":1163,"
	 "\"prompt_tokens_details\":{\"cached_tokens\":1024},"
	 "\"completion_tokens_details\":{\"reasoning_tokens\":0}}",
	 "{\"input\":93,\"cache_read\":1024,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":46,\"reasoning\":0}"},
	{"chat: completion includes reasoning",
	 "{\"prompt_tokens\":50,\"completion_tokens\":300,"
	 "\"completion_tokens_details\":{\"reasoning_tokens\":256}}",
	 "{\"input\":50,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":300,\"reasoning\":256}"},
	{"chat: no details: reasoning unknown",
	 "{\"prompt_tokens\":50,\"completion_tokens\":3}",
	 "{\"input\":50,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":3,\"reasoning\":null}"},
	{"chat: cached over prompt is refused",
	 "{\"prompt_tokens\":5,\"completion_tokens\":3,"
	 "\"prompt_tokens_details\":{\"cached_tokens\":6}}", NULL},
	{"chat: missing completion_tokens",
	 "{\"prompt_tokens\":5}", NULL},
};

static const struct row responses[] = {
	{"responses: input includes cached, output includes reasoning",
	 "{\"input_tokens\":2000,\"input_tokens_details\":{\"cached_tokens\":1536},"
	 "\"output_tokens\":700,\"output_tokens_details\":{\"reasoning_tokens\":640},"
	 "\"total_tokens\":2700}",
	 "{\"input\":464,\"cache_read\":1536,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":700,\"reasoning\":640}"},
	{"responses: bare counts",
	 "{\"input_tokens\":5,\"output_tokens\":3}",
	 "{\"input\":5,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":3,\"reasoning\":null}"},
	{"responses: chat names are not responses usage",
	 "{\"prompt_tokens\":5,\"completion_tokens\":3}", NULL},
};

static const struct row gemini[] = {
	{"gemini: prompt includes cached, thoughts outside candidates",
	 "{\"promptTokenCount\":1200,\"cachedContentTokenCount\":1000,"
	 "\"candidatesTokenCount\":30,\"thoughtsTokenCount\":70,"
	 "\"totalTokenCount\":1300}",
	 "{\"input\":200,\"cache_read\":1000,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":100,\"reasoning\":70}"},
	{"gemini: no thoughts count: reasoning unknown",
	 "{\"promptTokenCount\":8,\"candidatesTokenCount\":2,"
	 "\"totalTokenCount\":10}",
	 "{\"input\":8,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":2,\"reasoning\":null}"},
	{"gemini: tool-use prompt tokens are input",
	 "{\"promptTokenCount\":8,\"toolUsePromptTokenCount\":4,"
	 "\"candidatesTokenCount\":2}",
	 "{\"input\":12,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":2,\"reasoning\":null}"},
	{"gemini: prompt only (blocked)", "{\"promptTokenCount\":7}",
	 "{\"input\":7,\"cache_read\":0,\"cache_write\":0,"
	 "\"cache_write_1h\":0,\"output\":0,\"reasoning\":null}"},
	{"gemini: no prompt count", "{\"candidatesTokenCount\":2}", NULL},
};

int main(void)
{
	run(CAVE_API_ANTHROPIC, anthropic, sizeof anthropic / sizeof *anthropic);
	run(CAVE_API_OPENAI_CHAT, chat, sizeof chat / sizeof *chat);
	run(CAVE_API_OPENAI_RESPONSES, responses,
	    sizeof responses / sizeof *responses);
	run(CAVE_API_GEMINI, gemini, sizeof gemini / sizeof *gemini);

	/* the neutral object round trip */
	{
		struct cave_usage u;
		jv v = jv_parse("{\"input\":1,\"cache_read\":2,\"cache_write\":3,"
				"\"cache_write_1h\":1,\"output\":5,\"reasoning\":4}");
		jv back;
		is_int(cave_usage_from_jv(v, &u), 0, "from_jv: full object");
		ok(u.available && u.reasoning_known && u.input == 1 &&
		   u.cache_read == 2 && u.cache_write == 3 &&
		   u.cache_write_1h == 1 && u.output == 5 && u.reasoning == 4,
		   "from_jv: every count");
		back = cave_usage_to_jv(&u);
		ok(jv_equal(back, jv_copy(v)), "to_jv(from_jv(x)) == x");
		jv_free(v);
	}
	{
		struct cave_usage u;
		jv v = jv_parse("{\"input\":1,\"cache_read\":0,\"cache_write\":0,"
				"\"cache_write_1h\":0,\"output\":5,\"reasoning\":null}");
		jv back, r;
		is_int(cave_usage_from_jv(v, &u), 0, "from_jv: reasoning null");
		ok(!u.reasoning_known, "reasoning null is unknown");
		back = cave_usage_to_jv(&u);
		r = jv_object_get(back, jv_string("reasoning"));
		ok(jv_get_kind(r) == JV_KIND_NULL, "unknown reasoning stays null");
		jv_free(r);
		jv_free(v);
	}
	{
		struct cave_usage u;
		jv v = jv_null();
		is_int(cave_usage_from_jv(v, &u), 0, "from_jv: null");
		ok(!u.available, "null usage is not available");
		ok(jv_get_kind(cave_usage_to_jv(&u)) == JV_KIND_NULL,
		   "unavailable usage is null, never zeros");
	}
	{
		static const char *const bad[] = {
			"{\"input\":1,\"cache_read\":0,\"cache_write\":0,"
			"\"cache_write_1h\":0}",
			"{\"input\":-1,\"cache_read\":0,\"cache_write\":0,"
			"\"cache_write_1h\":0,\"output\":1}",
			"{\"input\":1,\"cache_read\":0,\"cache_write\":1,"
			"\"cache_write_1h\":2,\"output\":1}",
			"{\"input\":1,\"cache_read\":0,\"cache_write\":0,"
			"\"cache_write_1h\":0,\"output\":1,\"reasoning\":\"x\"}",
			"7",
		};
		for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
			struct cave_usage u;
			jv v = jv_parse(bad[i]);
			is_int(cave_usage_from_jv(v, &u), -1, bad[i]);
			ok(!u.available, "refused usage is not available");
			jv_free(v);
		}
	}
	return tap_done();
}
