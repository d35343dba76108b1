/* event.c: the event envelope: peeking at a line's first two keys without
 * parsing it, parsing and serialising events with "type" and "src" first,
 * and the per-writer run/span/seq stamp. Never reorders or rewrites the
 * content of an event it does not own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "buf.h"
#include "digest.h"
#include "event.h"
#include "json.h"

static const char *scan_str(const char *p, const char *end, size_t *n)
{
	const char *s = p;
	while (p < end && *p != '"') {
		if (*p == '\\' || (unsigned char)*p < 0x20)
			return NULL; /* an escaped name: not peekable */
		p++;
	}
	if (p >= end)
		return NULL;
	*n = (size_t)(p - s);
	return s;
}

int cave_event_peek(const char *line, size_t len, struct cave_ev_head *h)
{
	static const char t[] = "{\"type\":\"", s[] = ",\"src\":\"";
	const char *end = line + len, *p;
	memset(h, 0, sizeof *h);
	if (len < sizeof t - 1 || memcmp(line, t, sizeof t - 1) != 0)
		return -1;
	p = line + sizeof t - 1;
	if (!(h->type = scan_str(p, end, &h->type_len)))
		return -1;
	p = h->type + h->type_len + 1;
	if ((size_t)(end - p) >= sizeof s - 1 && memcmp(p, s, sizeof s - 1) == 0) {
		p += sizeof s - 1;
		h->src = scan_str(p, end, &h->src_len);
		if (!h->src)
			h->src_len = 0;
	}
	return 0;
}

bool cave_event_type_is(const struct cave_ev_head *h, const char *type)
{
	size_t n = strlen(type);
	return h->type && h->type_len == n && memcmp(h->type, type, n) == 0;
}

bool cave_event_src_is(const struct cave_ev_head *h, const char *src)
{
	size_t n = strlen(src);
	return h->src && h->src_len == n && memcmp(h->src, src, n) == 0;
}

jv cave_event_parse(const char *line, size_t len, const char *where, cave_err *e)
{
	size_t at;
	jv v;
	/* jq 1.6 leaks on some malformed input: a line the fast scan is not
	 * sure of passes the strict check before jq parses it */
	if (len > CAVE_EVENT_MAX) {
		cave_errf(e, "bad_event", "%s: longer than %zu bytes", where,
			  (size_t)CAVE_EVENT_MAX);
		return jv_invalid();
	}
	if (cave_json_scan(line, len, NULL, 0, NULL) != 0 && !cave_json_valid(line, len, &at)) {
		cave_errf(e, "bad_event", "%s: not JSON (at byte %zu)", where, at + 1);
		return jv_invalid();
	}
	v = jv_parse_sized(line, (int)len);
	if (!jv_is_valid(v)) {
		jv m = jv_invalid_get_msg(v);
		const char *s = jv_get_kind(m) == JV_KIND_STRING ? jv_string_value(m) : "not JSON";
		/* jq quotes the input after "(while parsing": content stays out
		 * of messages */
		const char *cut = strstr(s, " (while parsing");
		cave_errf(e, "bad_event", "%s: %.*s", where,
			  (int)(cut ? (size_t)(cut - s) : strlen(s)), s);
		jv_free(m);
		return jv_invalid();
	}
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		cave_errf(e, "bad_event", "%s: an event must be a JSON object", where);
		return jv_invalid();
	}
	jv type = jv_object_get(jv_copy(v), jv_string("type"));
	if (jv_get_kind(type) != JV_KIND_STRING) {
		jv_free(type);
		jv_free(v);
		cave_errf(e, "bad_event", "%s: expected string at 'type'", where);
		return jv_invalid();
	}
	jv_free(type);
	return v;
}

jv cave_event_new(const char *type, const char *src)
{
	jv ev = jv_object();
	ev = jv_object_set(ev, jv_string("type"), jv_string(type));
	ev = jv_object_set(ev, jv_string("src"), jv_string(src));
	ev = jv_object_set(ev, jv_string("v"), jv_number(1));
	return ev;
}

/* appends "key":value (key and value borrowed), as jv_dump_string would
 * write them (lib/json.h: megabyte histories at memcpy speed) */
static void add_member(struct cave_buf *b, jv key, jv value, int first)
{
	if (!first)
		cave_buf_addc(b, ',');
	cave_json_dump(b, key);
	cave_buf_addc(b, ':');
	cave_json_dump(b, value);
}

jv cave_event_tool_unrun(jv ev, jv req, jv denied)
{
	static const char *const from_req[] = { "id", "call_id", "name" };
	char digest[CAVE_SHA256_HEX];

	for (size_t i = 0; i < sizeof from_req / sizeof *from_req; i++)
		if (cave_jv_str(req, from_req[i], NULL))
			ev = jv_object_set(ev, jv_string(from_req[i]),
					   jv_string(cave_jv_str(req, from_req[i], "")));
	cave_sha256_hex("", 0, digest);
	ev = jv_object_set(ev, jv_string("exit"), jv_null());
	ev = jv_object_set(ev, jv_string("signal"), jv_null());
	ev = jv_object_set(ev, jv_string("ms"), jv_number(0));
	ev = jv_object_set(ev, jv_string("output"), jv_string(""));
	ev = jv_object_set(ev, jv_string("truncated"), jv_false());
	ev = jv_object_set(ev, jv_string("size"), jv_number(0));
	ev = jv_object_set(ev, jv_string("digest"), jv_string(digest));
	return jv_object_set(ev, jv_string("denied"), denied);
}

char *cave_event_dump(jv ev, size_t *len) /* consumes ev */
{
	struct cave_buf b;
	jv type, src;
	int first = 1;
	if (jv_get_kind(ev) != JV_KIND_OBJECT) {
		jv_free(ev);
		return NULL;
	}
	type = jv_object_get(jv_copy(ev), jv_string("type"));
	if (jv_get_kind(type) != JV_KIND_STRING) {
		jv_free(type);
		jv_free(ev);
		return NULL;
	}
	src = jv_object_get(jv_copy(ev), jv_string("src"));
	cave_buf_init(&b, CAVE_EVENT_MAX + 1);
	cave_buf_addc(&b, '{');
	{
		jv tk = jv_string("type"), sk = jv_string("src");
		add_member(&b, tk, type, 1);
		if (jv_is_valid(src))
			add_member(&b, sk, src, 0);
		jv_free(tk);
		jv_free(sk);
	}
	first = 0;
	jv_object_foreach(ev, k, v) {
		const char *ks = jv_string_value(k);
		if (strcmp(ks, "type") != 0 && strcmp(ks, "src") != 0)
			add_member(&b, k, v, first);
		jv_free(k);
		jv_free(v);
	}
	cave_buf_addc(&b, '}');
	cave_buf_addc(&b, '\n');
	jv_free(type);
	jv_free(src);
	jv_free(ev);
	return cave_buf_take(&b, len);
}

void cave_emitter_init(struct cave_emitter *em, const char *src)
{
	const char *from = getenv("CAVE_SEQ_FROM");
	char *end;
	unsigned long long v;

	memset(em, 0, sizeof *em);
	em->src = src;
	if (from && *from >= '0' && *from <= '9') {
		errno = 0;
		v = strtoull(from, &end, 10);
		if (!*end && !errno)
			em->seq = (uint64_t)v;
	}
}

void cave_emitter_follow(struct cave_emitter *em, jv ev) /* ev borrowed */
{
	const char *run = cave_jv_str(ev, "run", NULL);
	const char *span = cave_jv_str(ev, "span", NULL);
	if (run)
		snprintf(em->run, sizeof em->run, "%s", run);
	if (span)
		snprintf(em->span, sizeof em->span, "%s", span);
}

jv cave_emitter_stamp(struct cave_emitter *em, jv ev) /* consumes ev */
{
	if (em->run[0])
		ev = jv_object_set(ev, jv_string("run"), jv_string(em->run));
	if (em->span[0])
		ev = jv_object_set(ev, jv_string("span"), jv_string(em->span));
	return jv_object_set(ev, jv_string("seq"), jv_number((double)++em->seq));
}

static void random_bytes(unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0)
			cave_die(CAVE_EX_SOFTWARE, "getrandom failed:");
		p += r;
		n -= (size_t)r;
	}
}

static void hexify(const unsigned char *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		*out++ = digits[d[i] >> 4];
		*out++ = digits[d[i] & 15];
	}
	*out = '\0';
}

void cave_uuid4(char out[37])
{
	unsigned char r[16];
	char h[33];
	random_bytes(r, sizeof r);
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	hexify(r, sizeof r, h);
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

void cave_span_id(char out[17])
{
	unsigned char r[8];
	random_bytes(r, sizeof r);
	hexify(r, sizeof r, out);
}

const char *cave_jv_str(jv obj, const char *key, const char *dflt)
{
	const char *s = dflt;
	jv v;
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return dflt;
	v = jv_object_get(jv_copy(obj), jv_string(key));
	/* the string lives as long as obj holds it */
	if (jv_get_kind(v) == JV_KIND_STRING)
		s = jv_string_value(v);
	jv_free(v);
	return s;
}

int64_t cave_jv_int(jv obj, const char *key, int64_t dflt)
{
	int64_t r = dflt;
	jv v;
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return dflt;
	v = jv_object_get(jv_copy(obj), jv_string(key));
	if (jv_get_kind(v) == JV_KIND_NUMBER) {
		double d = jv_number_value(v);
		if (d >= -9.0e18 && d <= 9.0e18)
			r = (int64_t)d;
	}
	jv_free(v);
	return r;
}

bool cave_jv_bool(jv obj, const char *key, bool dflt)
{
	bool r = dflt;
	jv v;
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return dflt;
	v = jv_object_get(jv_copy(obj), jv_string(key));
	if (jv_get_kind(v) == JV_KIND_TRUE)
		r = true;
	else if (jv_get_kind(v) == JV_KIND_FALSE)
		r = false;
	jv_free(v);
	return r;
}
