/* yaml.c: one YAML document into a jv value, through libyaml's event parser.
 * Owns the YAML 1.2 core-schema typing of plain scalars and the refusals
 * (anchors, aliases, tags, duplicate keys, several documents). It must
 * never guess: whatever it cannot map exactly is an error naming its place. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libyaml's <yaml.h>, then ours: lib/yaml.h forwards (see there). */
#define CAVE_YAML_IMPL
#include <yaml.h>
#undef CAVE_YAML_IMPL
#include "buf.h"
#include "yaml.h"

/* A YAML file larger than this is refused rather than read. */
#define CAVE_YAML_MAX ((size_t)16 << 20)
/* Nesting deeper than this is refused (the parser recurses). */
#define CAVE_YAML_DEPTH 128

struct yctx {
	yaml_parser_t parser;
	const char *name;
	cave_err *e;
};

static int yerr(struct yctx *y, const yaml_mark_t *m, const char *what)
{
	return cave_errf(y->e, "yaml", "%s:%zu:%zu: %s", y->name,
			 (size_t)m->line + 1, (size_t)m->column + 1, what);
}

/* Reads the next event; -1 with e set on a syntax error. */
static int next_event(struct yctx *y, yaml_event_t *ev)
{
	if (yaml_parser_parse(&y->parser, ev))
		return 0;
	return cave_errf(y->e, "yaml", "%s:%zu:%zu: %s%s%s", y->name,
			 (size_t)y->parser.problem_mark.line + 1,
			 (size_t)y->parser.problem_mark.column + 1,
			 y->parser.problem ? y->parser.problem : "syntax error",
			 y->parser.context ? " " : "",
			 y->parser.context ? y->parser.context : "");
}

static bool all_of(const char *s, const char *set)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr(set, *s))
			return false;
	return true;
}

#define DIGITS "0123456789"

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_core_float(const char *s)
{
	size_t n = 0, frac = 0;
	if (*s == '-' || *s == '+')
		s++;
	while (*s >= '0' && *s <= '9')
		s++, n++;
	if (*s == '.') {
		s++;
		while (*s >= '0' && *s <= '9')
			s++, frac++;
	}
	if (n == 0 && frac == 0)
		return false;
	if (*s == 'e' || *s == 'E') {
		size_t x = 0;
		s++;
		if (*s == '-' || *s == '+')
			s++;
		while (*s >= '0' && *s <= '9')
			s++, x++;
		if (x == 0)
			return false;
	}
	return *s == '\0';
}

/* Types a plain scalar by the YAML 1.2 core schema. Integers must be exact
 * in a double (|n| <= 2^53); infinities and NaN have no JSON form and are
 * refused. Returns 0 and sets *out, or -1 with why set. */
static int plain_scalar(const char *s, jv *out, const char **why)
{
	const char *digits = s;
	char *end;
	int base = 10;

	if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	    !strcmp(s, "NULL")) {
		*out = jv_null();
		return 0;
	}
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
		*out = jv_true();
		return 0;
	}
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
		*out = jv_false();
		return 0;
	}
	if (!strncmp(s, "0x", 2) && all_of(s + 2, DIGITS "abcdefABCDEF"))
		base = 16, digits = s + 2;
	else if (!strncmp(s, "0o", 2) && all_of(s + 2, "01234567"))
		base = 8, digits = s + 2;
	if (base != 10 || all_of(s + (*s == '-' || *s == '+'), DIGITS)) {
		long long v;
		errno = 0;
		v = strtoll(digits, &end, base);
		if (errno || *end || v > (INT64_C(1) << 53) || v < -(INT64_C(1) << 53)) {
			*why = "integer too large to be exact";
			return -1;
		}
		*out = jv_number((double)v);
		return 0;
	}
	if (is_core_float(s)) {
		double d;
		errno = 0;
		d = strtod(s, &end);
		if (*end || !isfinite(d)) {
			*why = "number out of range";
			return -1;
		}
		*out = jv_number(d);
		return 0;
	}
	{
		const char *t = s + (*s == '-' || *s == '+');
		if (!strcmp(t, ".inf") || !strcmp(t, ".Inf") || !strcmp(t, ".INF") ||
		    !strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) {
			*why = "infinite and NaN numbers are not supported";
			return -1;
		}
	}
	*out = jv_string(s);
	return 0;
}

/* Refuses anchors and tags on a node event. */
static int check_props(struct yctx *y, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		break;
	}
	if (anchor)
		return yerr(y, &ev->start_mark, "anchors are not supported");
	if (tag)
		return yerr(y, &ev->start_mark, "tags are not supported");
	return 0;
}

static int node(struct yctx *y, yaml_event_t *ev, int depth, jv *out);

static int scalar(struct yctx *y, const yaml_event_t *ev, jv *out)
{
	const char *s = (const char *)ev->data.scalar.value;
	const char *why = NULL;

	if (strlen(s) != ev->data.scalar.length)
		return yerr(y, &ev->start_mark, "NUL byte in scalar");
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		*out = jv_string_sized(s, (int)ev->data.scalar.length);
		return 0;
	}
	if (plain_scalar(s, out, &why) < 0)
		return yerr(y, &ev->start_mark, why);
	return 0;
}

/* Builds a sequence; ev is its start event (not deleted here). */
static int sequence(struct yctx *y, int depth, jv *out)
{
	jv arr = jv_array();
	yaml_event_t ev;
	int ret = -1;

	for (;;) {
		jv item;
		if (next_event(y, &ev) < 0)
			goto out;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (node(y, &ev, depth + 1, &item) < 0)
			goto out;
		arr = jv_array_append(arr, item); /* consumes arr, item */
	}
	*out = arr;
	arr = jv_invalid();
	ret = 0;
out:
	jv_free(arr);
	return ret;
}

/* Builds a mapping, keeping key order; duplicate and non-scalar keys are
 * errors. */
static int mapping(struct yctx *y, int depth, jv *out)
{
	jv obj = jv_object();
	yaml_event_t ev;
	int ret = -1;

	for (;;) {
		jv key, val;
		if (next_event(y, &ev) < 0)
			goto out;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			yerr(y, &ev.start_mark, "mapping keys must be scalars");
			yaml_event_delete(&ev);
			goto out;
		}
		if (check_props(y, &ev) < 0) {
			yaml_event_delete(&ev);
			goto out;
		}
		key = jv_string_sized((const char *)ev.data.scalar.value,
				      (int)ev.data.scalar.length);
		if (jv_object_has(jv_copy(obj), jv_copy(key))) {
			char what[300];
			snprintf(what, sizeof what, "duplicate key '%.200s'",
				 jv_string_value(key));
			yerr(y, &ev.start_mark, what);
			jv_free(key);
			yaml_event_delete(&ev);
			goto out;
		}
		yaml_event_delete(&ev);
		if (next_event(y, &ev) < 0) {
			jv_free(key);
			goto out;
		}
		if (node(y, &ev, depth + 1, &val) < 0) {
			jv_free(key);
			goto out;
		}
		obj = jv_object_set(obj, key, val); /* consumes all three */
	}
	*out = obj;
	obj = jv_invalid();
	ret = 0;
out:
	jv_free(obj);
	return ret;
}

/* Turns the node that starts with ev into *out. Deletes ev. */
static int node(struct yctx *y, yaml_event_t *ev, int depth, jv *out)
{
	int ret = -1;

	if (depth > CAVE_YAML_DEPTH) {
		yerr(y, &ev->start_mark, "nesting too deep");
		goto out;
	}
	if (ev->type == YAML_ALIAS_EVENT) {
		yerr(y, &ev->start_mark, "aliases are not supported");
		goto out;
	}
	if (check_props(y, ev) < 0)
		goto out;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		ret = scalar(y, ev, out);
		break;
	case YAML_SEQUENCE_START_EVENT:
		ret = sequence(y, depth, out);
		break;
	case YAML_MAPPING_START_EVENT:
		ret = mapping(y, depth, out);
		break;
	default:
		yerr(y, &ev->start_mark, "unexpected event");
		break;
	}
out:
	yaml_event_delete(ev);
	return ret;
}

jv cave_yaml_parse(const char *text, size_t len, const char *name, cave_err *e)
{
	struct yctx y = { .name = name ? name : "<yaml>", .e = e };
	yaml_event_t ev;
	jv doc = jv_invalid();
	bool have_doc = false, done = false;

	if (!yaml_parser_initialize(&y.parser)) {
		cave_errf(e, "yaml", "%s: cannot initialise the YAML parser", y.name);
		return jv_invalid();
	}
	yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
	yaml_parser_set_encoding(&y.parser, YAML_UTF8_ENCODING);
	while (!done) {
		if (next_event(&y, &ev) < 0)
			goto fail;
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			yaml_event_delete(&ev);
			break;
		case YAML_STREAM_END_EVENT:
			yaml_event_delete(&ev);
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (have_doc) {
				yerr(&y, &ev.start_mark, "more than one document");
				yaml_event_delete(&ev);
				goto fail;
			}
			have_doc = true;
			yaml_event_delete(&ev);
			if (next_event(&y, &ev) < 0 || node(&y, &ev, 0, &doc) < 0)
				goto fail;
			break;
		default:
			yerr(&y, &ev.start_mark, "unexpected event");
			yaml_event_delete(&ev);
			goto fail;
		}
	}
	yaml_parser_delete(&y.parser);
	/* An empty stream is an empty document: null. */
	return have_doc ? doc : jv_null();
fail:
	jv_free(doc);
	yaml_parser_delete(&y.parser);
	return jv_invalid();
}

jv cave_yaml_load(const char *path, cave_err *e)
{
	struct cave_buf b;
	char chunk[65536];
	size_t n;
	jv v = jv_invalid();
	FILE *f;

	cave_buf_init(&b, CAVE_YAML_MAX);
	f = fopen(path, "rb");
	if (!f) {
		cave_errf(e, "yaml", "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (cave_buf_add(&b, chunk, n) < 0) {
			cave_errf(e, "yaml", "'%s': larger than %zu bytes", path,
				  CAVE_YAML_MAX);
			goto out;
		}
	}
	if (ferror(f)) {
		cave_errf(e, "yaml", "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	v = cave_yaml_parse(b.data ? b.data : "", b.len, path, e);
out:
	if (f)
		fclose(f);
	cave_buf_free(&b);
	return v;
}
