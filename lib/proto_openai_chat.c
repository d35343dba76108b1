/* proto_openai_chat.c: the OpenAI Chat Completions API (POST
 * {base}/chat/completions), its request body and its chunk stream. It never
 * adds the key header; tool call fragments are joined by their index and
 * parsed only once the choice has finished. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "msg.h"
#include "proto.h"
#include "proto_impl.h"

#define OPENAI_BASE "https://api.openai.com/v1"
/* The single text slot's key; tool calls use their index (>= 0). */
#define TEXT_KEY (-1L)

static const struct cave_stop_word stops[] = {
	{"stop", "end_turn"},
	{"tool_calls", "tool_use"},
	{"function_call", "tool_use"},
	{"length", "max_tokens"},
	{"content_filter", "refusal"},
};

static void set_stop(struct cave_acc *acc, const char *word)
{
	cave_acc_stop(acc, word, CAVE_STOP_LOOKUP(stops, word));
}

/* ---- request ---- */

static int user_message(jv *out, jv m, cave_err *e)
{
	jv c = pj_get(m, "content"), blocks = cave_proto_content_blocks(c);
	int n = pj_len(blocks), ret = -1;
	jv texts;
	/* tool results answer the assistant message right before: first */
	for (int i = 0; i < n; i++) {
		jv b = pj_at(blocks, i);
		const char *t = pj_str(b, "type");
		if (t && strcmp(t, "tool_result") == 0) {
			if (!pj_str(b, "tool_use_id")) {
				jv_free(b);
				cave_errf(e, "bad_request",
					  "tool_result without tool_use_id");
				goto out;
			}
			*out = jv_array_append(*out, JV_OBJECT(
				jv_string("role"), jv_string("tool"),
				jv_string("tool_call_id"),
				pj_get(b, "tool_use_id"),
				jv_string("content"),
				jv_string(pj_str(b, "content")
						  ? pj_str(b, "content") : "")));
		}
		jv_free(b);
	}
	texts = cave_proto_texts(blocks, "text");
	if (jv_get_kind(texts) != JV_KIND_NULL)
		*out = jv_array_append(*out, JV_OBJECT(jv_string("role"),
						       jv_string("user"),
						       jv_string("content"),
						       texts));
	else
		jv_free(texts);
	ret = 0;
out:
	jv_free(blocks);
	jv_free(c);
	return ret;
}

static int assistant_message(jv *out, jv m, cave_err *e)
{
	jv c = pj_get(m, "content"), blocks = cave_proto_content_blocks(c);
	jv calls = jv_array(), msg;
	int n = pj_len(blocks), ret = -1;
	for (int i = 0; i < n; i++) {
		jv b = pj_at(blocks, i), input;
		const char *t = pj_str(b, "type");
		if (!t || strcmp(t, "tool_use") != 0) {
			jv_free(b);
			continue;
		}
		input = pj_get(b, "input");
		if (!pj_str(b, "id") || !pj_str(b, "name") ||
		    !pj_is(input, JV_KIND_OBJECT)) {
			jv_free(input);
			jv_free(b);
			cave_errf(e, "bad_request", "bad tool_use block");
			goto out;
		}
		calls = jv_array_append(calls, JV_OBJECT(
			jv_string("id"), pj_get(b, "id"),
			jv_string("type"), jv_string("function"),
			jv_string("function"),
			JV_OBJECT(jv_string("name"), pj_get(b, "name"),
				  jv_string("arguments"),
				  jv_dump_string(input, 0))));
		jv_free(b);
	}
	msg = JV_OBJECT(jv_string("role"), jv_string("assistant"),
			jv_string("content"), cave_proto_texts(blocks, "text"));
	if (pj_len(calls) > 0) {
		msg = jv_object_set(msg, jv_string("tool_calls"), calls);
		calls = jv_invalid();
	}
	*out = jv_array_append(*out, msg);
	ret = 0;
out:
	jv_free(calls);
	jv_free(blocks);
	jv_free(c);
	return ret;
}

static jv messages(jv req, cave_err *e)
{
	jv msgs = pj_get(req, "messages"), out = jv_array();
	int n = pj_len(msgs);
	if (pj_str(req, "system") && *pj_str(req, "system"))
		out = jv_array_append(out, JV_OBJECT(jv_string("role"),
						     jv_string("system"),
						     jv_string("content"),
						     pj_get(req, "system")));
	for (int i = 0; i < n; i++) {
		jv m = pj_at(msgs, i);
		const char *role = pj_str(m, "role");
		int r = strcmp(role, "user") == 0 ? user_message(&out, m, e)
						  : assistant_message(&out, m, e);
		jv_free(m);
		if (r < 0) {
			jv_free(out);
			out = jv_invalid();
			break;
		}
	}
	jv_free(msgs);
	return out;
}

static jv function(jv decl)
{
	return JV_OBJECT(jv_string("type"), jv_string("function"), jv_string("function"), decl);
}

static jv tools(jv req, cave_err *e)
{
	return cave_proto_tools(req, jv_object(), "parameters", true, function, e);
}

int cave_chat_build(jv req, const char *base, struct cave_http_req *out,
		    cave_err *e)
{
	const struct cave_reasoning_level *lvl;
	int64_t max = pj_int(req, "max_output_tokens");
	bool stream = !pj_has(req, "stream") || pj_true(req, "stream");
	jv body = jv_invalid(), msgs = jv_invalid(), t = jv_invalid();
	int ret = -1;

	if (cave_proto_reasoning(req, &lvl, e) < 0)
		goto out;
	msgs = messages(req, e);
	if (!jv_is_valid(msgs))
		goto out;
	t = tools(req, e);
	if (!jv_is_valid(t))
		goto out;
	body = JV_OBJECT(jv_string("model"), pj_get(req, "model"),
			 jv_string("messages"), msgs);
	msgs = jv_invalid();
	if (pj_len(t) > 0) {
		body = jv_object_set(body, jv_string("tools"), t);
		t = jv_invalid();
	}
	if (max > 0)
		body = jv_object_set(body, jv_string("max_completion_tokens"),
				     jv_number((double)max));
	if (lvl)
		body = jv_object_set(body, jv_string("reasoning_effort"),
				     jv_string(lvl->name));
	body = jv_object_set(body, jv_string("stream"),
			     stream ? jv_true() : jv_false());
	if (stream)
		body = jv_object_set(body, jv_string("stream_options"),
				     JV_OBJECT(jv_string("include_usage"),
					       jv_true()));
	ret = cave_proto_request(out, base, OPENAI_BASE, NULL, stream, body, e,
			       "/chat/completions");
	body = jv_invalid(); /* consumed */
out:
	jv_free(body);
	jv_free(msgs);
	jv_free(t);
	return ret;
}

/* ---- response ---- */

static int add_text(struct cave_acc *acc, const char *t, cave_delta_fn fn,
		    void *ctx, cave_err *e, const char *code)
{
	struct acc_slot *sl = cave_acc_slot_find(acc, TEXT_KEY);
	if (!t || !*t)
		return 0;
	if (!sl && !(sl = cave_acc_slot_new(acc, SLOT_TEXT, TEXT_KEY, e, code)))
		return -1;
	if (cave_acc_slot_add(acc, sl, t, strlen(t), e, code) < 0)
		return -1;
	if (fn)
		fn(ctx, t, strlen(t));
	return 0;
}

/* One tool call fragment (borrowed) of a stream, or a whole call. */
static int add_call(struct cave_acc *acc, jv tc, long key, cave_err *e,
		    const char *code)
{
	struct acc_slot *sl = cave_acc_slot_find(acc, key);
	jv f = pj_get(tc, "function");
	const char *id = pj_str(tc, "id"), *name = pj_str(f, "name");
	const char *args = pj_str(f, "arguments");
	int ret = -1;
	if (!sl) {
		if (!(sl = cave_acc_slot_new(acc, SLOT_TOOL, key, e, code)))
			goto out;
	}
	if (id && *id && !sl->id)
		sl->id = cave_xstrdup(id);
	if (name && *name && !sl->name)
		sl->name = cave_xstrdup(name);
	if (args && cave_acc_slot_add(acc, sl, args, strlen(args), e, code) < 0)
		goto out;
	ret = 0;
out:
	jv_free(f);
	return ret;
}

/* Parses every tool call's arguments; each needs an id and a name. */
static int finish_calls(struct cave_acc *acc, cave_err *e, const char *code)
{
	for (size_t i = 0; i < acc->nslots; i++) {
		struct acc_slot *sl = &acc->slots[i];
		if (sl->kind != SLOT_TOOL)
			continue;
		if (!sl->id || !sl->name)
			return cave_errf(e, code, "tool call without id or name");
		if (cave_acc_slot_parse(sl, e, code) < 0)
			return -1;
	}
	return 0;
}

static int fail_error(jv obj, cave_err *e)
{
	jv err = pj_get(obj, "error");
	const char *kind = pj_str(err, "code");
	int ret;
	if (!kind)
		kind = pj_str(err, "type");
	ret = cave_proto_fail(e, kind, pj_str(err, "message"));
	jv_free(err);
	return ret;
}

int cave_chat_event(struct cave_acc *acc, jv obj, cave_delta_fn fn, void *ctx,
		    cave_err *e)
{
	jv choices, ch = jv_invalid(), d = jv_invalid(), calls = jv_invalid();
	jv usage;
	const char *fin;
	int n, ret = -1;

	if (pj_has(obj, "error"))
		return fail_error(obj, e);
	cave_acc_set_str(&acc->response_id, pj_get(obj, "id"));
	usage = pj_get(obj, "usage");
	if (pj_is(usage, JV_KIND_OBJECT)) {
		jv_free(acc->usage_raw);
		acc->usage_raw = jv_copy(usage);
	}
	jv_free(usage);
	choices = pj_get(obj, "choices");
	ch = pj_at(choices, 0); /* cave asks for one choice */
	if (!pj_is(ch, JV_KIND_OBJECT)) {
		/* the usage chunk has no choices: the stream's last word */
		if (pj_is(acc->usage_raw, JV_KIND_OBJECT) && acc->provider_stop)
			acc->complete = true;
		ret = 0;
		goto out;
	}
	d = pj_get(ch, "delta");
	if (add_text(acc, pj_str(d, "content"), fn, ctx, e,
		     "malformed_stream") < 0)
		goto out;
	if (pj_str(d, "refusal") && *pj_str(d, "refusal")) {
		acc->refused = true;
		if (add_text(acc, pj_str(d, "refusal"), fn, ctx, e,
			     "malformed_stream") < 0)
			goto out;
	}
	calls = pj_get(d, "tool_calls");
	n = pj_len(calls);
	for (int i = 0; i < n; i++) {
		jv tc = pj_at(calls, i);
		int64_t index = pj_int(tc, "index");
		int r = index < 0 ? cave_errf(e, "malformed_stream",
					      "tool call fragment without index")
				  : add_call(acc, tc, (long)index, e,
					     "malformed_stream");
		jv_free(tc);
		if (r < 0)
			goto out;
	}
	fin = pj_str(ch, "finish_reason");
	if (fin) {
		set_stop(acc, fin);
		if (finish_calls(acc, e, "malformed_stream") < 0)
			goto out;
	}
	ret = 0;
out:
	jv_free(calls);
	jv_free(d);
	jv_free(ch);
	jv_free(choices);
	return ret;
}

int cave_chat_done(struct cave_acc *acc, cave_err *e)
{
	if (finish_calls(acc, e, "malformed_stream") < 0)
		return -1;
	acc->complete = true;
	return 0;
}

int cave_chat_body(struct cave_acc *acc, jv obj, cave_err *e)
{
	jv choices, ch, m = jv_invalid(), calls = jv_invalid();
	const char *fin;
	int n, ret = -1;
	if (pj_has(obj, "error"))
		return fail_error(obj, e);
	choices = pj_get(obj, "choices");
	ch = pj_at(choices, 0);
	if (!pj_is(ch, JV_KIND_OBJECT)) {
		cave_errf(e, "malformed_response", "response has no choices");
		goto out;
	}
	cave_acc_set_str(&acc->response_id, pj_get(obj, "id"));
	m = pj_get(ch, "message");
	if (add_text(acc, pj_str(m, "content"), NULL, NULL, e,
		     "malformed_response") < 0)
		goto out;
	if (pj_str(m, "refusal") && *pj_str(m, "refusal")) {
		acc->refused = true;
		if (add_text(acc, pj_str(m, "refusal"), NULL, NULL, e,
			     "malformed_response") < 0)
			goto out;
	}
	calls = pj_get(m, "tool_calls");
	n = pj_len(calls);
	for (int i = 0; i < n; i++) {
		jv tc = pj_at(calls, i);
		int r = add_call(acc, tc, i, e, "malformed_response");
		jv_free(tc);
		if (r < 0)
			goto out;
	}
	if (finish_calls(acc, e, "malformed_response") < 0)
		goto out;
	fin = pj_str(ch, "finish_reason");
	if (fin)
		set_stop(acc, fin);
	jv_free(acc->usage_raw);
	acc->usage_raw = pj_get(obj, "usage");
	if (!pj_is(acc->usage_raw, JV_KIND_OBJECT)) {
		jv_free(acc->usage_raw);
		acc->usage_raw = jv_null();
	}
	ret = 0;
out:
	jv_free(calls);
	jv_free(m);
	jv_free(ch);
	jv_free(choices);
	return ret;
}
