/* test_proto_openai_chat.c: the OpenAI Chat Completions stream and body,
 * from recorded examples: tool calls joined by index, the usage chunk with
 * cached and reasoning tokens, a stream without usage (unavailable, never
 * zeros), error chunks, truncated streams and malformed arguments. */
#include "test_proto_util.h"

int main(void)
{
	enum cave_api a = CAVE_API_OPENAI_CHAT;

	tp_check_stream(a, "chat_stream_tool.sse", "chat_stream_tool.result.json",
			"Checking both.", true);
	tp_check_stream(a, "chat_stream_nousage.sse",
			"chat_stream_nousage.result.json", "Hello", true);
	tp_check_stream(a, "chat_stream_truncated.sse", NULL, "Half an ans",
			false);
	tp_check_stream_error(a, "chat_stream_badargs.sse", "malformed_stream",
			      0, "");
	tp_check_stream_error(a, "chat_stream_error.sse", "rate_limited", 1,
			      "Hi");

	/* the usage chunk alone completes the stream, before [DONE] */
	{
		size_t n;
		char *p = tp_fixture("chat_stream_tool.sse", &n);
		char *done = p ? strstr(p, "data: [DONE]") : NULL;
		struct tp_run r;
		tp_run(&r, a, p, done ? (size_t)(done - p) : n, 0, 0);
		ok(cave_acc_complete(r.acc), "usage chunk completes the stream");
		tp_done(&r);
		free(p);
	}
	/* a truncated stream has no usage */
	{
		size_t n;
		char *p = tp_fixture("chat_stream_truncated.sse", &n);
		struct tp_run r;
		jv res, basis;
		tp_run(&r, a, p, n, 0, 0);
		res = cave_acc_result(r.acc);
		basis = jv_object_get(jv_copy(res), jv_string("usage_basis"));
		is_str(jv_string_value(basis), "unavailable",
		       "truncated: usage unavailable");
		ok(jv_get_kind(jv_object_get(jv_copy(res), jv_string("stop_reason")))
		   == JV_KIND_NULL, "truncated: no stop reason");
		jv_free(basis);
		jv_free(res);
		tp_done(&r);
		free(p);
	}
	/* stop maps */
	{
		static const struct { const char *word, *stop; } cases[] = {
			{"stop", "end_turn"}, {"length", "max_tokens"},
			{"content_filter", "refusal"}, {"tool_calls", "tool_use"},
			{"something_new", "other"},
		};
		for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
			struct cave_acc *acc = cave_acc_new(a);
			cave_err e = {0};
			char d[256];
			jv res, s;
			snprintf(d, sizeof d,
				 "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},"
				 "\"finish_reason\":\"%s\"}]}", cases[i].word);
			cave_acc_event(acc, "", d, strlen(d), NULL, NULL, &e);
			res = cave_acc_result(acc);
			s = jv_object_get(res, jv_string("stop_reason"));
			is_str(jv_string_value(s), cases[i].stop, cases[i].word);
			jv_free(s);
			cave_acc_free(acc);
		}
	}
	/* a refusal is text, and the stop says so */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d1 = "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":"
				 "{\"refusal\":\"I can't help with that.\"},"
				 "\"finish_reason\":null}]}";
		const char *d2 = "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},"
				 "\"finish_reason\":\"stop\"}]}";
		jv res, s;
		cave_acc_event(acc, "", d1, strlen(d1), NULL, NULL, &e);
		cave_acc_event(acc, "", d2, strlen(d2), NULL, NULL, &e);
		res = cave_acc_result(acc);
		s = jv_object_get(res, jv_string("stop_reason"));
		is_str(jv_string_value(s), "refusal", "refusal stop");
		jv_free(s);
		cave_acc_free(acc);
	}

	tp_check_body(a, "chat_body.json", "chat_body.result.json");
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		size_t n;
		char *p = tp_fixture("openai_error_body.json", &n);
		is_int(cave_acc_body(acc, p, n, &e), -1, "error body fails");
		is_str(e.code, "provider_error", "invalid_api_key is provider_error");
		free(p);
		cave_acc_free(acc);
	}
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *b = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":"
				"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
				"[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
				"{\"name\":\"f\",\"arguments\":\"{oops\"}}]},"
				"\"finish_reason\":\"tool_calls\"}]}";
		is_int(cave_acc_body(acc, b, strlen(b), &e), -1,
		       "body with bad arguments fails");
		is_str(e.code, "malformed_response", "bad arguments: malformed_response");
		cave_acc_free(acc);
	}
	tp_check_error_body(a, "openai_error_body.json",
			    "Incorrect API key provided: sk-abc. You can find your "
			    "API key at https://platform.openai.com/account/api-keys.");
	return tap_done();
}
