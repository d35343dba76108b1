/* test_proto_gemini.c: the Gemini stream (CRLF SSE) and body, from recorded
 * examples: thought parts kept out of the text, synthesized call ids, thought
 * signatures kept, promptTokenCount including cached tokens, thoughts outside
 * candidates, error chunks, truncated streams and safety stops. */
#include "test_proto_util.h"

int main(void)
{
	enum cave_api a = CAVE_API_GEMINI;

	tp_check_stream(a, "gemini_stream_tool.sse",
			"gemini_stream_tool.result.json", "The weather tool next.",
			true);
	tp_check_stream(a, "gemini_stream_truncated.sse",
			"gemini_stream_truncated.result.json", "Hel", false);
	tp_check_stream_error(a, "gemini_stream_error.sse", "overloaded", 1,
			      "Hel");
	tp_check_body(a, "gemini_body.json", "gemini_body.result.json");

	/* functionCall args that are not an object */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d = "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":"
				"{\"name\":\"f\",\"args\":[1]}}],\"role\":\"model\"}}]}";
		is_int(cave_acc_event(acc, "", d, strlen(d), NULL, NULL, &e), -1,
		       "array args fail");
		is_str(e.code, "malformed_stream", "array args: malformed_stream");
		cave_acc_free(acc);
	}
	/* a call with its own id keeps it */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d = "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":"
				"{\"id\":\"abc\",\"name\":\"f\"}}],\"role\":\"model\"},"
				"\"finishReason\":\"STOP\"}],\"usageMetadata\":"
				"{\"promptTokenCount\":3,\"candidatesTokenCount\":2}}";
		jv res, c, id;
		is_int(cave_acc_event(acc, "", d, strlen(d), NULL, NULL, &e), 0,
		       "call with id");
		ok(cave_acc_complete(acc), "finishReason and usage: complete");
		res = cave_acc_result(acc);
		c = jv_array_get(jv_object_get(jv_copy(res), jv_string("content")), 0);
		id = jv_object_get(jv_copy(c), jv_string("id"));
		is_str(jv_string_value(id), "abc", "provider id kept");
		jv_free(id);
		id = jv_object_get(c, jv_string("input"));
		ok(jv_get_kind(id) == JV_KIND_OBJECT, "missing args are {}");
		jv_free(id);
		jv_free(res);
		cave_acc_free(acc);
	}
	/* a prompt blocked before any candidate */
	{
		struct cave_acc *acc = cave_acc_new(a);
		cave_err e = {0};
		const char *d = "{\"promptFeedback\":{\"blockReason\":\"SAFETY\"},"
				"\"usageMetadata\":{\"promptTokenCount\":7,"
				"\"totalTokenCount\":7}}";
		jv res, s;
		is_int(cave_acc_body(acc, d, strlen(d), &e), 0, "blocked prompt body");
		res = cave_acc_result(acc);
		s = jv_object_get(jv_copy(res), jv_string("stop_reason"));
		is_str(jv_string_value(s), "refusal", "blocked prompt: refusal");
		jv_free(s);
		s = jv_object_get(jv_object_get(res, jv_string("usage")),
				  jv_string("output"));
		is_int(jv_number_value(s), 0, "blocked prompt: output 0");
		jv_free(s);
		cave_acc_free(acc);
	}
	/* MAX_TOKENS and unknown words */
	{
		static const struct { const char *word, *stop; } cases[] = {
			{"MAX_TOKENS", "max_tokens"}, {"RECITATION", "refusal"},
			{"MALFORMED_FUNCTION_CALL", "other"}, {"OTHER", "other"},
		};
		for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
			struct cave_acc *acc = cave_acc_new(a);
			cave_err e = {0};
			char d[256];
			jv res, s;
			snprintf(d, sizeof d,
				 "{\"candidates\":[{\"content\":{\"parts\":[]},"
				 "\"finishReason\":\"%s\"}]}", cases[i].word);
			cave_acc_event(acc, "", d, strlen(d), NULL, NULL, &e);
			ok(!cave_acc_complete(acc), "%s without usage: not complete",
			   cases[i].word);
			res = cave_acc_result(acc);
			s = jv_object_get(res, jv_string("stop_reason"));
			is_str(jv_string_value(s), cases[i].stop, cases[i].word);
			jv_free(s);
			cave_acc_free(acc);
		}
	}
	tp_check_error_body(a, "gemini_error_body.json",
			    "API key not valid. Please pass a valid API key.");
	return tap_done();
}
