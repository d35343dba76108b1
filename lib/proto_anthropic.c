/* proto_anthropic.c: the Anthropic Messages API (POST /v1/messages), its
 * request body and its event stream. It never adds the key header and never
 * passes thinking text on as answer text. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "msg.h"
#include "proto.h"
#include "proto_impl.h"

#define ANTHROPIC_BASE "https://api.anthropic.com"
#define ANTHROPIC_VERSION "2023-06-01"
/* Anthropic refuses thinking budgets below this. */
#define THINKING_MIN 1024

static const struct cave_stop_word stops[] = {
	{"end_turn", "end_turn"},
	{"tool_use", "tool_use"},
	{"max_tokens", "max_tokens"},
	{"stop_sequence", "stop_sequence"},
	{"refusal", "refusal"},
	{"model_context_window_exceeded", "max_tokens"},
};

static void set_stop(struct cave_acc *acc, const char *word)
{
	if (word)
		cave_acc_stop(acc, word, CAVE_STOP_LOOKUP(stops, word));
}

/* ---- request ---- */

/* One neutral block (borrowed) as an Anthropic block, or jv_invalid for a
 * block this API does not take. */
static jv block(jv b, cave_err *e)
{
	const char *type = pj_str(b, "type");
	if (!type)
		goto bad;
	if (strcmp(type, "text") == 0) {
		if (!pj_str(b, "text"))
			goto bad;
		return JV_OBJECT(jv_string("type"), jv_string("text"),
				 jv_string("text"), pj_get(b, "text"));
	}
	if (strcmp(type, "tool_use") == 0) {
		jv input = pj_get(b, "input");
		if (!pj_str(b, "id") || !pj_str(b, "name") ||
		    !pj_is(input, JV_KIND_OBJECT)) {
			jv_free(input);
			goto bad;
		}
		return JV_OBJECT(jv_string("type"), jv_string("tool_use"),
				 jv_string("id"), pj_get(b, "id"),
				 jv_string("name"), pj_get(b, "name"),
				 jv_string("input"), input);
	}
	if (strcmp(type, "tool_result") == 0) {
		jv r;
		if (!pj_str(b, "tool_use_id"))
			goto bad;
		r = JV_OBJECT(jv_string("type"), jv_string("tool_result"),
			      jv_string("tool_use_id"), pj_get(b, "tool_use_id"),
			      jv_string("content"),
			      jv_string(pj_str(b, "content") ? pj_str(b, "content")
							     : ""));
		if (pj_true(b, "is_error"))
			r = jv_object_set(r, jv_string("is_error"), jv_true());
		return r;
	}
	if (strcmp(type, "thinking") == 0 && pj_str(b, "signature"))
		return JV_OBJECT(jv_string("type"), jv_string("thinking"),
				 jv_string("thinking"),
				 jv_string(pj_str(b, "thinking")
						   ? pj_str(b, "thinking") : ""),
				 jv_string("signature"), pj_get(b, "signature"));
	if (strcmp(type, "redacted_thinking") == 0 && pj_str(b, "data"))
		return JV_OBJECT(jv_string("type"),
				 jv_string("redacted_thinking"),
				 jv_string("data"), pj_get(b, "data"));
	if (strcmp(type, "thinking") == 0)
		return jv_null(); /* without a signature it cannot go back */
bad:
	cave_errf(e, "bad_request", "bad content block%s%.40s",
		  type ? " " : "", type ? type : "");
	return jv_invalid();
}

static jv messages(jv req, cave_err *e)
{
	jv msgs = pj_get(req, "messages"), out = jv_array();
	int n = pj_len(msgs);
	for (int i = 0; i < n; i++) {
		jv m = pj_at(msgs, i), c = pj_get(m, "content"), blocks;
		int nb;
		if (pj_is(c, JV_KIND_STRING)) {
			out = jv_array_append(out, JV_OBJECT(
				jv_string("role"), pj_get(m, "role"),
				jv_string("content"), c));
			jv_free(m);
			continue;
		}
		blocks = jv_array();
		nb = pj_len(c);
		for (int k = 0; k < nb; k++) {
			jv b = pj_at(c, k), ab = block(b, e);
			jv_free(b);
			if (!jv_is_valid(ab)) {
				jv_free(blocks);
				jv_free(c);
				jv_free(m);
				jv_free(out);
				out = jv_invalid();
				goto out;
			}
			if (jv_get_kind(ab) == JV_KIND_NULL)
				jv_free(ab);
			else
				blocks = jv_array_append(blocks, ab);
		}
		out = jv_array_append(out, JV_OBJECT(jv_string("role"),
						     pj_get(m, "role"),
						     jv_string("content"),
						     blocks));
		jv_free(c);
		jv_free(m);
	}
out:
	jv_free(msgs);
	return out;
}

static jv tools(jv req, cave_err *e)
{
	return cave_proto_tools(req, jv_object(), "input_schema", true, NULL, e);
}

int cave_anthropic_build(jv req, const char *base, struct cave_http_req *out,
			 cave_err *e)
{
	const struct cave_reasoning_level *lvl;
	int64_t max = pj_int(req, "max_output_tokens");
	bool stream = !pj_has(req, "stream") || pj_true(req, "stream");
	jv body = jv_invalid(), msgs = jv_invalid(), t = jv_invalid();
	int ret = -1;

	if (max < 1) {
		cave_errf(e, "bad_request",
			  "anthropic needs max_output_tokens of at least 1");
		goto out;
	}
	if (cave_proto_reasoning(req, &lvl, e) < 0)
		goto out;
	msgs = messages(req, e);
	if (!jv_is_valid(msgs))
		goto out;
	t = tools(req, e);
	if (!jv_is_valid(t))
		goto out;
	body = JV_OBJECT(jv_string("model"), pj_get(req, "model"),
			 jv_string("max_tokens"), jv_number((double)max));
	if (pj_str(req, "system") && *pj_str(req, "system"))
		body = jv_object_set(body, jv_string("system"),
				     pj_get(req, "system"));
	body = jv_object_set(body, jv_string("messages"), msgs);
	msgs = jv_invalid();
	if (pj_len(t) > 0) {
		body = jv_object_set(body, jv_string("tools"), t);
		t = jv_invalid();
	}
	if (lvl) {
		/* the budget must stay below max_tokens; too small a room
		 * means no thinking rather than a refused request */
		int64_t budget = lvl->anthropic_budget;
		if (budget > max - 1)
			budget = max - 1;
		if (budget >= THINKING_MIN)
			body = jv_object_set(
				body, jv_string("thinking"),
				JV_OBJECT(jv_string("type"),
					  jv_string("enabled"),
					  jv_string("budget_tokens"),
					  jv_number((double)budget)));
	}
	body = jv_object_set(body, jv_string("stream"),
			     stream ? jv_true() : jv_false());
	ret = cave_proto_request(out, base, ANTHROPIC_BASE, "anthropic-version: " ANTHROPIC_VERSION,
			       stream, body, e, "/v1/messages");
	body = jv_invalid(); /* consumed */
out:
	jv_free(body);
	jv_free(msgs);
	jv_free(t);
	return ret;
}

/* ---- response ---- */

/* Opens the slot for a content block (borrowed cb) at index. */
static int open_block(struct cave_acc *acc, long index, jv cb, bool whole,
		      cave_delta_fn fn, void *ctx, cave_err *e,
		      const char *code)
{
	const char *type = pj_str(cb, "type");
	struct acc_slot *sl;
	if (!type)
		return cave_errf(e, code, "content block without a type");
	if (strcmp(type, "text") == 0) {
		const char *t = pj_str(cb, "text");
		sl = cave_acc_slot_new(acc, SLOT_TEXT, index, e, code);
		if (!sl)
			return -1;
		if (t && *t) {
			if (cave_acc_slot_add(acc, sl, t, strlen(t), e, code) < 0)
				return -1;
			if (fn)
				fn(ctx, t, strlen(t));
		}
		return 0;
	}
	if (strcmp(type, "tool_use") == 0) {
		jv input = pj_get(cb, "input");
		if (!pj_str(cb, "id") || !pj_str(cb, "name")) {
			jv_free(input);
			return cave_errf(e, code, "tool_use without id or name");
		}
		sl = cave_acc_slot_new(acc, SLOT_TOOL, index, e, code);
		if (!sl) {
			jv_free(input);
			return -1;
		}
		sl->id = cave_xstrdup(pj_str(cb, "id"));
		sl->name = cave_xstrdup(pj_str(cb, "name"));
		/* whole bodies carry the input; streams send {} then deltas */
		if (!whole) {
			jv_free(input);
			return 0;
		}
		if (!pj_is(input, JV_KIND_OBJECT)) {
			jv_free(input);
			return cave_errf(e, code, "tool_use input not an object");
		}
		sl->input = input;
		return 0;
	}
	if (strcmp(type, "thinking") == 0) {
		const char *t = pj_str(cb, "thinking"), *sig = pj_str(cb, "signature");
		sl = cave_acc_slot_new(acc, SLOT_THINKING, index, e, code);
		if (!sl)
			return -1;
		if (t && cave_acc_slot_add(acc, sl, t, strlen(t), e, code) < 0)
			return -1;
		if (sig && *sig)
			sl->sig = cave_xstrdup(sig);
		return 0;
	}
	if (strcmp(type, "redacted_thinking") == 0) {
		const char *d = pj_str(cb, "data");
		sl = cave_acc_slot_new(acc, SLOT_REDACTED, index, e, code);
		if (!sl)
			return -1;
		return d ? cave_acc_slot_add(acc, sl, d, strlen(d), e, code) : 0;
	}
	/* server tools and blocks this layer does not carry */
	return cave_acc_slot_new(acc, SLOT_SKIP, index, e, code) ? 0 : -1;
}

/* Merges a usage object (borrowed) into the raw usage: message_delta
 * counts are cumulative and replace what came before; nulls do not. */
static void merge_usage(struct cave_acc *acc, jv usage)
{
	if (!pj_is(usage, JV_KIND_OBJECT))
		return;
	if (jv_get_kind(acc->usage_raw) != JV_KIND_OBJECT) {
		jv_free(acc->usage_raw);
		acc->usage_raw = jv_object();
	}
	jv_object_foreach(usage, k, v) {
		if (jv_get_kind(v) == JV_KIND_NULL) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		acc->usage_raw = jv_object_set(acc->usage_raw, k, v);
	}
}

static int delta(struct cave_acc *acc, jv obj, cave_delta_fn fn, void *ctx,
		 cave_err *e)
{
	int64_t index = pj_int(obj, "index");
	struct acc_slot *sl = index >= 0 ? cave_acc_slot_find(acc, (long)index)
					 : NULL;
	jv d = pj_get(obj, "delta");
	const char *type = pj_str(d, "type");
	int ret = -1;
	if (!sl || !type) {
		cave_errf(e, "malformed_stream",
			  "content_block_delta for no open block");
		goto out;
	}
	if (strcmp(type, "text_delta") == 0) {
		const char *t = pj_str(d, "text");
		if (sl->kind != SLOT_TEXT || !t) {
			cave_errf(e, "malformed_stream", "stray text_delta");
			goto out;
		}
		if (cave_acc_slot_add(acc, sl, t, strlen(t), e,
				      "malformed_stream") < 0)
			goto out;
		if (fn && *t)
			fn(ctx, t, strlen(t));
	} else if (strcmp(type, "input_json_delta") == 0) {
		const char *p = pj_str(d, "partial_json");
		if (sl->kind == SLOT_SKIP)
			goto done;
		if (sl->kind != SLOT_TOOL || !p) {
			cave_errf(e, "malformed_stream",
				  "stray input_json_delta");
			goto out;
		}
		if (cave_acc_slot_add(acc, sl, p, strlen(p), e,
				      "malformed_stream") < 0)
			goto out;
	} else if (strcmp(type, "thinking_delta") == 0) {
		const char *t = pj_str(d, "thinking");
		if (sl->kind == SLOT_THINKING && t &&
		    cave_acc_slot_add(acc, sl, t, strlen(t), e,
				      "malformed_stream") < 0)
			goto out;
	} else if (strcmp(type, "signature_delta") == 0) {
		const char *s = pj_str(d, "signature");
		if (sl->kind == SLOT_THINKING && s) {
			free(sl->sig);
			sl->sig = cave_xstrdup(s);
		}
	}
	/* citations_delta and later kinds carry nothing this layer keeps */
done:
	ret = 0;
out:
	jv_free(d);
	return ret;
}

static int stream_error(jv obj, cave_err *e)
{
	jv err = pj_get(obj, "error");
	int ret = cave_proto_fail(e, pj_str(err, "type"),
				  pj_str(err, "message"));
	jv_free(err);
	return ret;
}

int cave_anthropic_event(struct cave_acc *acc, const char *event, jv obj,
			 cave_delta_fn fn, void *ctx, cave_err *e)
{
	const char *type = pj_str(obj, "type");
	int ret = -1;
	if (!type)
		type = event;
	if (strcmp(type, "message_start") == 0) {
		jv m = pj_get(obj, "message"), u = pj_get(m, "usage");
		cave_acc_set_str(&acc->response_id, pj_get(m, "id"));
		merge_usage(acc, u);
		jv_free(u);
		jv_free(m);
		ret = 0;
	} else if (strcmp(type, "content_block_start") == 0) {
		int64_t index = pj_int(obj, "index");
		jv cb = pj_get(obj, "content_block");
		if (index < 0 || cave_acc_slot_find(acc, (long)index))
			cave_errf(e, "malformed_stream",
				  "content_block_start with a bad index");
		else
			ret = open_block(acc, (long)index, cb, false, fn, ctx,
					 e, "malformed_stream");
		jv_free(cb);
	} else if (strcmp(type, "content_block_delta") == 0) {
		ret = delta(acc, obj, fn, ctx, e);
	} else if (strcmp(type, "content_block_stop") == 0) {
		int64_t index = pj_int(obj, "index");
		struct acc_slot *sl = index >= 0
			? cave_acc_slot_find(acc, (long)index) : NULL;
		if (!sl)
			cave_errf(e, "malformed_stream",
				  "content_block_stop for no open block");
		else if (sl->kind == SLOT_TOOL)
			ret = cave_acc_slot_parse(sl, e, "malformed_stream");
		else
			ret = 0;
	} else if (strcmp(type, "message_delta") == 0) {
		jv d = pj_get(obj, "delta"), u = pj_get(obj, "usage");
		set_stop(acc, pj_str(d, "stop_reason"));
		merge_usage(acc, u);
		jv_free(u);
		jv_free(d);
		ret = 0;
	} else if (strcmp(type, "message_stop") == 0) {
		acc->complete = true;
		ret = 0;
	} else if (strcmp(type, "error") == 0) {
		ret = stream_error(obj, e);
	} else {
		ret = 0; /* ping and later kinds */
	}
	return ret;
}

int cave_anthropic_body(struct cave_acc *acc, jv obj, cave_err *e)
{
	jv content, u;
	const char *type = pj_str(obj, "type");
	int n, ret = -1;
	if (type && strcmp(type, "error") == 0)
		return stream_error(obj, e);
	content = pj_get(obj, "content");
	n = pj_len(content);
	if (n < 0) {
		cave_errf(e, "malformed_response", "message has no content");
		goto out;
	}
	cave_acc_set_str(&acc->response_id, pj_get(obj, "id"));
	for (int i = 0; i < n; i++) {
		jv cb = pj_at(content, i);
		int r = open_block(acc, i, cb, true, NULL, NULL, e,
				   "malformed_response");
		jv_free(cb);
		if (r < 0)
			goto out;
	}
	set_stop(acc, pj_str(obj, "stop_reason"));
	u = pj_get(obj, "usage");
	merge_usage(acc, u);
	jv_free(u);
	ret = 0;
out:
	jv_free(content);
	return ret;
}
