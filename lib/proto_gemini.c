/* proto_gemini.c: the Gemini API (POST {base}/v1beta/models/M:generateContent
 * or :streamGenerateContent?alt=sse), its request body and its stream of
 * whole-response chunks. It never puts the key in the URL and never passes
 * thought parts on as answer text. Gemini's calls may lack ids: they get
 * stable ones, "gemini_call_N" in the order of the response. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "msg.h"
#include "proto.h"
#include "proto_impl.h"

#define GEMINI_BASE "https://generativelanguage.googleapis.com"
#define SYNTH_PREFIX "gemini_call_"

static const struct cave_stop_word stops[] = {
	{"STOP", "end_turn"},
	{"MAX_TOKENS", "max_tokens"},
	{"SAFETY", "refusal"},
	{"RECITATION", "refusal"},
	{"BLOCKLIST", "refusal"},
	{"PROHIBITED_CONTENT", "refusal"},
	{"SPII", "refusal"},
	{"IMAGE_SAFETY", "refusal"},
	{"IMAGE_PROHIBITED_CONTENT", "refusal"},
	{"IMAGE_RECITATION", "refusal"},
	{"LANGUAGE", "refusal"},
};

static void set_stop(struct cave_acc *acc, const char *word)
{
	cave_acc_stop(acc, word, CAVE_STOP_LOOKUP(stops, word));
}

/* ---- request ---- */

static bool synthetic(const char *id)
{
	return strncmp(id, SYNTH_PREFIX, sizeof SYNTH_PREFIX - 1) == 0;
}

/* The parts of message i (borrowed msgs), or jv_invalid with e set. */
static jv parts_of(jv msgs, int i, cave_err *e)
{
	jv m = pj_at(msgs, i), c = pj_get(m, "content");
	jv blocks = cave_proto_content_blocks(c), parts = jv_array();
	int n = pj_len(blocks);
	for (int k = 0; k < n; k++) {
		jv b = pj_at(blocks, k), p = jv_null();
		const char *t = pj_str(b, "type");
		if (t && strcmp(t, "text") == 0 && pj_str(b, "text")) {
			p = JV_OBJECT(jv_string("text"), pj_get(b, "text"));
		} else if (t && strcmp(t, "tool_use") == 0) {
			jv input = pj_get(b, "input"), call;
			const char *id = pj_str(b, "id");
			if (!pj_str(b, "name") || !pj_is(input, JV_KIND_OBJECT)) {
				jv_free(input);
				p = jv_invalid();
				cave_errf(e, "bad_request", "bad tool_use block");
			} else {
				call = JV_OBJECT(jv_string("name"),
						 pj_get(b, "name"),
						 jv_string("args"), input);
				if (id && !synthetic(id))
					call = jv_object_set(call, jv_string("id"),
							     jv_string(id));
				p = JV_OBJECT(jv_string("functionCall"), call);
				if (pj_str(b, "signature"))
					p = jv_object_set(
						p, jv_string("thoughtSignature"),
						pj_get(b, "signature"));
			}
		} else if (t && strcmp(t, "tool_result") == 0) {
			const char *id = pj_str(b, "tool_use_id"), *name;
			const char *out = pj_str(b, "content");
			name = id ? cave_proto_tool_name(msgs, i, id) : NULL;
			if (!name) {
				p = jv_invalid();
				cave_errf(e, "bad_request",
					  "tool_result '%.64s' answers no "
					  "earlier tool_use", id ? id : "");
			} else {
				jv fr = JV_OBJECT(
					jv_string("name"), jv_string(name),
					jv_string("response"),
					JV_OBJECT(jv_string(pj_true(b, "is_error")
								    ? "error"
								    : "output"),
						  jv_string(out ? out : "")));
				if (!synthetic(id))
					fr = jv_object_set(fr, jv_string("id"),
							   jv_string(id));
				p = JV_OBJECT(jv_string("functionResponse"), fr);
			}
		}
		/* thinking blocks of another API do not travel */
		jv_free(b);
		if (!jv_is_valid(p)) {
			jv_free(parts);
			parts = jv_invalid();
			break;
		}
		if (jv_get_kind(p) == JV_KIND_NULL)
			jv_free(p);
		else
			parts = jv_array_append(parts, p);
	}
	jv_free(blocks);
	jv_free(c);
	jv_free(m);
	return parts;
}

static jv contents(jv req, cave_err *e)
{
	jv msgs = pj_get(req, "messages"), out = jv_array();
	int n = pj_len(msgs);
	for (int i = 0; i < n; i++) {
		jv m = pj_at(msgs, i), parts = parts_of(msgs, i, e);
		const char *role = pj_str(m, "role");
		bool user = role && strcmp(role, "user") == 0;
		jv_free(m);
		if (!jv_is_valid(parts)) {
			jv_free(out);
			out = jv_invalid();
			break;
		}
		if (pj_len(parts) == 0) {
			jv_free(parts); /* Gemini refuses empty contents */
			continue;
		}
		out = jv_array_append(out, JV_OBJECT(
			jv_string("role"), jv_string(user ? "user" : "model"),
			jv_string("parts"), parts));
	}
	jv_free(msgs);
	return out;
}

/* full JSON Schema, not the OpenAPI subset of "parameters" */
static jv tools(jv req, cave_err *e)
{
	return cave_proto_tools(req, jv_object(), "parametersJsonSchema", false, NULL, e);
}

static bool model_ok(const char *m)
{
	if (!*m)
		return false;
	for (; *m; m++)
		if (!((*m >= 'a' && *m <= 'z') || (*m >= 'A' && *m <= 'Z') ||
		      (*m >= '0' && *m <= '9') || *m == '-' || *m == '.' ||
		      *m == '_'))
			return false;
	return true;
}

int cave_gemini_build(jv req, const char *base, struct cave_http_req *out,
		      cave_err *e)
{
	const struct cave_reasoning_level *lvl;
	int64_t max = pj_int(req, "max_output_tokens");
	bool stream = !pj_has(req, "stream") || pj_true(req, "stream");
	const char *model = pj_str(req, "model");
	jv body = jv_invalid(), cont = jv_invalid(), decls = jv_invalid();
	jv gen = jv_object();
	int ret = -1;

	if (strncmp(model, "models/", 7) == 0)
		model += 7;
	if (!model_ok(model)) {
		cave_errf(e, "bad_request", "bad gemini model name '%.64s'",
			  model);
		goto out;
	}
	if (cave_proto_reasoning(req, &lvl, e) < 0)
		goto out;
	cont = contents(req, e);
	if (!jv_is_valid(cont))
		goto out;
	decls = tools(req, e);
	if (!jv_is_valid(decls))
		goto out;
	body = jv_object();
	if (pj_str(req, "system") && *pj_str(req, "system"))
		body = jv_object_set(body, jv_string("systemInstruction"),
				     JV_OBJECT(jv_string("parts"),
					       JV_ARRAY(JV_OBJECT(
						       jv_string("text"),
						       pj_get(req, "system")))));
	body = jv_object_set(body, jv_string("contents"), cont);
	cont = jv_invalid();
	if (pj_len(decls) > 0) {
		body = jv_object_set(body, jv_string("tools"),
				     JV_ARRAY(JV_OBJECT(
					     jv_string("functionDeclarations"),
					     decls)));
		decls = jv_invalid();
	}
	if (max > 0)
		gen = jv_object_set(gen, jv_string("maxOutputTokens"),
				    jv_number((double)max));
	if (lvl)
		gen = jv_object_set(gen, jv_string("thinkingConfig"),
				    JV_OBJECT(jv_string("thinkingBudget"),
					      jv_number((double)lvl->gemini_budget)));
	if (jv_object_length(jv_copy(gen)) > 0) {
		body = jv_object_set(body, jv_string("generationConfig"), gen);
		gen = jv_invalid();
	}
	ret = cave_proto_request(out, base, GEMINI_BASE, NULL, stream, body, e,
			       "/v1beta/models/%s:%s", model,
			       stream ? "streamGenerateContent?alt=sse" : "generateContent");
	body = jv_invalid(); /* consumed */
out:
	jv_free(body);
	jv_free(cont);
	jv_free(decls);
	jv_free(gen);
	return ret;
}

/* ---- response ---- */

static int add_part(struct cave_acc *acc, jv part, cave_delta_fn fn,
		    void *ctx, cave_err *e, const char *code)
{
	jv call = pj_get(part, "functionCall");
	const char *text = pj_str(part, "text");
	struct acc_slot *sl;
	int ret = -1;
	if (pj_is(call, JV_KIND_OBJECT)) {
		jv args = pj_get(call, "args");
		const char *id = pj_str(call, "id");
		char synth[40];
		if (!pj_str(call, "name") ||
		    !(pj_is(args, JV_KIND_OBJECT) || !jv_is_valid(args) ||
		      pj_is(args, JV_KIND_NULL))) {
			jv_free(args);
			cave_errf(e, code, "functionCall without a name or "
					   "with arguments not an object");
			goto out;
		}
		sl = cave_acc_slot_new(acc, SLOT_TOOL, (long)acc->nslots, e, code);
		if (!sl) {
			jv_free(args);
			goto out;
		}
		snprintf(synth, sizeof synth, SYNTH_PREFIX "%d", acc->ncalls++);
		sl->id = cave_xstrdup(id && *id ? id : synth);
		sl->name = cave_xstrdup(pj_str(call, "name"));
		if (pj_is(args, JV_KIND_OBJECT)) {
			sl->input = args;
		} else {
			jv_free(args);
			sl->input = jv_object();
		}
		if (pj_str(part, "thoughtSignature"))
			sl->sig = cave_xstrdup(pj_str(part, "thoughtSignature"));
	} else if (text && !pj_true(part, "thought") && *text) {
		sl = acc->nslots ? &acc->slots[acc->nslots - 1] : NULL;
		if (!sl || sl->kind != SLOT_TEXT)
			sl = cave_acc_slot_new(acc, SLOT_TEXT, (long)acc->nslots,
					       e, code);
		if (!sl || cave_acc_slot_add(acc, sl, text, strlen(text), e,
					     code) < 0)
			goto out;
		if (fn)
			fn(ctx, text, strlen(text));
	}
	/* thoughts, executable code and inline data: nothing to keep */
	ret = 0;
out:
	jv_free(call);
	return ret;
}

/* One GenerateContentResponse (borrowed): a streamed chunk or the body. */
static int chunk(struct cave_acc *acc, jv obj, cave_delta_fn fn, void *ctx,
		 cave_err *e, const char *code)
{
	jv cands, cand = jv_invalid(), content = jv_invalid();
	jv parts = jv_invalid(), usage, fb;
	const char *fin;
	int n, ret = -1;
	jv err = pj_get(obj, "error");
	if (pj_is(err, JV_KIND_OBJECT)) {
		ret = cave_proto_fail(e, pj_str(err, "status"),
				      pj_str(err, "message"));
		jv_free(err);
		return ret;
	}
	jv_free(err);
	cands = pj_get(obj, "candidates");
	cave_acc_set_str(&acc->response_id, pj_get(obj, "responseId"));
	usage = pj_get(obj, "usageMetadata");
	if (pj_is(usage, JV_KIND_OBJECT)) {
		/* every chunk restates the totals so far: the latest wins */
		jv_free(acc->usage_raw);
		acc->usage_raw = usage;
	} else {
		jv_free(usage);
	}
	cand = pj_at(cands, 0);
	if (!pj_is(cand, JV_KIND_OBJECT)) {
		fb = pj_get(obj, "promptFeedback");
		if (pj_str(fb, "blockReason"))
			cave_acc_stop(acc, pj_str(fb, "blockReason"), "refusal");
		jv_free(fb);
		ret = 0;
		goto out;
	}
	content = pj_get(cand, "content");
	parts = pj_get(content, "parts");
	n = pj_len(parts);
	for (int i = 0; i < n; i++) {
		jv part = pj_at(parts, i);
		int r = add_part(acc, part, fn, ctx, e, code);
		jv_free(part);
		if (r < 0)
			goto out;
	}
	fin = pj_str(cand, "finishReason");
	if (fin)
		set_stop(acc, fin);
	ret = 0;
out:
	/* done once a finish reason and the usage have both been seen */
	if (ret == 0 && acc->stop && pj_is(acc->usage_raw, JV_KIND_OBJECT))
		acc->complete = true;
	jv_free(parts);
	jv_free(content);
	jv_free(cand);
	jv_free(cands);
	return ret;
}

int cave_gemini_event(struct cave_acc *acc, jv obj, cave_delta_fn fn,
		      void *ctx, cave_err *e)
{
	return chunk(acc, obj, fn, ctx, e, "malformed_stream");
}

int cave_gemini_body(struct cave_acc *acc, jv obj, cave_err *e)
{
	return chunk(acc, obj, NULL, NULL, e, "malformed_response");
}
