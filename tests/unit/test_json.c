/* Unit tests of lib/json.c against jq itself: the dump must give
 * jv_dump_string's bytes for any value, and a scan that says it is sure
 * must say what jq's parse of the same line holds; where it cannot be
 * sure (adversarial lines) it must say so. Random cases are seeded, so a
 * failure repeats. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "reserve.h"
#include "tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

/* A test name from a case: its first bytes, any but printable ASCII as '.'. */
static const char *name(const char *text)
{
	static char out[64];
	size_t i;

	for (i = 0; i < sizeof out - 1 && text[i]; i++)
		out[i] = (unsigned char)text[i] < 0x20 || (unsigned char)text[i] >= 0x7f ? '.' : text[i];
	out[i] = '\0';
	return out;
}

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* 1 when cave_json_dump and cave_json_dump_len agree with jq on v
 * (borrowed); says why on failure. */
static int dump_matches(jv v, const char *what)
{
	jv want = jv_dump_string(jv_copy(v), 0);
	const char *w = jv_string_value(want);
	size_t wn = (size_t)jv_string_length_bytes(jv_copy(want));
	struct cave_buf b;
	int good;

	cave_buf_init(&b, (size_t)1 << 30);
	cave_buf_adds(&b, "<"); /* the dump appends */
	good = cave_json_dump(&b, v) == 0 && b.len == wn + 1 && memcmp(b.data + 1, w, wn) == 0 &&
	       cave_json_dump_len(v) == wn;
	if (!good)
		printf("# %s: jq '%.200s' (%zu), cave '%.200s' (%zu), len %zu\n", what, w, wn,
		       b.data + 1, b.len - 1, cave_json_dump_len(v));
	cave_buf_free(&b);
	jv_free(want);
	return good;
}

/* 1 when a scan of text that says it is sure agrees with jq's parse on
 * every field; 0 on a disagreement. *sure says what the scan said. */
static int scan_matches(const char *text, size_t len, int *sure)
{
	const char *keys[] = { "type", "messages", "system", "tools", "model", "a", "", "max_output_tokens" };
	struct cave_json_field f[8];
	size_t close = 0;
	jv v;
	int good = 1;

	for (size_t i = 0; i < 8; i++)
		f[i].key = keys[i];
	*sure = cave_json_scan(text, len, f, 8, &close) == 0;
	if (!*sure) {
		for (size_t i = 0; i < 8; i++)
			if (f[i].found)
				return 0; /* nothing found when unsure */
		return 1;
	}
	v = jv_parse_sized(text, (int)len);
	if (jv_get_kind(v) != JV_KIND_OBJECT || text[close] != '}') {
		printf("# sure, but jq says kind %d: %.200s\n", (int)jv_get_kind(v), text);
		jv_free(v);
		return 0;
	}
	for (size_t i = 0; i < 8; i++) {
		jv x = jv_object_get(jv_copy(v), jv_string(keys[i]));
		int found = jv_is_valid(x);

		if (found != f[i].found) {
			good = 0;
		} else if (found) {
			jv d = jv_dump_string(jv_copy(x), 0);
			jv_kind k = jv_get_kind(x);

			if (k != f[i].kind || (size_t)jv_string_length_bytes(jv_copy(d)) != f[i].dump_len)
				good = 0;
			if (k == JV_KIND_STRING && (size_t)jv_string_length_bytes(jv_copy(x)) != f[i].str_len)
				good = 0;
			if (k == JV_KIND_ARRAY && (size_t)jv_array_length(jv_copy(x)) != f[i].count)
				good = 0;
			if (k == JV_KIND_OBJECT && (size_t)jv_object_length(jv_copy(x)) != f[i].count)
				good = 0;
			/* the raw bytes are that value */
			{
				jv r = jv_parse_sized(f[i].raw, (int)f[i].raw_len);

				if (!jv_equal(r, jv_copy(x)))
					good = 0;
			}
			if (!good)
				printf("# field '%s': jq kind %d dump %d, scan kind %d dump %zu str %zu count %zu\n",
				       keys[i], (int)k, jv_string_length_bytes(jv_copy(d)), (int)f[i].kind,
				       f[i].dump_len, f[i].str_len, f[i].count);
			jv_free(d);
		}
		jv_free(x);
	}
	/* a splice sets max_output_tokens and keeps everything else */
	{
		size_t n;
		char *s = cave_json_splice(text, len, close, &f[7], "4321", &n);
		jv got = jv_parse_sized(s, (int)n);
		jv want = jv_object_set(jv_copy(v), jv_string("max_output_tokens"), jv_number(4321));

		if (!jv_equal(got, want)) {
			printf("# splice: %.200s\n", s);
			good = 0;
		}
		free(s);
	}
	jv_free(v);
	return good;
}

static void test_dump_cases(void)
{
	static const char *texts[] = {
		"null", "true", "false", "0", "-0", "1", "-1", "123456789012345", "-999999999999999",
		"1000000000000000", "1e15", "1e16", "1e17", "12345678901234567890", "0.1", "1.5", "-2.25",
		"1e-5", "0.0001", "1e300", "1e400", "-1e400", "3.141592653589793", "5e-324", "1.0", "100.000",
		"\"\"", "\"plain ascii text, long enough for whole words: 0123456789\"",
		"\"\\\"quotes\\\" and \\\\ backslashes \\/ slash\"",
		"\"\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\\u007f\\u0080 end\"",
		"\"caf\xc3\xa9 \xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x98\x80 \\ud83d\\ude00 \\u00e9\\u6f22\"",
		"\"\x7f raw del \x7f\x7f\"", "\"\\u2028\\u2029\\ufeff\\uffff\"",
		"[]", "{}", "[[],{},[[]],{\"a\":{}}]", "[1,\"two\",3.5,null,true,false,{\"k\":[\"v\"]}]",
		"{\"a\":1,\"b\":{\"c\":[1,2,{\"d\":\"e\\nf\"}]},\"\":\"empty key\",\"k\\\"q\":0}",
		"{\"dup\":1,\"x\":2,\"dup\":3}", "{\"a\\u0000b\":\"nul in a key\"}",
		"\"\\udc00 lone low\"", "nan",
	};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
		jv v = jv_parse(texts[i]);

		if (!jv_is_valid(v)) {
			ok(0, "jq parses case %zu: %s", i, name(texts[i]));
			jv_free(v);
			continue;
		}
		ok(dump_matches(v, texts[i]), "dump as jq: %s", name(texts[i]));
		jv_free(v);
	}
	{
		/* nesting past what the dump walks itself: handed over to jq */
		jv v = jv_number(1);

		for (int i = 0; i < 230; i++)
			v = jv_array_append(jv_array(), v);
		ok(dump_matches(v, "deep"), "dump of 230 levels as jq");
		jv_free(v);
	}
	{
		/* bytes that are not UTF-8 given to jq: stored replaced */
		jv v = jv_string_sized("a\xff\xc0\x80\xed\xa0\x80z", 8);

		ok(dump_matches(v, "bad utf-8"), "dump of a string jq repaired");
		jv_free(v);
	}
	{
		jv v = jv_number(NAN);

		ok(dump_matches(v, "nan"), "NaN dumps as null");
		jv_free(v);
		v = jv_number(INFINITY);
		ok(dump_matches(v, "inf"), "infinity dumps as jq's largest number");
		jv_free(v);
	}
	{
		/* a megabyte string of mixed text */
		struct cave_buf b;
		jv v;

		cave_buf_init(&b, (size_t)4 << 20);
		while (b.len < ((size_t)1 << 20))
			cave_buf_adds(&b, "line \"q\" \\ caf\xc3\xa9 \xf0\x9f\x98\x80\t\x01\x7f end\n");
		v = jv_string_sized(b.data, (int)b.len);
		ok(dump_matches(v, "1 MB"), "dump of a 1 MB string as jq");
		jv_free(v);
		cave_buf_free(&b);
	}
	{
		/* near its cap the dump goes on the careful way: the same bytes */
		struct cave_buf b, t;
		jv v, want;

		cave_buf_init(&t, (size_t)1 << 20);
		while (t.len < (size_t)800 << 10) /* about 930 KiB dumped */
			cave_buf_adds(&t, "plain text \"q\" \xc3\xa9\n");
		v = jv_string_sized(t.data, (int)t.len);
		want = jv_dump_string(jv_copy(v), 0);
		cave_buf_init(&b, (size_t)1 << 20);
		ok(cave_json_dump(&b, v) == 0 && b.len == (size_t)jv_string_length_bytes(jv_copy(want)) &&
		   memcmp(b.data, jv_string_value(want), b.len) == 0 && b.data[b.len] == '\0',
		   "a dump that nears the cap finishes the careful way, as jq");
		cave_buf_reset(&b);
		cave_buf_adds(&b, "x");
		b.max = b.len + (size_t)jv_string_length_bytes(jv_copy(want)) - 1;
		ok(cave_json_dump(&b, v) < 0 && b.len == 1 && strcmp(b.data, "x") == 0,
		   "one byte short of the cap: refused, the buffer as it was");
		jv_free(want);
		jv_free(v);
		cave_buf_free(&b);
		cave_buf_free(&t);
	}
	{
		struct cave_buf b;
		jv v = jv_string("long");

		cave_buf_init(&b, 4);
		cave_buf_adds(&b, "ab");
		ok(cave_json_dump(&b, v) < 0 && b.len == 2 && strcmp(b.data, "ab") == 0,
		   "a dump past the cap is refused and leaves the buffer as it was");
		jv_free(v);
		cave_buf_free(&b);
	}
}

/* A random value: strings of any code points (escaped or not by jq),
 * numbers of every shape, nesting, repeated keys. */
static jv random_value(int depth)
{
	uint32_t k = rnd(depth > 4 ? 4 : 7);

	switch (k) {
	case 0: return jv_null();
	case 1: return rnd(2) ? jv_true() : jv_false();
	case 2: {
		static const double nums[] = { 0, -0.0, 1, -1, 0.5, 1e15, 1e16, 1e17, 123456789012345678.0,
					       1e-7, 3.25, -1e300, 2e-308, 999999999999999, 1e21, 0.1 };
		return rnd(3) ? jv_number(nums[rnd(16)])
			      : jv_number((double)rnd(1000000) / (1 + rnd(1000)) * (rnd(2) ? 1 : -1));
	}
	case 3: {
		char s[64];
		size_t n = 0, len = rnd(20);

		for (size_t i = 0; i < len; i++) {
			uint32_t c = rnd(6);

			if (c == 0)
				s[n++] = (char)rnd(0x20);
			else if (c == 1)
				s[n++] = "\"\\/\x7f"[rnd(4)];
			else if (c == 2)
				n += (size_t)snprintf(s + n, sizeof s - n, "\xc3\xa9");
			else if (c == 3)
				n += (size_t)snprintf(s + n, sizeof s - n, "\xf0\x9f\x98\x80");
			else if (c == 4)
				s[n++] = (char)(0x80 + rnd(0x80)); /* not UTF-8: jq repairs */
			else
				s[n++] = (char)(0x20 + rnd(0x5f));
		}
		return jv_string_sized(s, (int)n);
	}
	case 4: {
		jv a = jv_array();
		uint32_t n = rnd(5);

		for (uint32_t i = 0; i < n; i++)
			a = jv_array_append(a, random_value(depth + 1));
		return a;
	}
	default: {
		jv o = jv_object();
		uint32_t n = rnd(5);

		for (uint32_t i = 0; i < n; i++) {
			/* mostly plain keys; an escaped one makes the scan unsure */
			jv key = rnd(8) ? jv_string_fmt("k%u", rnd(6)) : random_value(5);

			if (jv_get_kind(key) != JV_KIND_STRING) {
				jv_free(key);
				key = jv_string(rnd(2) ? "a" : "caf\xc3\xa9");
			}
			o = jv_object_set(o, key, random_value(depth + 1));
		}
		return o;
	}
	}
}

static void test_dump_random(void)
{
	int bad = 0;

	for (int i = 0; i < 20000 && bad < 5; i++) {
		jv v = random_value(0);

		if (!dump_matches(v, "random"))
			bad++;
		jv_free(v);
	}
	ok(bad == 0, "20000 random values dump as jq");
}

static void test_scan_cases(void)
{
	static const char *sure[] = {
		"{\"type\":\"call.request\",\"src\":\"cave-run\",\"v\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_output_tokens\":1000}",
		"{\"type\":\"x\",\"system\":\"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\/ \\n \\u0001 \x7f\",\"a\":[1,-0,2.5,1e400,1E2,0.0001,123456789012345678]}",
		"  {\"type\" : \"x\" ,\n\t\"messages\" : [ 1 , { \"k\" : null } , [ ] , { } ] , \"tools\":[]\r} \n",
		"{\"type\":\"x\",\"model\":\"\",\"\":{\"\":\"\"},\"max_output_tokens\":-5}",
		"{\"type\":\"x\",\"a\":{\"b\":1},\"c\":{\"b\":2},\"messages\":{\"b\":3,\"c\":{\"b\":4}}}",
		"{\"type\":\"x\",\"system\":[{\"type\":\"text\",\"text\":\"\xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x98\x80\"}]}",
		"{}",
	};
	static const char *unsure[] = {
		"{\"type\":\"x\",\"a\":1,\"a\":2}",                    /* a repeated key: jq keeps the last */
		"{\"type\":\"x\",\"m\":{\"k\":1,\"k\":2}}",            /* repeated deeper: jq's dump is shorter */
		"{\"type\":\"x\",\"mod\\u0065l\":\"m\"}",              /* an escaped key */
		"{\"type\":\"x\",\"a\":\"tab\there\"}",                 /* a raw control character */
		"{\"type\":\"x\",\"a\":\"\xff\"}",                      /* not UTF-8 */
		"{\"type\":\"x\",\"a\":\"\xc0\x80\"}",                  /* overlong */
		"{\"type\":\"x\",\"a\":\"\xed\xa0\x80\"}",              /* an encoded surrogate */
		"{\"type\":\"x\",\"a\":\"\xf4\x90\x80\x80\"}",          /* past U+10FFFF */
		"{\"type\":\"x\",\"a\":\"\\ud800\"}",                   /* a lone high surrogate */
		"{\"type\":\"x\",\"a\":\"\\udc00\"}",                   /* a lone low surrogate */
		"{\"type\":\"x\",\"a\":\"\\ud800\\u0041\"}",            /* a pair that is not */
		"{\"type\":\"x\",\"a\":\"\\x\"}", "{\"type\":\"x\",\"a\":\"\\u12g4\"}",
		"{\"type\":\"x\",\"a\":01}", "{\"type\":\"x\",\"a\":1.}", "{\"type\":\"x\",\"a\":.5}",
		"{\"type\":\"x\",\"a\":+1}", "{\"type\":\"x\",\"a\":1e}", "{\"type\":\"x\",\"a\":nan}",
		"{\"type\":\"x\",\"a\":tru}", "{\"type\":\"x\",\"a\":truex}", "{\"type\":\"x\",\"a\":1true}",
		"{\"type\":\"x\",\"a\":[1,]}", "{\"type\":\"x\",\"a\":[,1]}", "{\"type\":\"x\",\"a\":{,}}",
		"{\"type\":\"x\",}", "{\"type\":\"x\" \"a\":1}", "{\"type\":\"x\",\"a\"1}",
		"{\"type\":\"x\"", "{\"type\":\"x\"}}", "{\"type\":\"x\"} {}", "{\"type\":\"x\"}x",
		"[1]", "\"s\"", "", " ", "{\"type\":\"unterminated}", "{\"type\":\"x\",\"a\":\"\\",
		"{\"type\":\"x\",\"a\":[1,2", "{\"type\":\"x\",\"a\":\"\\u00\"}",
	};
	for (size_t i = 0; i < sizeof sure / sizeof *sure; i++) {
		int s;

		ok(scan_matches(sure[i], strlen(sure[i]), &s) && s, "sure and right: %s", name(sure[i]));
	}
	for (size_t i = 0; i < sizeof unsure / sizeof *unsure; i++) {
		int s = 1;

		ok(scan_matches(unsure[i], strlen(unsure[i]), &s) && !s, "not sure: %s", name(unsure[i]));
	}
	{
		/* a NUL byte inside the line is not JSON text */
		static const char nul[] = "{\"type\":\"x\",\"a\":\"b\0c\"}";
		int s = 1;

		ok(scan_matches(nul, sizeof nul - 1, &s) && !s, "not sure: a raw NUL");
	}
	{
		/* nesting: measured to 200 levels, not sure past them */
		struct cave_buf b;
		int s;

		cave_buf_init(&b, 1 << 20);
		cave_buf_adds(&b, "{\"type\":\"x\",\"messages\":");
		for (int i = 0; i < 198; i++)
			cave_buf_addc(&b, '[');
		for (int i = 0; i < 198; i++)
			cave_buf_addc(&b, ']');
		cave_buf_addc(&b, '}');
		ok(scan_matches(b.data, b.len, &s) && s, "sure at 199 levels");
		cave_buf_reset(&b);
		cave_buf_adds(&b, "{\"type\":\"x\",\"messages\":");
		for (int i = 0; i < 300; i++)
			cave_buf_addc(&b, '[');
		for (int i = 0; i < 300; i++)
			cave_buf_addc(&b, ']');
		cave_buf_addc(&b, '}');
		ok(scan_matches(b.data, b.len, &s) && !s, "not sure at 301 levels");
		cave_buf_free(&b);
	}
	{
		/* a large object: its keys are compared up to a limit */
		struct cave_buf b;
		int s;

		cave_buf_init(&b, 1 << 20);
		cave_buf_adds(&b, "{\"type\":\"x\",\"a\":{");
		for (int i = 0; i < 64; i++)
			cave_buf_addf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
		cave_buf_adds(&b, "}}");
		ok(scan_matches(b.data, b.len, &s) && s, "sure with 64 keys in one object");
		cave_buf_reset(&b);
		cave_buf_adds(&b, "{\"type\":\"x\",\"a\":{");
		for (int i = 0; i < 65; i++)
			cave_buf_addf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
		cave_buf_adds(&b, "}}");
		ok(scan_matches(b.data, b.len, &s) && !s, "not sure with 65");
		cave_buf_free(&b);
	}
}

/* Random lines: random values written with random whitespace and random
 * (valid) escapes, then broken at random. Whatever the scan says must be
 * right; most unbroken lines must be measured. */
static void write_text(struct cave_buf *b, jv v, int depth, bool key) /* consumes v */
{
	const char *sp[] = { "", "", "", " ", "\n", "\t ", "\r\n" };

	switch (jv_get_kind(v)) {
	case JV_KIND_STRING: {
		const unsigned char *p = (const unsigned char *)jv_string_value(v);
		int n = jv_string_length_bytes(jv_copy(v));

		cave_buf_addc(b, '"');
		for (int i = 0; i < n; i++) {
			unsigned c = p[i];

			if (c == '"' || c == '\\')
				cave_buf_addf(b, "\\%c", c);
			else if (c < 0x20 || (c < 0x80 && !key && rnd(8) == 0))
				cave_buf_addf(b, rnd(2) ? "\\u%04x" : "\\u%04X", c);
			else if (c == '/' && !key && rnd(2))
				cave_buf_adds(b, "\\/");
			else if (c == 0xf0 && !key && rnd(2) && i + 3 < n) {
				/* an astral character as a surrogate pair */
				uint32_t cp = ((c & 7u) << 18) | ((p[i + 1] & 0x3fu) << 12) |
					      ((p[i + 2] & 0x3fu) << 6) | (p[i + 3] & 0x3fu);

				cp -= 0x10000;
				cave_buf_addf(b, "\\u%04x\\u%04x", 0xd800 | (cp >> 10), 0xdc00 | (cp & 0x3ff));
				i += 3;
			} else
				cave_buf_addc(b, (char)c);
		}
		cave_buf_addc(b, '"');
		break;
	}
	case JV_KIND_ARRAY:
		cave_buf_addc(b, '[');
		jv_array_foreach(v, i, e) {
			cave_buf_adds(b, sp[rnd(7)]);
			if (i)
				cave_buf_addc(b, ',');
			write_text(b, e, depth + 1, false);
		}
		cave_buf_adds(b, sp[rnd(7)]);
		cave_buf_addc(b, ']');
		break;
	case JV_KIND_OBJECT: {
		int first = 1;

		cave_buf_addc(b, '{');
		jv_object_foreach(v, k, e) {
			if (!first)
				cave_buf_addc(b, ',');
			first = 0;
			cave_buf_adds(b, sp[rnd(7)]);
			write_text(b, k, depth + 1, true);
			cave_buf_adds(b, sp[rnd(7)]);
			cave_buf_addc(b, ':');
			cave_buf_adds(b, sp[rnd(7)]);
			write_text(b, e, depth + 1, false);
		}
		cave_buf_addc(b, '}');
		break;
	}
	default: {
		jv d = jv_dump_string(jv_copy(v), 0);

		cave_buf_adds(b, jv_string_value(d));
		jv_free(d);
	}
	}
	jv_free(v);
}

static void test_scan_random(void)
{
	int bad = 0, measured = 0, broken_sure = 0;
	const char *fields[] = { "type", "messages", "system", "tools", "model", "a", "" };

	for (int i = 0; i < 20000 && bad < 5; i++) {
		struct cave_buf b;
		jv o = jv_object_set(jv_object(), jv_string("type"), jv_string("call.request"));
		int s;

		for (uint32_t n = rnd(6); n > 0; n--)
			o = jv_object_set(o, jv_string(fields[rnd(7)]), random_value(1));
		cave_buf_init(&b, 1 << 24);
		write_text(&b, o, 0, false);
		if (!scan_matches(b.data, b.len, &s))
			bad++;
		measured += s;
		/* broken: a byte changed, dropped or cut */
		if (b.len > 2) {
			size_t at = rnd((uint32_t)b.len);

			switch (rnd(3)) {
			case 0:
				b.data[at] = (char)rnd(256);
				break;
			case 1:
				memmove(b.data + at, b.data + at + 1, b.len - at - 1);
				b.len--;
				break;
			default:
				b.len = at;
			}
			if (!scan_matches(b.data, b.len, &s))
				bad++;
			broken_sure += s;
		}
		cave_buf_free(&b);
	}
	ok(bad == 0, "20000 random lines and their broken copies: the scan is right when sure");
	ok(measured > 10000, "most unbroken random lines are measured (%d)", measured);
	printf("# broken lines still sure (valid JSON after the change): %d\n", broken_sure);
}

static void test_splice(void)
{
	const char *l = "{\"type\":\"t\",\"max_output_tokens\":  1000 ,\"z\":1}";
	struct cave_json_field f = { .key = "max_output_tokens" };
	size_t close, n;
	char *s;

	ok(cave_json_scan(l, strlen(l), &f, 1, &close) == 0 && f.found, "scan finds the field");
	s = cave_json_splice(l, strlen(l), close, &f, "980", &n);
	is_str(s, "{\"type\":\"t\",\"max_output_tokens\":  980 ,\"z\":1}", "spliced in place, the rest kept");
	ok(n == strlen(s), "length returned");
	free(s);
	l = "{\"type\":\"t\",\"z\":1 } ";
	ok(cave_json_scan(l, strlen(l), &f, 1, &close) == 0 && !f.found, "absent field");
	s = cave_json_splice(l, strlen(l), close, &f, "7", &n);
	is_str(s, "{\"type\":\"t\",\"z\":1 ,\"max_output_tokens\":7} ", "added before the final brace");
	free(s);
	l = "{ }";
	ok(cave_json_scan(l, strlen(l), &f, 1, &close) == 0, "empty object scanned");
	s = cave_json_splice(l, strlen(l), close, &f, "7", &n);
	is_str(s, "{ \"max_output_tokens\":7}", "added to an empty object without a comma");
	free(s);
}

/* The budget's ceiling from a scan equals the one from a parse. */
static void test_reserve_scanned(void)
{
	static const char *reqs[] = {
		"{\"type\":\"call.request\",\"system\":\"h\\u00e9llo\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\\n\"}]}",
		"{\"type\":\"call.request\",\"messages\":[],\"restorable_bytes\":100.25,\"tools\":[{\"name\":\"t\"}]}",
		"{\"type\":\"call.request\",\"system\":[{\"type\":\"text\",\"text\":\"s\"}],\"tools\":[],\"messages\":null}",
		"{\"type\":\"call.request\",\"system\":null,\"tools\":{\"a\":1},\"restorable_bytes\":\"9\"}",
		"{\"type\":\"call.request\",\"restorable_bytes\":1e300,\"messages\":[1,2.5,-0]}",
		"{\"type\":\"call.request\",\"restorable_bytes\":-4,\"system\":\"\\ud83d\\ude00\"}",
	};
	struct cave_model m;

	memset(&m, 0, sizeof m);
	m.context_window = 100;
	for (size_t i = 0; i < sizeof reqs / sizeof *reqs; i++) {
		struct cave_json_field f[4] = {
			{ .key = "system" }, { .key = "messages" }, { .key = "tools" },
			{ .key = "restorable_bytes" },
		};
		jv req = jv_parse(reqs[i]);
		int sure = cave_json_scan(reqs[i], strlen(reqs[i]), f, 4, NULL) == 0;

		ok(sure && cave_reserve_input_ceiling_scanned(f, NULL) == cave_reserve_input_ceiling(req, NULL) &&
		   cave_reserve_input_ceiling_scanned(f, &m) == cave_reserve_input_ceiling(req, &m),
		   "scanned ceiling as parsed: %s (%lld)", name(reqs[i]),
		   (long long)cave_reserve_input_ceiling(req, NULL));
		jv_free(req);
	}
}

int main(void)
{
	test_dump_cases();
	test_dump_random();
	test_scan_cases();
	test_scan_random();
	test_splice();
	test_reserve_scanned();
	return tap_done();
}
