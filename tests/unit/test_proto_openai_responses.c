/* test_proto_openai_responses.c: the OpenAI Responses stream and body, from
 * recorded examples: reasoning items kept out of the text, function call
 * arguments from deltas and done events, cached and reasoning usage,
 * incomplete responses, failures and error events. */
#include "test_proto_util.h"

int main(void)
{
	enum cave_api a = CAVE_API_OPENAI_RESPONSES;

	tp_check_stream(a, "responses_stream_tool.sse",
			"responses_stream_tool.result.json", "One moment.", true);
	tp_check_stream(a, "responses_stream_incomplete.sse",
			"responses_stream_incomplete.result.json", "A long ess",
			true);
	tp_check_stream_error(a, "responses_stream_failed.sse", "provider_error",
			      0, "");
	tp_check_stream_error(a, "responses_stream_error.sse", "rate_limited", 1,
			      "");
	tp_check_stream_error(a, "responses_stream_badargs.sse",
			      "malformed_stream", 0, "");

	/* cut before response.completed: not complete, usage unavailable */
	{
		size_t n;
		char *p = tp_fixture("responses_stream_tool.sse", &n);
		char *cut = p ? strstr(p, "event: response.completed") : NULL;
		struct tp_run r;
		jv res, basis;
		tp_run(&r, a, p, cut ? (size_t)(cut - p) : n, 0, 0);
		ok(!cave_acc_complete(r.acc), "cut stream: not complete");
		res = cave_acc_result(r.acc);
		basis = jv_object_get(jv_copy(res), jv_string("usage_basis"));
		is_str(jv_string_value(basis), "unavailable",
		       "cut stream: usage unavailable");
		jv_free(basis);
		jv_free(res);
		tp_done(&r);
		free(p);
	}

	tp_check_body(a, "responses_body.json", "responses_body.result.json");
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *b = "{\"id\":\"r\",\"status\":\"completed\",\"output\":["
				"{\"type\":\"reasoning\",\"id\":\"rs\",\"summary\":[]},"
				"{\"type\":\"function_call\",\"id\":\"fc\",\"call_id\":\"call_1\","
				"\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}],"
				"\"usage\":{\"input_tokens\":5,\"output_tokens\":3}}";
		jv res, want;
		is_int(cave_acc_body(acc, b, strlen(b), &e), 0,
		       "body with a function call");
		res = cave_acc_result(acc);
		want = jv_parse("{\"content\":[{\"type\":\"tool_use\",\"id\":\"call_1\","
				"\"name\":\"f\",\"input\":{\"a\":1}}],\"stop_reason\":"
				"\"tool_use\",\"provider_stop_reason\":\"completed\","
				"\"response_id\":\"r\",\"usage\":{\"input\":5,"
				"\"cache_read\":0,\"cache_write\":0,\"cache_write_1h\":0,"
				"\"output\":3,\"reasoning\":null},\"usage_basis\":"
				"\"provider_reported\"}");
		ok(jv_equal(res, want), "function call body: result");
		cave_acc_free(acc);
	}
	tp_check_error_body(a, "openai_error_body.json",
			    "Incorrect API key provided: sk-abc. You can find your "
			    "API key at https://platform.openai.com/account/api-keys.");
	return tap_done();
}
