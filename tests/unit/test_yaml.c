/* test_yaml.c: YAML -> jv (lib/yaml.c): core-schema typing, key order, and
 * the refusals (anchors, aliases, tags, duplicate keys, documents). */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "yaml.h"

/* Parses s and returns its compact JSON (caller frees), or "ERR:" + msg. */
static char *to_json(const char *s)
{
	cave_err e = { { 0 }, { 0 }, 0 };
	jv v = cave_yaml_parse(s, strlen(s), "t.yaml", &e);
	char *r;
	if (!jv_is_valid(v)) {
		size_t n = strlen(e.msg) + 5;
		r = malloc(n);
		snprintf(r, n, "ERR:%s", e.msg);
		jv_free(v);
		return r;
	}
	jv d = jv_dump_string(v, 0); /* consumes v */
	r = strdup(jv_string_value(d));
	jv_free(d);
	return r;
}

static void check(const char *yaml, const char *want, const char *name)
{
	char *got = to_json(yaml);
	is_str(got, want, name);
	free(got);
}

static void check_err(const char *yaml, const char *want_sub, const char *name)
{
	char *got = to_json(yaml);
	int good = !strncmp(got, "ERR:", 4) && strstr(got, want_sub);
	ok(good, "%s", name);
	if (!good)
		printf("#   got '%s', want an error with '%s'\n", got, want_sub);
	free(got);
}

int main(void)
{
	/* plain scalars, YAML 1.2 core schema */
	check("a: 1", "{\"a\":1}", "integer");
	check("a: -17", "{\"a\":-17}", "negative integer");
	check("a: +3", "{\"a\":3}", "plus-signed integer");
	check("a: 0x1F", "{\"a\":31}", "hex integer");
	check("a: 0o17", "{\"a\":15}", "octal integer");
	check("a: 017", "{\"a\":17}", "leading zero is decimal in 1.2");
	check("a: 1.5", "{\"a\":1.5}", "float");
	check("a: .5", "{\"a\":0.5}", "float without integer part");
	check("a: 1e3", "{\"a\":1000}", "exponent");
	check("a: true\nb: False\nc: TRUE", "{\"a\":true,\"b\":false,\"c\":true}",
	      "booleans");
	check("a: yes\nb: on\nc: no", "{\"a\":\"yes\",\"b\":\"on\",\"c\":\"no\"}",
	      "YAML 1.1 booleans stay strings");
	check("a: ~\nb: null\nc:", "{\"a\":null,\"b\":null,\"c\":null}", "nulls");
	check("a: 2026-11-30", "{\"a\":\"2026-11-30\"}", "dates stay strings");
	check("a: 1_000", "{\"a\":\"1_000\"}", "1.1 underscores stay strings");
	check("a: 0b101", "{\"a\":\"0b101\"}", "binary is not core");
	check("a: 1.2.3", "{\"a\":\"1.2.3\"}", "version-like text is a string");
	check("a: 9007199254740992", "{\"a\":9007199254740992}", "2^53 is exact");
	check_err("a: 9007199254740993", "integer too large", "beyond 2^53 refused");
	check_err("a: .inf", "NaN", "infinity refused");
	check_err("a: .nan", "NaN", "nan refused");
	/* quoted scalars stay strings */
	check("a: \"1\"\nb: '0.075'\nc: \"true\"\nd: 'null'",
	      "{\"a\":\"1\",\"b\":\"0.075\",\"c\":\"true\",\"d\":\"null\"}",
	      "quoted scalars stay strings");
	check("a: |\n  x\n  y\n", "{\"a\":\"x\\ny\\n\"}", "literal block");
	check("a: >-\n  x\n  y\n", "{\"a\":\"x y\"}", "folded block");
	/* structure and order */
	check("z: 1\na: 2\nm: 3", "{\"z\":1,\"a\":2,\"m\":3}", "key order kept");
	check("- 1\n- [a, \"b\"]\n- {k: v}", "[1,[\"a\",\"b\"],{\"k\":\"v\"}]",
	      "nested flow and block");
	check("", "null", "empty stream is null");
	check("---\n", "null", "empty document is null");
	check("1: x\ntrue: y", "{\"1\":\"x\",\"true\":\"y\"}", "keys keep their text");
	check("a: \"\\u00e9\"", "{\"a\":\"\xc3\xa9\"}", "unicode escape");
	/* refusals, with name:LINE:COL */
	check_err("a: 1\nb: 2\na: 3", "t.yaml:3:1: duplicate key 'a'", "duplicate key");
	check_err("a: &x 1\nb: *x", "t.yaml:1:4: anchors are not supported", "anchor");
	check_err("a: *x", "t.yaml:1:4:", "alias (undefined) refused");
	check_err("a: !!str 1", "tags are not supported", "tag");
	check_err("? [a]\n: 1", "mapping keys must be scalars", "complex key");
	check_err("a: 1\n---\nb: 2", "t.yaml:2:1: more than one document", "two documents");
	check_err("a: [1, 2", "t.yaml:", "unterminated flow sequence");
	check_err("a: b: c", "t.yaml:1:5:", "syntax error names its place");
	{
		/* nesting limit */
		char deep[600];
		size_t n = 0;
		for (int i = 0; i < 200; i++)
			deep[n++] = '[';
		for (int i = 0; i < 200; i++)
			deep[n++] = ']';
		deep[n] = '\0';
		check_err(deep, "nesting too deep", "nesting limit");
	}
	{
		cave_err e = { { 0 }, { 0 }, 0 };
		jv v = cave_yaml_load("/nonexistent/x.yaml", &e);
		ok(!jv_is_valid(v) && strstr(e.msg, "cannot open '/nonexistent/x.yaml'"),
		   "load names a missing file");
		jv_free(v);
	}
	return tap_done();
}
