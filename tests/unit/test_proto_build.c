/* test_proto_build.c: one neutral request with a tool round (assistant
 * tool_use, then user tool_result) built for every protocol and checked
 * against the recorded request (URL, headers, JSON body); then the edges:
 * base URLs, streaming off, reasoning budgets, bad requests, Gemini's
 * tool names and ids, thinking blocks, api names and key headers. */
#include "test_proto_util.h"

static const char *const expected[CAVE_API_COUNT] = {
	[CAVE_API_ANTHROPIC] = "build_anthropic.json",
	[CAVE_API_OPENAI_CHAT] = "build_openai_chat.json",
	[CAVE_API_OPENAI_RESPONSES] = "build_openai_responses.json",
	[CAVE_API_GEMINI] = "build_gemini.json",
};

/* Builds req (borrowed) for a; returns the body as JSON or jv_invalid. */
static jv build(enum cave_api a, jv req, const char *base,
		struct cave_http_req *out, cave_err *e)
{
	jv body;
	if (cave_proto_build(a, req, base, out, e) < 0) /* borrows req */
		return jv_invalid();
	body = jv_parse_sized(out->body, (int)out->body_len);
	return body;
}

/* req with key set to v (consumed). */
static jv with(jv req, const char *key, jv v)
{
	return jv_object_set(jv_copy(req), jv_string(key), v);
}

static jv getp(jv v, const char *path)
{
	/* a small path walker: "a.b.0.c" (borrowed v, new result) */
	char buf[256];
	char *save = buf, *tok;
	jv cur = jv_copy(v);
	snprintf(buf, sizeof buf, "%s", path);
	while ((tok = strsep(&save, ".")) != NULL) {
		char *end;
		long i = strtol(tok, &end, 10);
		if (*tok && !*end && jv_get_kind(cur) == JV_KIND_ARRAY)
			cur = jv_array_get(cur, (int)i);
		else if (jv_get_kind(cur) == JV_KIND_OBJECT)
			cur = jv_object_get(cur, jv_string(tok));
		else {
			jv_free(cur);
			return jv_invalid();
		}
		if (!jv_is_valid(cur))
			return cur;
	}
	return cur;
}

static void is_json(jv v, const char *path, const char *want_json,
		    const char *name)
{
	jv got = getp(v, path);
	jv want = jv_parse(want_json);
	jv gs = jv_dump_string(jv_copy(got), 0);
	int eq = jv_equal(got, want);
	ok(eq, "%s", name);
	if (!eq)
		printf("#   %s: got %s\n", path,
		       jv_is_valid(gs) ? jv_string_value(gs) : "(invalid)");
	jv_free(gs);
}

static void absent(jv v, const char *path, const char *name)
{
	jv got = getp(v, path);
	ok(!jv_is_valid(got), "%s", name);
	jv_free(got);
}

static void fails(enum cave_api a, jv req, const char *name)
{
	struct cave_http_req out;
	cave_err e = {0};
	jv b = build(a, req, NULL, &out, &e);
	ok(!jv_is_valid(b) && strcmp(e.code, "bad_request") == 0,
	   "%s: bad_request (%s)", name, e.msg);
	ok(out.url == NULL && out.body == NULL, "%s: nothing left to free",
	   name);
	jv_free(b);
	jv_free(req);
}

int main(void)
{
	jv req = tp_fixture_json("request.json");

	ok(jv_get_kind(req) == JV_KIND_OBJECT, "request fixture");
	for (int a = 0; a < CAVE_API_COUNT; a++) {
		jv want = tp_fixture_json(expected[a]), headers, body;
		struct cave_http_req out;
		cave_err e = {0};
		int nh = 0, eq;
		body = build((enum cave_api)a, req, NULL, &out, &e);
		ok(jv_is_valid(body), "%s: builds (%s)", cave_api_name(a), e.msg);
		if (!jv_is_valid(body)) {
			jv_free(want);
			continue;
		}
		{
			jv u = getp(want, "url");
			is_str(out.url, jv_string_value(u), "url");
			jv_free(u);
		}
		headers = jv_array();
		while (nh < 8 && out.headers[nh])
			headers = jv_array_append(headers,
						  jv_string(out.headers[nh++]));
		ok(jv_equal(headers, getp(want, "headers")), "%s: headers",
		   cave_api_name(a));
		{
			jv w = getp(want, "body");
			jv gs = jv_dump_string(jv_copy(body), JV_PRINT_SORTED);
			eq = jv_equal(jv_copy(body), w);
			ok(eq, "%s: body as recorded", cave_api_name(a));
			if (!eq)
				printf("#   got %s\n", jv_string_value(gs));
			jv_free(gs);
		}
		ok(strlen(out.body) == out.body_len, "%s: body_len",
		   cave_api_name(a));
		ok(!strstr(out.url, "key="), "%s: no key in the URL",
		   cave_api_name(a));
		jv_free(body);
		jv_free(want);
		cave_http_req_free(&out);
	}

	/* base URLs: trailing '/' stripped, the path the SDKs use */
	{
		static const struct {
			enum cave_api a;
			const char *base, *url;
		} cases[] = {
			{CAVE_API_ANTHROPIC, "http://127.0.0.1:8080/",
			 "http://127.0.0.1:8080/v1/messages"},
			{CAVE_API_OPENAI_CHAT, "http://127.0.0.1:8080/v1//",
			 "http://127.0.0.1:8080/v1/chat/completions"},
			{CAVE_API_OPENAI_RESPONSES, "https://gw.example/openai/v1",
			 "https://gw.example/openai/v1/responses"},
			{CAVE_API_GEMINI, "http://[::1]:9/g/",
			 "http://[::1]:9/g/v1beta/models/claude-sonnet-4-5:"
			 "streamGenerateContent?alt=sse"},
		};
		for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
			struct cave_http_req out;
			cave_err e = {0};
			jv b = build(cases[i].a, req, cases[i].base, &out, &e);
			is_str(out.url, cases[i].url, cases[i].base);
			jv_free(b);
			cave_http_req_free(&out);
		}
	}

	/* streaming off */
	{
		jv r = with(req, "stream", jv_false());
		struct cave_http_req out;
		cave_err e = {0};
		jv b = build(CAVE_API_ANTHROPIC, r, NULL, &out, &e);
		is_json(b, "stream", "false", "anthropic: stream false");
		is_str(out.headers[2], "accept: application/json",
		       "anthropic: accept json when not streaming");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_OPENAI_CHAT, r, NULL, &out, &e);
		absent(b, "stream_options", "chat: no stream_options");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_GEMINI, r, NULL, &out, &e);
		is_str(out.url, "https://generativelanguage.googleapis.com/v1beta/"
		       "models/claude-sonnet-4-5:generateContent",
		       "gemini: generateContent when not streaming");
		jv_free(b);
		cave_http_req_free(&out);
		jv_free(r);
	}

	/* reasoning */
	{
		jv r = with(req, "reasoning", jv_null());
		struct cave_http_req out;
		cave_err e = {0};
		jv b;
		for (int a = 0; a < CAVE_API_COUNT; a++) {
			b = build((enum cave_api)a, r, NULL, &out, &e);
			absent(b, "thinking", "reasoning null: no thinking");
			absent(b, "reasoning_effort", "reasoning null: no effort");
			absent(b, "reasoning", "reasoning null: no reasoning");
			absent(b, "generationConfig.thinkingConfig",
			       "reasoning null: no thinkingConfig");
			jv_free(b);
			cave_http_req_free(&out);
		}
		jv_free(r);
		r = with(req, "max_output_tokens", jv_number(1500));
		r = jv_object_set(r, jv_string("reasoning"), jv_string("high"));
		b = build(CAVE_API_ANTHROPIC, r, NULL, &out, &e);
		is_json(b, "thinking.budget_tokens", "1499",
			"anthropic: budget below max_tokens");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_GEMINI, r, NULL, &out, &e);
		is_json(b, "generationConfig.thinkingConfig.thinkingBudget",
			"24576", "gemini: high budget");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_OPENAI_RESPONSES, r, NULL, &out, &e);
		is_json(b, "reasoning", "{\"effort\":\"high\"}", "responses: effort");
		jv_free(b);
		cave_http_req_free(&out);
		jv_free(r);
		r = with(req, "max_output_tokens", jv_number(1000));
		b = build(CAVE_API_ANTHROPIC, r, NULL, &out, &e);
		absent(b, "thinking", "anthropic: no room for thinking: none");
		jv_free(b);
		cave_http_req_free(&out);
		jv_free(r);
	}

	/* bad requests */
	fails(CAVE_API_ANTHROPIC, jv_object_delete(jv_copy(req), jv_string("model")),
	      "no model");
	fails(CAVE_API_OPENAI_CHAT,
	      with(req, "messages", jv_array()), "no messages");
	fails(CAVE_API_GEMINI, with(req, "reasoning", jv_string("extreme")),
	      "unknown reasoning level");
	fails(CAVE_API_ANTHROPIC,
	      jv_object_delete(jv_copy(req), jv_string("max_output_tokens")),
	      "anthropic without max_output_tokens");
	fails(CAVE_API_GEMINI, with(req, "model", jv_string("a/../b")),
	      "gemini model with a slash");
	fails(CAVE_API_OPENAI_RESPONSES,
	      with(req, "messages", jv_parse("[{\"role\":\"system\",\"content\":\"x\"}]")),
	      "bad role");
	fails(CAVE_API_GEMINI,
	      with(req, "messages", jv_parse(
		      "[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
		      "\"tool_use_id\":\"nowhere\",\"content\":\"x\"}]}]")),
	      "gemini: tool_result for no tool_use");
	fails(CAVE_API_ANTHROPIC,
	      with(req, "messages", jv_parse(
		      "[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
		      "\"id\":\"x\",\"name\":\"f\",\"input\":[1]}]}]")),
	      "tool_use input not an object");
	{
		struct cave_http_req out;
		cave_err e = {0};
		ok(cave_proto_build(CAVE_API_ANTHROPIC, jv_null(), NULL, &out,
				    &e) < 0, "a request that is not an object");
	}

	/* Gemini: synthetic ids stay home, signatures go back, names are found
	 * in the nearest earlier tool_use with that id, errors are "error" */
	{
		jv msgs = jv_parse(
			"[{\"role\":\"user\",\"content\":\"go\"},"
			"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
			"\"id\":\"gemini_call_0\",\"name\":\"old\",\"input\":{}}]},"
			"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
			"\"tool_use_id\":\"gemini_call_0\",\"content\":\"1\"}]},"
			"{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
			"\"thinking\":\"hm\",\"signature\":\"sig1\"},{\"type\":\"tool_use\","
			"\"id\":\"gemini_call_0\",\"name\":\"new\",\"input\":{\"a\":1},"
			"\"signature\":\"CiQB\"}]},"
			"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
			"\"tool_use_id\":\"gemini_call_0\",\"content\":\"boom\","
			"\"is_error\":true}]}]");
		jv r = with(req, "messages", msgs);
		struct cave_http_req out;
		cave_err e = {0};
		jv b = build(CAVE_API_GEMINI, r, NULL, &out, &e);
		is_json(b, "contents.3.parts",
			"[{\"functionCall\":{\"name\":\"new\",\"args\":{\"a\":1}},"
			"\"thoughtSignature\":\"CiQB\"}]",
			"gemini: no synthetic id sent, signature sent, thinking dropped");
		is_json(b, "contents.4.parts",
			"[{\"functionResponse\":{\"name\":\"new\",\"response\":"
			"{\"error\":\"boom\"}}}]",
			"gemini: name from the nearest tool_use, error result");
		is_json(b, "contents.2.parts.0.functionResponse.name", "\"old\"",
			"gemini: an earlier result names the earlier call");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_ANTHROPIC, r, NULL, &out, &e);
		is_json(b, "messages.3.content",
			"[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"sig1\"},"
			"{\"type\":\"tool_use\",\"id\":\"gemini_call_0\",\"name\":\"new\","
			"\"input\":{\"a\":1}}]",
			"anthropic: thinking block sent back, signature field dropped");
		is_json(b, "messages.4.content.0.is_error", "true",
			"anthropic: is_error");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_OPENAI_CHAT, r, NULL, &out, &e);
		is_json(b, "messages.4",
			"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
			"[{\"id\":\"gemini_call_0\",\"type\":\"function\",\"function\":"
			"{\"name\":\"new\",\"arguments\":\"{\\\"a\\\":1}\"}}]}",
			"chat: assistant with only a call has content null");
		jv_free(b);
		cave_http_req_free(&out);
		jv_free(r);
	}
	/* several text blocks become parts */
	{
		jv r = with(req, "messages", jv_parse(
			"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
			"{\"type\":\"text\",\"text\":\"b\"}]}]"));
		struct cave_http_req out;
		cave_err e = {0};
		jv b = build(CAVE_API_OPENAI_RESPONSES, r, NULL, &out, &e);
		is_json(b, "input.0.content",
			"[{\"type\":\"input_text\",\"text\":\"a\"},"
			"{\"type\":\"input_text\",\"text\":\"b\"}]",
			"responses: two texts, two input_text parts");
		jv_free(b);
		cave_http_req_free(&out);
		b = build(CAVE_API_OPENAI_CHAT, r, NULL, &out, &e);
		is_json(b, "messages.1.content",
			"[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]",
			"chat: two texts, two parts");
		jv_free(b);
		cave_http_req_free(&out);
		jv_free(r);
	}

	/* names, defaults, key headers */
	{
		const char *prefix = NULL;
		is_str(cave_api_name(CAVE_API_OPENAI_RESPONSES), "openai-responses",
		       "api name");
		is_int(cave_api_parse("gemini"), CAVE_API_GEMINI, "api parse");
		is_int(cave_api_parse("openai"), -1, "api parse unknown");
		is_int(cave_api_default("openai"), CAVE_API_OPENAI_RESPONSES,
		       "openai speaks responses by default");
		is_int(cave_api_default("anthropic"), CAVE_API_ANTHROPIC,
		       "anthropic default");
		is_int(cave_api_default("google"), CAVE_API_GEMINI, "google default");
		is_int(cave_api_default("fixture"), -1, "fixture has no wire protocol");
		is_str(cave_proto_key_header(CAVE_API_ANTHROPIC, &prefix), "x-api-key",
		       "anthropic key header");
		is_str(prefix, "", "no prefix");
		is_str(cave_proto_key_header(CAVE_API_OPENAI_CHAT, &prefix),
		       "Authorization", "openai key header");
		is_str(prefix, "Bearer ", "Bearer prefix");
		is_str(cave_proto_key_header(CAVE_API_GEMINI, &prefix),
		       "x-goog-api-key", "gemini key header");
	}
	/* error bodies: the provider's message, one line, capped */
	{
		char out[32];
		const char *html = "<html>\r\n<head><title>502 Bad Gateway</title>"
				   "</head></html>";
		const char *ctl = "{\"error\":{\"message\":\"a\\nb\\tc\\u0001d\"}}";
		const char *utf = "{\"error\":{\"message\":\"\u00e9\u00e9\u00e9"
				  "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
				  "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\"}}";
		cave_proto_error_message(CAVE_API_OPENAI_CHAT, html, strlen(html),
					 out, sizeof out);
		is_str(out, "<html> <head><title>502 Bad Gat",
		       "not JSON: the body's start, one line, capped");
		cave_proto_error_message(CAVE_API_ANTHROPIC, ctl, strlen(ctl), out,
					 sizeof out);
		is_str(out, "a b c d", "control characters become spaces");
		cave_proto_error_message(CAVE_API_GEMINI, utf, strlen(utf), out,
					 sizeof out);
		is_int(strlen(out), 30, "a cut never splits a UTF-8 sequence");
		cave_proto_error_message(CAVE_API_GEMINI, "", 0, out, sizeof out);
		is_str(out, "", "empty body: empty message");
	}
	jv_free(req);
	return tap_done();
}
