/* fuzz_json.c: libFuzzer target for lib/json.c against jq itself. A scan
 * that says it is sure must say what jq's parse of the same bytes holds,
 * and a splice must change one member and nothing else; whatever the
 * bytes, a string made of them (jq repairs what is not UTF-8) and any
 * value jq parsed must dump to jq's own bytes. jq parses only lines the
 * scan was sure of (jq 1.6 leaks on some malformed input). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_dump(jv v) /* borrows v */
{
	jv want = jv_dump_string(jv_copy(v), 0);
	size_t n = (size_t)jv_string_length_bytes(jv_copy(want));
	struct cave_buf b;

	cave_buf_init(&b, (size_t)1 << 28);
	if (cave_json_dump(&b, v) < 0 || b.len != n || memcmp(b.data, jv_string_value(want), n) != 0)
		abort();
	if (cave_json_dump_len(v) != n)
		abort();
	cave_buf_free(&b);
	jv_free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = { "type", "messages", "system", "tools", "a", "",
					    "max_output_tokens" };
	enum { NKEYS = sizeof keys / sizeof *keys };
	struct cave_json_field f[NKEYS];
	const char *line = (const char *)data;
	size_t close = 0;

	if (size > ((size_t)1 << 20))
		return 0;
	{
		jv s = jv_string_sized(line, (int)size);

		same_dump(s);
		jv_free(s);
	}
	for (size_t i = 0; i < NKEYS; i++)
		f[i].key = keys[i];
	if (cave_json_scan(line, size, f, NKEYS, &close) < 0) {
		for (size_t i = 0; i < NKEYS; i++)
			if (f[i].found)
				abort();
		return 0;
	}
	{
		char *copy = malloc(size + 1), *spliced;
		size_t n;
		jv v, got, want;

		memcpy(copy, line, size);
		copy[size] = '\0';
		v = jv_parse_sized(copy, (int)size);
		if (jv_get_kind(v) != JV_KIND_OBJECT || line[close] != '}')
			abort();
		for (size_t i = 0; i < NKEYS; i++) {
			jv x = jv_object_get(jv_copy(v), jv_string(keys[i]));

			if (jv_is_valid(x) != f[i].found)
				abort();
			if (f[i].found) {
				jv d = jv_dump_string(jv_copy(x), 0), r;

				if (jv_get_kind(x) != f[i].kind ||
				    (size_t)jv_string_length_bytes(jv_copy(d)) != f[i].dump_len)
					abort();
				if (f[i].kind == JV_KIND_STRING &&
				    (size_t)jv_string_length_bytes(jv_copy(x)) != f[i].str_len)
					abort();
				if ((f[i].kind == JV_KIND_ARRAY && (size_t)jv_array_length(jv_copy(x)) != f[i].count) ||
				    (f[i].kind == JV_KIND_OBJECT && (size_t)jv_object_length(jv_copy(x)) != f[i].count))
					abort();
				r = jv_parse_sized(f[i].raw, (int)f[i].raw_len);
				if (!jv_equal(r, jv_copy(x)))
					abort();
				jv_free(d);
			}
			jv_free(x);
		}
		spliced = cave_json_splice(line, size, close, &f[NKEYS - 1], "12345", &n);
		got = jv_parse_sized(spliced, (int)n);
		want = jv_object_set(jv_copy(v), jv_string("max_output_tokens"), jv_number(12345));
		if (!jv_equal(got, want))
			abort();
		same_dump(v);
		jv_free(v);
		free(spliced);
		free(copy);
	}
	return 0;
}
