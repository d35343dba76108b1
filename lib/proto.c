/* proto.c: what every wire protocol shares: api names, dispatch to the
 * protocol files, the accumulator's slots and its neutral result, error
 * lines. It never performs I/O and never sees a credential. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "msg.h"
#include "proto.h"
#include "proto_impl.h"

static const char *const api_names[CAVE_API_COUNT] = {
	[CAVE_API_ANTHROPIC] = "anthropic-messages",
	[CAVE_API_OPENAI_CHAT] = "openai-chat",
	[CAVE_API_OPENAI_RESPONSES] = "openai-responses",
	[CAVE_API_GEMINI] = "gemini",
};

static const struct {
	const char *provider;
	enum cave_api api;
} default_api[] = {
	{"anthropic", CAVE_API_ANTHROPIC},
	{"openai", CAVE_API_OPENAI_RESPONSES},
	{"google", CAVE_API_GEMINI},
	{"gemini", CAVE_API_GEMINI},
};

static const struct {
	const char *header, *prefix;
} key_headers[CAVE_API_COUNT] = {
	[CAVE_API_ANTHROPIC] = {"x-api-key", ""},
	[CAVE_API_OPENAI_CHAT] = {"Authorization", "Bearer "},
	[CAVE_API_OPENAI_RESPONSES] = {"Authorization", "Bearer "},
	[CAVE_API_GEMINI] = {"x-goog-api-key", ""},
};

/* Thinking budgets by level. Anthropic wants at least 1024 and less than
 * max_tokens; Gemini 2.5 takes 128..32768 (Pro) or 0..24576 (Flash). */
static const struct cave_reasoning_level levels[] = {
	{"low", 1024, 1024},
	{"medium", 4096, 8192},
	{"high", 16384, 24576},
};

const char *cave_api_name(enum cave_api a)
{
	if ((int)a < 0 || a >= CAVE_API_COUNT)
		return NULL;
	return api_names[a];
}

int cave_api_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < CAVE_API_COUNT; i++)
		if (strcmp(api_names[i], name) == 0)
			return i;
	return -1;
}

int cave_api_default(const char *provider)
{
	if (!provider)
		return -1;
	for (size_t i = 0; i < sizeof default_api / sizeof *default_api; i++)
		if (strcmp(default_api[i].provider, provider) == 0)
			return (int)default_api[i].api;
	return -1;
}

const char *cave_proto_key_header(enum cave_api a, const char **value_prefix)
{
	if ((int)a < 0 || a >= CAVE_API_COUNT)
		return NULL;
	if (value_prefix)
		*value_prefix = key_headers[a].prefix;
	return key_headers[a].header;
}

void cave_http_req_free(struct cave_http_req *r)
{
	if (!r)
		return;
	free(r->url);
	free(r->body);
	for (size_t i = 0; i < sizeof r->headers / sizeof *r->headers; i++)
		free(r->headers[i]);
	memset(r, 0, sizeof *r);
}

int cave_proto_reasoning(jv req, const struct cave_reasoning_level **lvl,
			 cave_err *e)
{
	jv r = pj_get(req, "reasoning");
	int ret = -1;
	*lvl = NULL;
	if (!jv_is_valid(r) || jv_get_kind(r) == JV_KIND_NULL) {
		ret = 0;
		goto out;
	}
	if (jv_get_kind(r) != JV_KIND_STRING) {
		cave_errf(e, "bad_request", "reasoning must be a string or null");
		goto out;
	}
	for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
		if (strcmp(levels[i].name, jv_string_value(r)) == 0) {
			*lvl = &levels[i];
			ret = 0;
			goto out;
		}
	cave_errf(e, "bad_request", "unknown reasoning level '%.40s'",
		  jv_string_value(r));
out:
	jv_free(r);
	return ret;
}

int cave_proto_build(enum cave_api a, jv req, const char *base,
		     struct cave_http_req *out, cave_err *e)
{
	int ret = -1;
	memset(out, 0, sizeof *out);
	if (!pj_is(req, JV_KIND_OBJECT)) {
		cave_errf(e, "bad_request", "request is not an object");
		goto out;
	}
	if (cave_proto_check(req, e) < 0)
		goto out;
	switch (a) {
	case CAVE_API_ANTHROPIC:
		ret = cave_anthropic_build(req, base, out, e);
		break;
	case CAVE_API_OPENAI_CHAT:
		ret = cave_chat_build(req, base, out, e);
		break;
	case CAVE_API_OPENAI_RESPONSES:
		ret = cave_responses_build(req, base, out, e);
		break;
	case CAVE_API_GEMINI:
		ret = cave_gemini_build(req, base, out, e);
		break;
	default:
		cave_errf(e, "bad_request", "unknown api");
		break;
	}
out:
	if (ret < 0)
		cave_http_req_free(out);
	return ret;
}

/* ---- request helpers ---- */

jv cave_proto_tools(jv req, jv head, const char *schema_key, bool schema_default,
		    jv (*shape)(jv decl), cave_err *e)
{
	jv t = pj_get(req, "tools"), out = jv_array();
	int n = pj_len(t);
	for (int i = 0; i < n; i++) {
		jv x = pj_at(t, i), schema = pj_get(x, "input_schema"), d;
		if (!pj_str(x, "name")) {
			jv_free(schema);
			jv_free(x);
			jv_free(out);
			cave_errf(e, "bad_request", "tool %d has no name", i);
			out = jv_invalid();
			break;
		}
		if (!pj_is(schema, JV_KIND_OBJECT)) {
			jv_free(schema);
			schema = schema_default ? JV_OBJECT(jv_string("type"), jv_string("object"))
						: jv_invalid();
		}
		d = jv_object_set(jv_copy(head), jv_string("name"), pj_get(x, "name"));
		if (pj_str(x, "description"))
			d = jv_object_set(d, jv_string("description"), pj_get(x, "description"));
		if (jv_is_valid(schema))
			d = jv_object_set(d, jv_string(schema_key), schema);
		out = jv_array_append(out, shape ? shape(d) : d);
		jv_free(x);
	}
	jv_free(t);
	jv_free(head);
	return out;
}

char *cave_proto_base(const char *base, const char *dflt)
{
	size_t n;
	if (!base || !*base)
		base = dflt;
	n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	return cave_xstrndup(base, n);
}

void cave_proto_set_body(struct cave_http_req *out, jv body)
{
	jv s = jv_dump_string(body, 0); /* consumes body */
	out->body_len = (size_t)jv_string_length_bytes(jv_copy(s));
	out->body = cave_xstrndup(jv_string_value(s), out->body_len);
	jv_free(s);
}

int cave_proto_request(struct cave_http_req *out, const char *base, const char *dflt,
		       const char *extra, bool stream, jv body, cave_err *e,
		       const char *path_fmt, ...)
{
	char *b = cave_proto_base(base, dflt);
	struct cave_buf url;
	va_list ap;
	int h = 0, r;

	cave_buf_init(&url, 8192);
	va_start(ap, path_fmt);
	r = cave_buf_adds(&url, b) < 0 ? -1 : cave_buf_vaddf(&url, path_fmt, ap);
	va_end(ap);
	free(b);
	if (r < 0) {
		cave_buf_free(&url);
		jv_free(body);
		return cave_errf(e, "bad_request", "base URL too long");
	}
	out->url = cave_buf_take(&url, NULL);
	out->headers[h++] = cave_xstrdup("content-type: application/json");
	if (extra)
		out->headers[h++] = cave_xstrdup(extra);
	out->headers[h] = cave_xstrdup(stream ? "accept: text/event-stream"
					      : "accept: application/json");
	cave_proto_set_body(out, body);
	return 0;
}

int cave_proto_check(jv req, cave_err *e)
{
	const char *model = pj_str(req, "model");
	jv msgs = pj_get(req, "messages");
	int n = pj_len(msgs), ret = -1;
	if (!model || !*model) {
		cave_errf(e, "bad_request", "request has no model");
		goto out;
	}
	if (n < 1) {
		cave_errf(e, "bad_request", "request has no messages");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		jv m = pj_at(msgs, i);
		const char *role = pj_str(m, "role");
		jv c = pj_get(m, "content");
		bool good = role && (strcmp(role, "user") == 0 ||
				     strcmp(role, "assistant") == 0) &&
			    (pj_is(c, JV_KIND_STRING) || pj_is(c, JV_KIND_ARRAY));
		jv_free(c);
		jv_free(m);
		if (!good) {
			cave_errf(e, "bad_request",
				  "message %d needs a role user or assistant "
				  "and content", i);
			goto out;
		}
	}
	ret = 0;
out:
	jv_free(msgs);
	return ret;
}

jv cave_proto_content_blocks(jv content)
{
	if (pj_is(content, JV_KIND_STRING))
		return JV_ARRAY(JV_OBJECT(jv_string("type"), jv_string("text"),
					  jv_string("text"), jv_copy(content)));
	if (pj_is(content, JV_KIND_ARRAY))
		return jv_copy(content);
	return jv_array();
}

jv cave_proto_texts(jv blocks, const char *part_type)
{
	jv parts = jv_array(), one = jv_invalid();
	int n = pj_len(blocks), count = 0;
	for (int i = 0; i < n; i++) {
		jv b = pj_at(blocks, i);
		const char *type = pj_str(b, "type");
		if (type && strcmp(type, "text") == 0 && pj_str(b, "text")) {
			count++;
			jv_free(one);
			one = pj_get(b, "text");
			parts = jv_array_append(parts, JV_OBJECT(
				jv_string("type"), jv_string(part_type),
				jv_string("text"), pj_get(b, "text")));
		}
		jv_free(b);
	}
	if (count == 0) {
		jv_free(one);
		jv_free(parts);
		return jv_null();
	}
	if (count == 1) {
		jv_free(parts);
		return one;
	}
	jv_free(one);
	return parts;
}

int cave_proto_count(jv blocks, const char *type)
{
	int n = pj_len(blocks), count = 0;
	for (int i = 0; i < n; i++) {
		jv b = pj_at(blocks, i);
		const char *t = pj_str(b, "type");
		if (t && strcmp(t, type) == 0)
			count++;
		jv_free(b);
	}
	return count;
}

const char *cave_proto_tool_name(jv msgs, int before, const char *id)
{
	for (int i = before - 1; i >= 0; i--) {
		jv m = pj_at(msgs, i), c = pj_get(m, "content");
		int n = pj_len(c);
		const char *name = NULL;
		for (int k = 0; k < n && !name; k++) {
			jv b = pj_at(c, k);
			const char *t = pj_str(b, "type"), *bid = pj_str(b, "id");
			if (t && strcmp(t, "tool_use") == 0 && bid &&
			    strcmp(bid, id) == 0)
				name = pj_str(b, "name"); /* lives in msgs */
			jv_free(b);
		}
		jv_free(c);
		jv_free(m);
		if (name)
			return name;
	}
	return NULL;
}

/* ---- borrowed readers ---- */

bool pj_is(jv v, jv_kind k)
{
	return jv_get_kind(v) == k;
}

jv pj_get(jv obj, const char *key)
{
	jv v;
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return jv_invalid();
	v = jv_object_get(jv_copy(obj), jv_string(key));
	return v;
}

const char *pj_str(jv obj, const char *key)
{
	jv v = pj_get(obj, key);
	const char *s = NULL;
	/* the string lives on inside obj, which the caller holds */
	if (jv_get_kind(v) == JV_KIND_STRING)
		s = jv_string_value(v);
	jv_free(v);
	return s;
}

bool pj_has(jv obj, const char *key)
{
	jv v = pj_get(obj, key);
	bool has = jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL;
	jv_free(v);
	return has;
}

int64_t pj_int(jv obj, const char *key)
{
	jv v = pj_get(obj, key);
	int64_t r = -1;
	if (jv_get_kind(v) == JV_KIND_NUMBER) {
		double d = jv_number_value(v);
		if (d >= 0 && d <= 9007199254740992.0 && d == (double)(int64_t)d)
			r = (int64_t)d;
	}
	jv_free(v);
	return r;
}

bool pj_true(jv obj, const char *key)
{
	jv v = pj_get(obj, key);
	bool t = jv_get_kind(v) == JV_KIND_TRUE;
	jv_free(v);
	return t;
}

int pj_len(jv arr)
{
	if (jv_get_kind(arr) != JV_KIND_ARRAY)
		return -1;
	return jv_array_length(jv_copy(arr));
}

jv pj_at(jv arr, int i)
{
	if (jv_get_kind(arr) != JV_KIND_ARRAY || i < 0 ||
	    i >= jv_array_length(jv_copy(arr)))
		return jv_invalid();
	return jv_array_get(jv_copy(arr), i);
}

/* ---- errors ---- */

void cave_one_line(const char *s, size_t n, char *out, size_t outsz)
{
	size_t o = 0, i = 0;
	if (outsz == 0)
		return;
	while (i < n && s[i] && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' ||
				 s[i] == '\n'))
		i++;
	for (; i < n && s[i] && o + 1 < outsz; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			c = ' ';
		if (c == ' ' && o > 0 && out[o - 1] == ' ')
			continue;
		out[o++] = (char)c;
	}
	/* never end inside a UTF-8 sequence */
	if (o > 0 && (unsigned char)out[o - 1] >= 0x80) {
		size_t k = o;
		while (k > 0 && ((unsigned char)out[k - 1] & 0xC0) == 0x80)
			k--;
		if (k > 0 && ((unsigned char)out[k - 1] & 0xC0) == 0xC0) {
			unsigned char lead = (unsigned char)out[k - 1];
			size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
			if (o - (k - 1) < want)
				o = k - 1;
		}
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

int cave_proto_fail(cave_err *e, const char *kind, const char *msg)
{
	static const struct {
		const char *word, *code;
	} map[] = {
		{"overloaded_error", "overloaded"},
		{"overloaded", "overloaded"},
		{"server_is_overloaded", "overloaded"},
		{"slow_down", "overloaded"},
		{"UNAVAILABLE", "overloaded"},
		{"rate_limit_error", "rate_limited"},
		{"rate_limit_exceeded", "rate_limited"},
		{"rate_limited", "rate_limited"},
		{"RESOURCE_EXHAUSTED", "rate_limited"},
		{"insufficient_quota", "provider_error"},
	};
	const char *code = "provider_error";
	char line[400];
	if (kind)
		for (size_t i = 0; i < sizeof map / sizeof *map; i++)
			if (strcmp(map[i].word, kind) == 0) {
				code = map[i].code;
				break;
			}
	if (!msg || !*msg)
		msg = kind && *kind ? kind : "error without a message";
	cave_one_line(msg, strlen(msg), line, sizeof line);
	cave_errf(e, code, "%s%s%s", kind && *kind ? kind : "",
		  kind && *kind ? ": " : "", line);
	if (e)
		e->retryable = strcmp(code, "provider_error") != 0;
	return -1;
}

/* The message in a provider's error body: Anthropic {error:{type,message}},
 * OpenAI {error:{message,type,code}}, Gemini {error:{code,message,status}}
 * (sometimes inside a one-element array). */
void cave_proto_error_message(enum cave_api a, const char *body, size_t len,
			      char *out, size_t outsz)
{
	jv v, err = jv_invalid();
	const char *msg = NULL;
	(void)a;
	if (outsz == 0)
		return;
	out[0] = '\0';
	if (!body)
		return;
	v = len > 0 && len < ((size_t)1 << 24) ? cave_json_parse(body, len)
					       : jv_invalid();
	if (pj_is(v, JV_KIND_ARRAY) && pj_len(v) > 0) {
		jv first = pj_at(v, 0);
		jv_free(v);
		v = first;
	}
	err = pj_get(v, "error");
	if (pj_is(err, JV_KIND_OBJECT))
		msg = pj_str(err, "message");
	else if (pj_is(err, JV_KIND_STRING))
		msg = jv_string_value(err);
	if (!msg)
		msg = pj_str(v, "message");
	if (msg && *msg)
		cave_one_line(msg, strlen(msg), out, outsz);
	else
		cave_one_line(body, len, out, outsz < 201 ? outsz : 201);
	jv_free(err);
	jv_free(v);
}

/* ---- the accumulator ---- */

struct cave_acc *cave_acc_new(enum cave_api a)
{
	struct cave_acc *acc;
	if ((int)a < 0 || a >= CAVE_API_COUNT)
		return NULL;
	acc = cave_xcalloc(1, sizeof *acc);
	acc->api = a;
	acc->usage_raw = jv_null();
	return acc;
}

void cave_acc_free(struct cave_acc *acc)
{
	if (!acc)
		return;
	for (size_t i = 0; i < acc->nslots; i++) {
		struct acc_slot *sl = &acc->slots[i];
		cave_buf_free(&sl->buf);
		free(sl->item);
		free(sl->id);
		free(sl->name);
		free(sl->sig);
		jv_free(sl->input);
	}
	free(acc->slots);
	free(acc->response_id);
	free(acc->provider_stop);
	jv_free(acc->usage_raw);
	free(acc);
}

struct acc_slot *cave_acc_slot_new(struct cave_acc *acc, enum acc_kind kind,
				   long key, cave_err *e, const char *code)
{
	struct acc_slot *sl;
	if (acc->nslots >= CAVE_ACC_MAX_SLOTS) {
		cave_errf(e, code, "response has more than %d content blocks",
			  CAVE_ACC_MAX_SLOTS);
		return NULL;
	}
	if (acc->nslots == acc->capslots) {
		acc->capslots = acc->capslots ? acc->capslots * 2 : 8;
		acc->slots = cave_xrealloc(acc->slots,
					   acc->capslots * sizeof *acc->slots);
	}
	sl = &acc->slots[acc->nslots++];
	memset(sl, 0, sizeof *sl);
	sl->kind = kind;
	sl->key = key;
	sl->input = jv_invalid();
	cave_buf_init(&sl->buf, CAVE_ACC_MAX_BYTES);
	return sl;
}

struct acc_slot *cave_acc_slot_find(struct cave_acc *acc, long key)
{
	for (size_t i = acc->nslots; i > 0; i--)
		if (acc->slots[i - 1].key == key)
			return &acc->slots[i - 1];
	return NULL;
}

struct acc_slot *cave_acc_slot_item(struct cave_acc *acc, const char *item)
{
	if (!item)
		return NULL;
	for (size_t i = acc->nslots; i > 0; i--)
		if (acc->slots[i - 1].item &&
		    strcmp(acc->slots[i - 1].item, item) == 0)
			return &acc->slots[i - 1];
	return NULL;
}

int cave_acc_slot_add(struct cave_acc *acc, struct acc_slot *sl,
		      const char *p, size_t n, cave_err *e, const char *code)
{
	if (n > CAVE_ACC_MAX_BYTES - acc->bytes ||
	    cave_buf_add(&sl->buf, p, n) < 0)
		return cave_errf(e, code, "response over %zu bytes",
				 CAVE_ACC_MAX_BYTES);
	acc->bytes += n;
	return 0;
}

int cave_acc_slot_parse(struct acc_slot *sl, cave_err *e, const char *code)
{
	jv v;
	const char *p = sl->buf.data ? sl->buf.data : "";
	size_t n = sl->buf.len;
	if (jv_is_valid(sl->input))
		return 0;
	while (n > 0 && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) {
		p++;
		n--;
	}
	if (n == 0) {
		sl->input = jv_object();
		return 0;
	}
	v = cave_json_parse(p, n);
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return cave_errf(e, code,
				 "arguments of tool call '%.64s' are not a "
				 "JSON object", sl->name ? sl->name : "");
	}
	sl->input = v;
	return 0;
}

void cave_acc_set_str(char **dst, jv s)
{
	if (jv_get_kind(s) == JV_KIND_STRING) {
		free(*dst);
		*dst = cave_xstrdup(jv_string_value(s));
	}
	jv_free(s);
}

void cave_acc_stop(struct cave_acc *acc, const char *provider_word,
		   const char *normalised)
{
	free(acc->provider_stop);
	acc->provider_stop = provider_word ? cave_xstrdup(provider_word) : NULL;
	acc->stop = normalised;
}

const char *cave_stop_lookup(const struct cave_stop_word *map, size_t n, const char *word)
{
	for (size_t i = 0; word && i < n; i++)
		if (strcmp(map[i].word, word) == 0)
			return map[i].stop;
	return "other";
}

static const char *code_for(const struct cave_acc *acc, bool body)
{
	(void)acc;
	return body ? "malformed_response" : "malformed_stream";
}

int cave_acc_event(struct cave_acc *acc, const char *event, const char *data,
		   size_t len, cave_delta_fn fn, void *ctx, cave_err *e)
{
	jv obj;
	int ret = -1;
	if (!event)
		event = "";
	if (acc->api == CAVE_API_OPENAI_CHAT && len == 6 &&
	    memcmp(data, "[DONE]", 6) == 0)
		return cave_chat_done(acc, e);
	if (len > ((size_t)1 << 30))
		return cave_errf(e, "malformed_stream", "event too large");
	obj = cave_json_parse(data, len);
	if (jv_get_kind(obj) != JV_KIND_OBJECT) {
		char line[120];
		cave_one_line(data, len, line, sizeof line);
		cave_errf(e, code_for(acc, false),
			  "event '%.40s' is not a JSON object: %s", event, line);
		goto out;
	}
	switch (acc->api) {
	case CAVE_API_ANTHROPIC:
		ret = cave_anthropic_event(acc, event, obj, fn, ctx, e);
		break;
	case CAVE_API_OPENAI_CHAT:
		ret = cave_chat_event(acc, obj, fn, ctx, e);
		break;
	case CAVE_API_OPENAI_RESPONSES:
		ret = cave_responses_event(acc, event, obj, fn, ctx, e);
		break;
	case CAVE_API_GEMINI:
		ret = cave_gemini_event(acc, obj, fn, ctx, e);
		break;
	default:
		cave_errf(e, "malformed_stream", "unknown api");
		break;
	}
out:
	jv_free(obj);
	return ret;
}

int cave_acc_body(struct cave_acc *acc, const char *body, size_t len,
		  cave_err *e)
{
	jv obj;
	int ret = -1;
	if (len > ((size_t)1 << 30))
		return cave_errf(e, "malformed_response", "body too large");
	obj = cave_json_parse(body, len);
	if (jv_get_kind(obj) != JV_KIND_OBJECT) {
		cave_errf(e, "malformed_response", "body is not a JSON object");
		goto out;
	}
	switch (acc->api) {
	case CAVE_API_ANTHROPIC:
		ret = cave_anthropic_body(acc, obj, e);
		break;
	case CAVE_API_OPENAI_CHAT:
		ret = cave_chat_body(acc, obj, e);
		break;
	case CAVE_API_OPENAI_RESPONSES:
		ret = cave_responses_body(acc, obj, e);
		break;
	case CAVE_API_GEMINI:
		ret = cave_gemini_body(acc, obj, e);
		break;
	default:
		cave_errf(e, "malformed_response", "unknown api");
		break;
	}
	if (ret == 0)
		acc->complete = true;
out:
	jv_free(obj);
	return ret;
}

bool cave_acc_complete(const struct cave_acc *acc)
{
	return acc->complete;
}

jv cave_acc_usage_so_far(const struct cave_acc *acc)
{
	struct cave_usage u;
	if (jv_get_kind(acc->usage_raw) == JV_KIND_NULL ||
	    cave_usage_from_provider(acc->api, acc->usage_raw, &u) < 0)
		return jv_null();
	return cave_usage_to_jv(&u);
}

static jv slot_block(const struct acc_slot *sl)
{
	const char *text = sl->buf.data ? sl->buf.data : "";
	jv b = jv_invalid(), input;
	switch (sl->kind) {
	case SLOT_TEXT:
		if (sl->buf.len > 0)
			b = JV_OBJECT(jv_string("type"), jv_string("text"),
				      jv_string("text"),
				      jv_string_sized(text, (int)sl->buf.len));
		break;
	case SLOT_TOOL:
		if (jv_is_valid(sl->input)) {
			input = jv_copy(sl->input);
		} else {
			/* not finished: keep it only when it parses whole */
			struct acc_slot tmp = *sl;
			if (cave_acc_slot_parse(&tmp, NULL, "") < 0)
				break;
			input = tmp.input;
		}
		b = JV_OBJECT(jv_string("type"), jv_string("tool_use"),
			      jv_string("id"), jv_string(sl->id ? sl->id : ""),
			      jv_string("name"),
			      jv_string(sl->name ? sl->name : ""),
			      jv_string("input"), input);
		if (sl->sig)
			b = jv_object_set(b, jv_string("signature"),
					  jv_string(sl->sig));
		break;
	case SLOT_THINKING:
		if (sl->sig)
			b = JV_OBJECT(jv_string("type"), jv_string("thinking"),
				      jv_string("thinking"),
				      jv_string_sized(text, (int)sl->buf.len),
				      jv_string("signature"),
				      jv_string(sl->sig));
		break;
	case SLOT_REDACTED:
		b = JV_OBJECT(jv_string("type"),
			      jv_string("redacted_thinking"), jv_string("data"),
			      jv_string_sized(text, (int)sl->buf.len));
		break;
	case SLOT_SKIP:
		break;
	}
	return b;
}

jv cave_acc_result(const struct cave_acc *acc)
{
	jv content = jv_array(), usage = jv_null();
	struct cave_usage u;
	bool tools = false;
	const char *stop = acc->stop, *basis;

	for (size_t i = 0; i < acc->nslots; i++) {
		jv b = slot_block(&acc->slots[i]);
		if (!jv_is_valid(b)) {
			jv_free(b);
			continue;
		}
		if (acc->slots[i].kind == SLOT_TOOL)
			tools = true;
		content = jv_array_append(content, b); /* consumes b */
	}
	/* a turn that ends in tool calls asks for them to be run */
	if (tools && stop && strcmp(stop, "end_turn") == 0)
		stop = "tool_use";
	if (acc->refused && stop && strcmp(stop, "end_turn") == 0)
		stop = "refusal";
	/* counts of a response cut short are not final (Anthropic's
	 * message_start output, Gemini's running totals): they would
	 * under-report, so only a complete response has usage */
	if (acc->complete && jv_get_kind(acc->usage_raw) != JV_KIND_NULL &&
	    cave_usage_from_provider(acc->api, acc->usage_raw, &u) == 0 &&
	    u.available)
		usage = cave_usage_to_jv(&u);
	basis = jv_get_kind(usage) == JV_KIND_NULL ? "unavailable"
						    : "provider_reported";
	return JV_OBJECT(
		jv_string("content"), content,
		jv_string("stop_reason"), stop ? jv_string(stop) : jv_null(),
		jv_string("provider_stop_reason"),
		acc->provider_stop ? jv_string(acc->provider_stop) : jv_null(),
		jv_string("response_id"),
		acc->response_id ? jv_string(acc->response_id) : jv_null(),
		jv_string("usage"), usage, /* consumes usage */
		jv_string("usage_basis"), jv_string(basis));
}
