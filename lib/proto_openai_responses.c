/* proto_openai_responses.c: the OpenAI Responses API (POST
 * {base}/responses), its request body and its typed event stream. It never
 * adds the key header, never asks the provider to store a response, and
 * never passes reasoning summaries on as answer text. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "msg.h"
#include "proto.h"
#include "proto_impl.h"

#define OPENAI_BASE "https://api.openai.com/v1"

static const struct cave_stop_word incomplete[] = {
	{"max_output_tokens", "max_tokens"},
	{"content_filter", "refusal"},
};

/* The stop of a response object (borrowed). */
static void set_stop(struct cave_acc *acc, jv resp)
{
	const char *status = pj_str(resp, "status");
	jv det;
	const char *reason;
	if (!status)
		return;
	if (strcmp(status, "completed") == 0) {
		cave_acc_stop(acc, status, "end_turn");
		return;
	}
	det = pj_get(resp, "incomplete_details");
	reason = pj_str(det, "reason");
	cave_acc_stop(acc, reason ? reason : status, CAVE_STOP_LOOKUP(incomplete, reason));
	jv_free(det);
}

/* ---- request ---- */

/* Appends the pending text blocks as one message item and empties them. */
static void flush_texts(jv *items, jv *pending, const char *role)
{
	bool asst = strcmp(role, "assistant") == 0;
	jv content;
	if (pj_len(*pending) <= 0)
		return;
	content = cave_proto_texts(*pending, asst ? "output_text"
						  : "input_text");
	*items = jv_array_append(*items, JV_OBJECT(
		jv_string("type"), jv_string("message"),
		jv_string("role"), jv_string(role),
		jv_string("content"), content));
	jv_free(*pending);
	*pending = jv_array();
}

static int message_items(jv *items, jv m, cave_err *e)
{
	const char *role = pj_str(m, "role");
	jv c = pj_get(m, "content"), blocks = cave_proto_content_blocks(c);
	jv pending = jv_array();
	int n = pj_len(blocks), ret = -1;
	for (int i = 0; i < n; i++) {
		jv b = pj_at(blocks, i), input;
		const char *t = pj_str(b, "type");
		if (t && strcmp(t, "text") == 0) {
			pending = jv_array_append(pending, b);
			continue;
		}
		flush_texts(items, &pending, role);
		if (t && strcmp(t, "tool_use") == 0) {
			input = pj_get(b, "input");
			if (!pj_str(b, "id") || !pj_str(b, "name") ||
			    !pj_is(input, JV_KIND_OBJECT)) {
				jv_free(input);
				jv_free(b);
				cave_errf(e, "bad_request", "bad tool_use block");
				goto out;
			}
			*items = jv_array_append(*items, JV_OBJECT(
				jv_string("type"), jv_string("function_call"),
				jv_string("call_id"), pj_get(b, "id"),
				jv_string("name"), pj_get(b, "name"),
				jv_string("arguments"),
				jv_dump_string(input, 0)));
		} else if (t && strcmp(t, "tool_result") == 0) {
			if (!pj_str(b, "tool_use_id")) {
				jv_free(b);
				cave_errf(e, "bad_request",
					  "tool_result without tool_use_id");
				goto out;
			}
			*items = jv_array_append(*items, JV_OBJECT(
				jv_string("type"),
				jv_string("function_call_output"),
				jv_string("call_id"), pj_get(b, "tool_use_id"),
				jv_string("output"),
				jv_string(pj_str(b, "content")
						  ? pj_str(b, "content") : "")));
		}
		/* thinking blocks of another API do not travel */
		jv_free(b);
	}
	flush_texts(items, &pending, role);
	ret = 0;
out:
	jv_free(pending);
	jv_free(blocks);
	jv_free(c);
	return ret;
}

static jv input_items(jv req, cave_err *e)
{
	jv msgs = pj_get(req, "messages"), items = jv_array();
	int n = pj_len(msgs);
	for (int i = 0; i < n; i++) {
		jv m = pj_at(msgs, i);
		int r = message_items(&items, m, e);
		jv_free(m);
		if (r < 0) {
			jv_free(items);
			items = jv_invalid();
			break;
		}
	}
	jv_free(msgs);
	return items;
}

/* strict schemas need every property required: not ours */
static jv not_strict(jv decl)
{
	return jv_object_set(decl, jv_string("strict"), jv_false());
}

static jv tools(jv req, cave_err *e)
{
	return cave_proto_tools(req, JV_OBJECT(jv_string("type"), jv_string("function")),
				"parameters", true, not_strict, e);
}

int cave_responses_build(jv req, const char *base, struct cave_http_req *out,
			 cave_err *e)
{
	const struct cave_reasoning_level *lvl;
	int64_t max = pj_int(req, "max_output_tokens");
	bool stream = !pj_has(req, "stream") || pj_true(req, "stream");
	jv body = jv_invalid(), items = jv_invalid(), t = jv_invalid();
	int ret = -1;

	if (cave_proto_reasoning(req, &lvl, e) < 0)
		goto out;
	items = input_items(req, e);
	if (!jv_is_valid(items))
		goto out;
	t = tools(req, e);
	if (!jv_is_valid(t))
		goto out;
	body = JV_OBJECT(jv_string("model"), pj_get(req, "model"));
	if (pj_str(req, "system") && *pj_str(req, "system"))
		body = jv_object_set(body, jv_string("instructions"),
				     pj_get(req, "system"));
	body = jv_object_set(body, jv_string("input"), items);
	items = jv_invalid();
	if (pj_len(t) > 0) {
		body = jv_object_set(body, jv_string("tools"), t);
		t = jv_invalid();
	}
	if (max > 0)
		body = jv_object_set(body, jv_string("max_output_tokens"),
				     jv_number((double)max));
	if (lvl)
		body = jv_object_set(body, jv_string("reasoning"),
				     JV_OBJECT(jv_string("effort"),
					       jv_string(lvl->name)));
	body = jv_object_set(body, jv_string("store"), jv_false());
	body = jv_object_set(body, jv_string("stream"),
			     stream ? jv_true() : jv_false());
	ret = cave_proto_request(out, base, OPENAI_BASE, NULL, stream, body, e, "/responses");
	body = jv_invalid(); /* consumed */
out:
	jv_free(body);
	jv_free(items);
	jv_free(t);
	return ret;
}

/* ---- response ---- */

/* Opens the slot of an output item (borrowed) at index. */
static struct acc_slot *open_item(struct cave_acc *acc, long index, jv item,
				  cave_err *e, const char *code)
{
	const char *type = pj_str(item, "type");
	struct acc_slot *sl;
	enum acc_kind kind = SLOT_SKIP;
	if (type && strcmp(type, "message") == 0)
		kind = SLOT_TEXT;
	else if (type && strcmp(type, "function_call") == 0)
		kind = SLOT_TOOL;
	sl = cave_acc_slot_new(acc, kind, index, e, code);
	if (!sl)
		return NULL;
	if (pj_str(item, "id"))
		sl->item = cave_xstrdup(pj_str(item, "id"));
	if (kind == SLOT_TOOL) {
		if (pj_str(item, "call_id"))
			sl->id = cave_xstrdup(pj_str(item, "call_id"));
		if (pj_str(item, "name"))
			sl->name = cave_xstrdup(pj_str(item, "name"));
	}
	return sl;
}

/* The slot an event (borrowed) names by item_id or output_index. */
static struct acc_slot *slot_of(struct cave_acc *acc, jv obj)
{
	struct acc_slot *sl = cave_acc_slot_item(acc, pj_str(obj, "item_id"));
	int64_t index = pj_int(obj, "output_index");
	if (!sl && index >= 0)
		sl = cave_acc_slot_find(acc, (long)index);
	return sl;
}

/* A tool call is whole: its arguments (replacing the fragments when the
 * provider restates them) must parse, and it needs an id and a name. */
static int finish_call(struct cave_acc *acc, struct acc_slot *sl,
		       const char *args, cave_err *e, const char *code)
{
	if (args) {
		acc->bytes -= sl->buf.len < acc->bytes ? sl->buf.len : acc->bytes;
		cave_buf_reset(&sl->buf);
		if (cave_acc_slot_add(acc, sl, args, strlen(args), e, code) < 0)
			return -1;
		jv_free(sl->input);
		sl->input = jv_invalid();
	}
	if (!sl->id || !sl->name)
		return cave_errf(e, code, "function_call without call_id or name");
	return cave_acc_slot_parse(sl, e, code);
}

static int text_delta(struct cave_acc *acc, jv obj, bool refusal,
		      cave_delta_fn fn, void *ctx, cave_err *e)
{
	struct acc_slot *sl = slot_of(acc, obj);
	const char *d = pj_str(obj, "delta");
	if (!d)
		return cave_errf(e, "malformed_stream", "text delta without delta");
	if (!sl) {
		int64_t index = pj_int(obj, "output_index");
		sl = cave_acc_slot_new(acc, SLOT_TEXT, (long)index, e,
				       "malformed_stream");
		if (!sl)
			return -1;
	}
	if (sl->kind != SLOT_TEXT)
		return cave_errf(e, "malformed_stream",
				 "text delta for a non-message item");
	if (refusal)
		acc->refused = true;
	if (cave_acc_slot_add(acc, sl, d, strlen(d), e, "malformed_stream") < 0)
		return -1;
	if (fn && *d)
		fn(ctx, d, strlen(d));
	return 0;
}

static int fail_obj(jv err, cave_err *e)
{
	const char *kind = pj_str(err, "code");
	if (!kind)
		kind = pj_str(err, "type");
	return cave_proto_fail(e, kind, pj_str(err, "message"));
}

static void take_usage(struct cave_acc *acc, jv resp)
{
	jv u = pj_get(resp, "usage");
	if (pj_is(u, JV_KIND_OBJECT)) {
		jv_free(acc->usage_raw);
		acc->usage_raw = u;
	} else {
		jv_free(u);
	}
}

int cave_responses_event(struct cave_acc *acc, const char *event, jv obj,
			 cave_delta_fn fn, void *ctx, cave_err *e)
{
	const char *type = pj_str(obj, "type");
	jv resp = pj_get(obj, "response"), item = jv_invalid();
	struct acc_slot *sl;
	int ret = -1;
	if (!type)
		type = event;
	if (strcmp(type, "response.created") == 0 ||
	    strcmp(type, "response.in_progress") == 0) {
		cave_acc_set_str(&acc->response_id, pj_get(resp, "id"));
	} else if (strcmp(type, "response.output_item.added") == 0) {
		int64_t index = pj_int(obj, "output_index");
		item = pj_get(obj, "item");
		if (index < 0 || !pj_is(item, JV_KIND_OBJECT)) {
			cave_errf(e, "malformed_stream",
				  "output_item.added without an item");
			goto out;
		}
		if (!open_item(acc, (long)index, item, e, "malformed_stream"))
			goto out;
	} else if (strcmp(type, "response.output_text.delta") == 0 ||
		   strcmp(type, "response.refusal.delta") == 0) {
		if (text_delta(acc, obj, type[9] == 'r', fn, ctx, e) < 0)
			goto out;
	} else if (strcmp(type, "response.function_call_arguments.delta") == 0) {
		const char *d = pj_str(obj, "delta");
		sl = slot_of(acc, obj);
		if (!sl || sl->kind != SLOT_TOOL || !d) {
			cave_errf(e, "malformed_stream",
				  "arguments delta for no function call");
			goto out;
		}
		if (cave_acc_slot_add(acc, sl, d, strlen(d), e,
				      "malformed_stream") < 0)
			goto out;
	} else if (strcmp(type, "response.function_call_arguments.done") == 0) {
		sl = slot_of(acc, obj);
		if (!sl || sl->kind != SLOT_TOOL) {
			cave_errf(e, "malformed_stream",
				  "arguments done for no function call");
			goto out;
		}
		if (finish_call(acc, sl, pj_str(obj, "arguments"), e,
				"malformed_stream") < 0)
			goto out;
	} else if (strcmp(type, "response.output_item.done") == 0) {
		item = pj_get(obj, "item");
		sl = slot_of(acc, obj);
		if (sl && sl->kind == SLOT_TOOL) {
			if (!sl->id && pj_str(item, "call_id"))
				sl->id = cave_xstrdup(pj_str(item, "call_id"));
			if (!sl->name && pj_str(item, "name"))
				sl->name = cave_xstrdup(pj_str(item, "name"));
			if (finish_call(acc, sl, pj_str(item, "arguments"), e,
					"malformed_stream") < 0)
				goto out;
		}
	} else if (strcmp(type, "response.completed") == 0 ||
		   strcmp(type, "response.incomplete") == 0) {
		cave_acc_set_str(&acc->response_id, pj_get(resp, "id"));
		take_usage(acc, resp);
		set_stop(acc, resp);
		for (size_t i = 0; i < acc->nslots; i++)
			if (acc->slots[i].kind == SLOT_TOOL &&
			    strcmp(type, "response.completed") == 0 &&
			    finish_call(acc, &acc->slots[i], NULL, e,
					"malformed_stream") < 0)
				goto out;
		acc->complete = true;
	} else if (strcmp(type, "response.failed") == 0) {
		jv err = pj_get(resp, "error");
		take_usage(acc, resp);
		fail_obj(err, e);
		jv_free(err);
		goto out;
	} else if (strcmp(type, "error") == 0) {
		jv err = pj_get(obj, "error");
		fail_obj(pj_is(err, JV_KIND_OBJECT) ? err : obj, e);
		jv_free(err);
		goto out;
	}
	/* reasoning summaries, content parts, annotations: nothing to keep */
	ret = 0;
out:
	jv_free(item);
	jv_free(resp);
	return ret;
}

int cave_responses_body(struct cave_acc *acc, jv obj, cave_err *e)
{
	jv output = pj_get(obj, "output"), err = pj_get(obj, "error");
	const char *status = pj_str(obj, "status");
	int n, ret = -1;
	if (pj_is(err, JV_KIND_OBJECT) ||
	    (status && strcmp(status, "failed") == 0)) {
		fail_obj(err, e);
		goto out;
	}
	n = pj_len(output);
	if (n < 0) {
		cave_errf(e, "malformed_response", "response has no output");
		goto out;
	}
	cave_acc_set_str(&acc->response_id, pj_get(obj, "id"));
	for (int i = 0; i < n; i++) {
		jv item = pj_at(output, i), content = pj_get(item, "content");
		struct acc_slot *sl = open_item(acc, i, item, e,
						"malformed_response");
		int nc = pj_len(content), r = sl ? 0 : -1;
		for (int k = 0; sl && r == 0 && sl->kind == SLOT_TEXT && k < nc;
		     k++) {
			jv part = pj_at(content, k);
			const char *pt = pj_str(part, "type"), *text = NULL;
			if (pt && strcmp(pt, "output_text") == 0)
				text = pj_str(part, "text");
			else if (pt && strcmp(pt, "refusal") == 0 &&
				 (text = pj_str(part, "refusal")))
				acc->refused = true;
			if (text)
				r = cave_acc_slot_add(acc, sl, text, strlen(text),
						      e, "malformed_response");
			jv_free(part);
		}
		if (r == 0 && sl && sl->kind == SLOT_TOOL)
			r = finish_call(acc, sl, pj_str(item, "arguments"), e,
					"malformed_response");
		jv_free(content);
		jv_free(item);
		if (r < 0)
			goto out;
	}
	take_usage(acc, obj);
	set_stop(acc, obj);
	ret = 0;
out:
	jv_free(err);
	jv_free(output);
	return ret;
}
