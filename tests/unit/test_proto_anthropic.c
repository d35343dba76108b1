/* test_proto_anthropic.c: the Anthropic Messages stream and body, from
 * recorded examples: thinking kept apart from text, tool input assembled
 * from input_json_delta, cumulative message_delta usage, error events,
 * truncated streams and malformed arguments. */
#include "test_proto_util.h"

int main(void)
{
	enum cave_api a = CAVE_API_ANTHROPIC;

	tp_check_stream(a, "anthropic_stream_tool.sse",
			"anthropic_stream_tool.result.json",
			"Let me check the weather in Zürich.", true);
	tp_check_stream(a, "anthropic_stream_delta_input.sse",
			"anthropic_stream_delta_input.result.json", "Hi", true);
	tp_check_stream_error(a, "anthropic_stream_error.sse", "overloaded", 1,
			      "Partial");
	tp_check_stream_error(a, "anthropic_stream_badjson.sse",
			      "malformed_stream", 0, "");

	/* a stream cut short: not complete, partial text kept, usage from
	 * message_start only */
	{
		size_t n;
		char *p = tp_fixture("anthropic_stream_truncated.sse", &n);
		struct tp_run r;
		jv res, u;
		tp_run(&r, a, p, n, 0, 0);
		is_int(r.rc, 0, "truncated stream: no error while reading");
		ok(r.pending == 1, "truncated stream: parser had an event pending");
		ok(!cave_acc_complete(r.acc), "truncated stream: not complete");
		res = cave_acc_result(r.acc);
		is_str(r.deltas.data, "Cut", "truncated stream: deltas so far");
		ok(jv_get_kind(jv_object_get(jv_copy(res), jv_string("stop_reason"))) ==
		   JV_KIND_NULL, "truncated stream: stop_reason null");
		u = jv_object_get(jv_copy(res), jv_string("usage"));
		ok(jv_get_kind(u) == JV_KIND_NULL,
		   "truncated stream: message_start usage is not final: null");
		jv_free(u);
		u = cave_acc_usage_so_far(r.acc);
		is_int(jv_number_value(jv_object_get(u, jv_string("input"))), 25,
		       "truncated stream: usage so far has message_start's input");
		jv_free(res);
		tp_done(&r);
		free(p);
	}

	/* an error event named only by the SSE event field */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d = "{\"error\":{\"type\":\"rate_limit_error\","
				"\"message\":\"Number of request tokens has exceeded your per-minute rate limit\"}}";
		is_int(cave_acc_event(acc, "error", d, strlen(d), NULL, NULL, &e),
		       -1, "error event by name fails");
		is_str(e.code, "rate_limited", "rate_limit_error is rate_limited");
		is_int(e.retryable, 1, "rate_limited is retryable");
		cave_acc_free(acc);
	}
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d = "{\"type\":\"error\",\"error\":{\"type\":\"api_error\","
				"\"message\":\"Internal server error\"}}";
		is_int(cave_acc_event(acc, "error", d, strlen(d), NULL, NULL, &e),
		       -1, "api_error fails");
		is_str(e.code, "provider_error", "api_error is provider_error");
		is_int(e.retryable, 0, "provider_error is not retryable");
		cave_acc_free(acc);
	}
	/* data that is not JSON */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		is_int(cave_acc_event(acc, "message_start", "{nope", 5, NULL, NULL,
				      &e), -1, "non-JSON data fails");
		is_str(e.code, "malformed_stream", "non-JSON is malformed_stream");
		cave_acc_free(acc);
	}
	/* a delta for a block never opened */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d = "{\"type\":\"content_block_delta\",\"index\":3,"
				"\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}";
		is_int(cave_acc_event(acc, "content_block_delta", d, strlen(d),
				      NULL, NULL, &e), -1, "stray delta fails");
		is_str(e.code, "malformed_stream", "stray delta is malformed");
		cave_acc_free(acc);
	}
	/* nothing at all: usage unavailable, never zeros */
	{
		struct cave_acc *acc = cave_acc_new(a);
		jv res = cave_acc_result(acc);
		jv basis = jv_object_get(jv_copy(res), jv_string("usage_basis"));
		ok(jv_get_kind(jv_object_get(jv_copy(res), jv_string("usage"))) ==
		   JV_KIND_NULL, "no usage: usage null");
		is_str(jv_string_value(basis), "unavailable", "no usage: unavailable");
		jv_free(basis);
		jv_free(res);
		cave_acc_free(acc);
	}

	tp_check_body(a, "anthropic_body.json", "anthropic_body.result.json");
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		size_t n;
		char *p = tp_fixture("anthropic_error_body.json", &n);
		is_int(cave_acc_body(acc, p, n, &e), -1, "error body fails");
		is_str(e.code, "provider_error", "error body code");
		free(p);
		cave_acc_free(acc);
	}
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		is_int(cave_acc_body(acc, "{\"id\":", 6, &e), -1, "cut body fails");
		is_str(e.code, "malformed_response", "cut body is malformed_response");
		cave_acc_free(acc);
	}
	tp_check_error_body(a, "anthropic_error_body.json",
			    "max_tokens: 100000 > 64000, which is the maximum "
			    "allowed number of output tokens for claude-sonnet-4-5");
	return tap_done();
}
