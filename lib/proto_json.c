/* proto_json.c: parsing provider JSON safely with jq 1.6. It owns a strict
 * RFC 8259 syntax check run before jv_parse_sized, because jq 1.6 leaks
 * memory on some malformed input (two strings in a row, NUL bytes) and a
 * provider's bytes are untrusted. It never allocates while checking. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "msg.h"
#include "proto_impl.h"

/* Deeper nesting is refused (jq's own limit is 256). */
#define JSON_DEPTH_MAX 200

struct scan {
	const unsigned char *p, *end;
};

static void ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
				 *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static bool lit(struct scan *s, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
		return false;
	s->p += n;
	return true;
}

static bool hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F');
}

static bool string(struct scan *s)
{
	s->p++; /* the opening quote */
	while (s->p < s->end) {
		unsigned char c = *s->p++;
		if (c == '"')
			return true;
		if (c < 0x20)
			return false;
		if (c != '\\')
			continue;
		if (s->p >= s->end)
			return false;
		c = *s->p++;
		if (c == 'u') {
			if (s->end - s->p < 4 || !hex(s->p[0]) || !hex(s->p[1]) ||
			    !hex(s->p[2]) || !hex(s->p[3]))
				return false;
			s->p += 4;
		} else if (!strchr("\"\\/bfnrt", c) || c == '\0') {
			return false;
		}
	}
	return false;
}

static bool digits(struct scan *s)
{
	const unsigned char *start = s->p;
	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	return s->p > start;
}

static bool number(struct scan *s)
{
	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0')
		s->p++;
	else if (!digits(s))
		return false;
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		if (!digits(s))
			return false;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (!digits(s))
			return false;
	}
	return true;
}

static bool value(struct scan *s, int depth)
{
	ws(s);
	if (s->p >= s->end)
		return false;
	switch (*s->p) {
	case '{':
		if (depth >= JSON_DEPTH_MAX)
			return false;
		s->p++;
		ws(s);
		if (s->p < s->end && *s->p == '}') {
			s->p++;
			return true;
		}
		for (;;) {
			ws(s);
			if (s->p >= s->end || *s->p != '"' || !string(s))
				return false;
			ws(s);
			if (s->p >= s->end || *s->p++ != ':')
				return false;
			if (!value(s, depth + 1))
				return false;
			ws(s);
			if (s->p >= s->end)
				return false;
			if (*s->p == '}') {
				s->p++;
				return true;
			}
			if (*s->p++ != ',')
				return false;
		}
	case '[':
		if (depth >= JSON_DEPTH_MAX)
			return false;
		s->p++;
		ws(s);
		if (s->p < s->end && *s->p == ']') {
			s->p++;
			return true;
		}
		for (;;) {
			if (!value(s, depth + 1))
				return false;
			ws(s);
			if (s->p >= s->end)
				return false;
			if (*s->p == ']') {
				s->p++;
				return true;
			}
			if (*s->p++ != ',')
				return false;
		}
	case '"':
		return string(s);
	case 't':
		return lit(s, "true");
	case 'f':
		return lit(s, "false");
	case 'n':
		return lit(s, "null");
	default:
		return number(s);
	}
}

/* True when p[0..n) is exactly one JSON value, whitespace around it. */
bool cave_json_valid(const char *p, size_t n, size_t *at)
{
	struct scan s = {(const unsigned char *)p, (const unsigned char *)p + n};
	bool ok = value(&s, 0);
	if (ok)
		ws(&s);
	ok = ok && s.p == s.end;
	if (at)
		*at = (size_t)((const char *)s.p - p);
	return ok;
}

jv cave_json_parse(const char *p, size_t n)
{
	char *copy;
	jv v;
	if (n > ((size_t)1 << 30) || !cave_json_valid(p, n, NULL))
		return jv_invalid_with_msg(jv_string("not JSON text"));
	/* jq 1.6 formats its input as a C string in error messages */
	copy = cave_xstrndup(p, n);
	v = jv_parse_sized(copy, (int)n);
	free(copy);
	return v;
}
