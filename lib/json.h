/* json.h: JSON for large events without jq's per-character cost. Writing:
 * the exact bytes jv_dump_string(v, 0) gives, at memcpy speed. Reading: a
 * scan of one line that finds a few top-level members and measures them
 * (as jq would dump them) without building the rest. Neither may ever
 * differ from jq: where they cannot be sure, the dump hands over to jq and
 * the scan says so, and the caller parses the line with jq. */
#ifndef CAVE_JSON_H
#define CAVE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <jv.h>

#include "buf.h"

/* Whether p[0..n) is exactly one JSON text (RFC 8259, nesting at most
 * 200), checked without allocating (lib/proto_json.c); *at (when not NULL)
 * is where the check stopped. jq 1.6 leaks on some malformed input, so
 * untrusted bytes pass here before jq sees them. */
bool cave_json_valid(const char *p, size_t n, size_t *at);

/* Appends the compact JSON of v (borrowed) to b: byte for byte what
 * jv_dump_string(v, 0) gives. -1 (b as it was) when b's cap is reached. */
int cave_json_dump(struct cave_buf *b, jv v);

/* The length of that dump, without writing it. */
size_t cave_json_dump_len(jv v);

/* One top-level member a scan looks for. */
struct cave_json_field {
	const char *key;       /* in: the member's name */
	bool found;            /* out, all below: only when found */
	jv_kind kind;
	const char *raw;       /* the value's bytes in the line */
	size_t raw_len;
	size_t dump_len;       /* strlen of jv_dump_string(value, 0) */
	size_t str_len;        /* strings: jv_string_length_bytes(value) */
	size_t count;          /* arrays and objects: their length */
};

/* Scans line[0..len) as one JSON object and fills f[0..n) (keys not
 * escaped). Returns 0 when it is sure: the line is one object that jq
 * parses, no object in it has a repeated key, and every field says what
 * jq's parse would give. Returns -1 when it is not sure (bad JSON, or JSON
 * it does not measure: escaped or repeated keys, raw control characters,
 * bytes that are not UTF-8, lone surrogates, deep nesting, many
 * non-integer numbers): the caller must parse the line with jq, which
 * decides. *close (may be NULL) is the offset of the object's final '}'. */
int cave_json_scan(const char *line, size_t len, struct cave_json_field *f,
		   size_t n, size_t *close);

/* A copy of line (len bytes, scanned to close as above) with the value of
 * f (a field of that scan) replaced by text, or the member "key":text
 * added before the final '}' when f was not found; caller frees. The
 * other bytes are kept as they were. */
char *cave_json_splice(const char *line, size_t len, size_t close,
		       const struct cave_json_field *f, const char *text,
		       size_t *out_len);

#endif
