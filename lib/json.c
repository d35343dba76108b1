/* json.c: exact compact JSON output and a measuring scan of one line, for
 * events of megabytes. Both follow jq 1.6 to the byte (jv_print.c's string
 * escapes and number format, jv_parse.c's escapes and strict UTF-8) and
 * never guess: the dump hands anything unusual to jv_dump_string, the
 * scan answers "not sure" and leaves the line to jq. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "msg.h"

#define DEPTH_MAX 200          /* nesting measured (jq 1.6 parses 256) */
#define KEYS_MAX 1024          /* keys of the open objects of one scan */
#define OBJECT_KEYS_MAX 64     /* keys one object may have in a scan */
#define SLOW_NUMBERS_MAX 1000  /* numbers a scan asks jq to measure */
#define NUMBER_MAX 64          /* the longest of those, in bytes */

/* ---- eight bytes at a time ---- */

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

static inline uint64_t load8(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof w);
	return w;
}

/* Nonzero when a byte of w is not plain printable ASCII: '"', '\\', a
 * control character, 0x7f or above. Each test is exact as a whole (a
 * borrow can only spread above a byte that matched). */
static inline uint64_t special(uint64_t w)
{
	uint64_t q = w ^ (ONES * '"'), s = w ^ (ONES * '\\');

	return (((q - ONES) & ~q) | ((s - ONES) & ~s) | ((w - ONES * 0x20) & ~w) |
		w | (w + ONES)) & HIGHS;
}

/* Advances p to the first byte at or after it that special() flags, or
 * to end. On a little-endian machine the lowest flagged bit is that byte
 * exactly (a borrow only spreads upwards). */
static inline const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end)
{
	while (end - p >= 8) {
		uint64_t m = special(load8(p));

		if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return p + (__builtin_ctzll(m) >> 3);
#else
			break;
#endif
		}
		p += 8;
	}
	while (p < end && *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* The length of the UTF-8 sequence at p (lead byte 0x80 or above) when it
 * is one jq accepts (no overlong form, surrogate or code point past
 * U+10FFFF), else 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0];
	size_t n = (size_t)(end - p);

	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;

		return n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;

		return n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 &&
		       (p[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/* ---- the dump ---- */

struct dumper {
	struct cave_buf *b;    /* NULL: count only */
	size_t n;              /* bytes written or counted */
	bool bail;             /* something only jq can say: hand over */
	bool full;             /* b's cap reached */
};

static void put(struct dumper *d, const void *p, size_t n)
{
	if (d->b && !d->full && cave_buf_add(d->b, p, n) < 0)
		d->full = true;
	d->n += n;
}

/* How jq writes the control characters (jvp_dump_string), each padded to
 * eight bytes so that it can be copied whole. */
static const char control_text[32][8] = {
	"\\u0000", "\\u0001", "\\u0002", "\\u0003",
	"\\u0004", "\\u0005", "\\u0006", "\\u0007",
	"\\b", "\\t", "\\n", "\\u000b",
	"\\f", "\\r", "\\u000e", "\\u000f",
	"\\u0010", "\\u0011", "\\u0012", "\\u0013",
	"\\u0014", "\\u0015", "\\u0016", "\\u0017",
	"\\u0018", "\\u0019", "\\u001a", "\\u001b",
	"\\u001c", "\\u001d", "\\u001e", "\\u001f",
};

/* How jq writes a control character or DEL (jvp_dump_string). */
static size_t control_escape(unsigned c, char out[8])
{
	static const char hex[] = "0123456789abcdef";
	char e = c == '\b' ? 'b' : c == '\t' ? 't' : c == '\r' ? 'r' :
		 c == '\n' ? 'n' : c == '\f' ? 'f' : 0;

	out[0] = '\\';
	if (e) {
		out[1] = e;
		return 2;
	}
	out[1] = 'u';
	out[2] = '0';
	out[3] = '0';
	out[4] = hex[(c >> 4) & 15];
	out[5] = hex[c & 15];
	return 6;
}

/* Makes room in d->b for n more bytes and the NUL, within its cap; false
 * (nothing changed) when the cap does not allow n more. */
static bool room(struct dumper *d, size_t n)
{
	struct cave_buf *b = d->b;
	size_t cap;

	if (b->len + n + 1 <= b->cap)
		return true;
	if (n > b->max - b->len)
		return false;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	b->data = cave_xrealloc(b->data, cap);
	b->cap = cap;
	return true;
}

#define DUMP_BLOCK ((size_t)64 << 10)

/* dump_string's fast way into a buffer: blocks of the string, each given
 * room for 6 bytes out for one in (\u00XX), copied eight bytes at a time
 * and cut back to the first that needs a look. Advances *pp as far as it
 * wrote: a block without room under the cap is left to the careful way. */
static void dump_string_fast(struct dumper *d, const unsigned char **pp,
			     const unsigned char *end)
{
	const unsigned char *p = *pp;

	while (p < end) {
		size_t block = (size_t)(end - p) < DUMP_BLOCK ? (size_t)(end - p) : DUMP_BLOCK;
		const unsigned char *stop = p + block;
		char *o, *o0;

		/* 8 bytes of slack for a word copied past a stop, 3 for a UTF-8
		 * sequence across one, 1 for the closing quote */
		if (!room(d, 6 * block + 16))
			break;
		o = o0 = d->b->data + d->b->len;
		while (p < stop) {
			uint64_t m = 0;
			unsigned c;

			while (stop - p >= 8) {
				uint64_t w = load8(p);

				m = special(w);
				memcpy(o, &w, sizeof w);
				if (m)
					break;
				p += 8;
				o += 8;
			}
			if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
				size_t k = (size_t)__builtin_ctzll(m) >> 3;
#else
				size_t k = (size_t)(skip_plain(p, stop) - p);
#endif
				p += k;
				o += k;
			} else {
				while (p < stop && *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
					*o++ = (char)*p++;
				if (p >= stop)
					break;
			}
			c = *p;
			if (c >= 0x80) {
				size_t n;

				if (c >= 0xc2 && c <= 0xdf && end - p >= 2 && (p[1] & 0xc0) == 0x80)
					n = 2;
				else if (!(n = utf8_len(p, end))) {
					d->bail = true; /* jq's own string is not UTF-8 */
					return;
				}
				memcpy(o, p, n);
				o += n;
				p += n;
			} else if (c == '"' || c == '\\') {
				o[0] = '\\';
				o[1] = (char)c;
				o += 2;
				p++;
			} else if (c < 0x20) {
				memcpy(o, control_text[c], 8);
				o += control_text[c][1] == 'u' ? 6 : 2;
				p++;
			} else {
				o += control_escape(c, o); /* DEL */
				p++;
			}
		}
		d->b->len += (size_t)(o - o0);
		d->b->data[d->b->len] = '\0';
		d->n += (size_t)(o - o0);
		*pp = p;
	}
}

static void dump_string(struct dumper *d, jv s) /* borrows s */
{
	const unsigned char *p = (const unsigned char *)jv_string_value(s);
	const unsigned char *end = p + jv_string_length_bytes(jv_copy(s)), *run;
	char esc[8];

	put(d, "\"", 1);
	if (d->b && !d->full) {
		dump_string_fast(d, &p, end);
		if (d->bail)
			return;
	}
	run = p;
	while (p < end) {
		unsigned c;

		p = skip_plain(p, end);
		if (p >= end)
			break;
		c = *p;
		if (c >= 0x80) {
			size_t n = utf8_len(p, end);

			if (!n) {
				d->bail = true; /* jq's own string is not UTF-8 */
				return;
			}
			p += n;
		} else {
			put(d, run, (size_t)(p - run));
			if (c == '"' || c == '\\') {
				esc[0] = '\\';
				esc[1] = (char)c;
				put(d, esc, 2);
			} else {
				put(d, esc, control_escape(c, esc));
			}
			run = ++p;
		}
	}
	put(d, run, (size_t)(p - run));
	put(d, "\"", 1);
}

static void dump_value(struct dumper *d, jv v, int depth) /* borrows v */
{
	if (d->bail || depth > DEPTH_MAX) {
		d->bail = true;
		return;
	}
	switch (jv_get_kind(v)) {
	case JV_KIND_NULL:
		put(d, "null", 4);
		break;
	case JV_KIND_TRUE:
		put(d, "true", 4);
		break;
	case JV_KIND_FALSE:
		put(d, "false", 5);
		break;
	case JV_KIND_NUMBER: {
		double x = jv_number_value(v);
		char num[32];
		int n;

		/* below 1e15 an integer is its digits in jq's format too */
		if (x > -1e15 && x < 1e15 && x == (double)(int64_t)x) {
			n = snprintf(num, sizeof num, "%.0f", x);
			put(d, num, (size_t)n);
		} else {
			jv s = jv_dump_string(jv_copy(v), 0);

			put(d, jv_string_value(s), (size_t)jv_string_length_bytes(jv_copy(s)));
			jv_free(s);
		}
		break;
	}
	case JV_KIND_STRING:
		dump_string(d, v);
		break;
	case JV_KIND_ARRAY: {
		int n = jv_array_length(jv_copy(v));

		put(d, "[", 1);
		for (int i = 0; i < n && !d->bail; i++) {
			jv e = jv_array_get(jv_copy(v), i);

			if (i)
				put(d, ",", 1);
			dump_value(d, e, depth + 1);
			jv_free(e);
		}
		put(d, "]", 1);
		break;
	}
	case JV_KIND_OBJECT: {
		bool first = true;

		put(d, "{", 1);
		for (int i = jv_object_iter(v); jv_object_iter_valid(v, i) && !d->bail;
		     i = jv_object_iter_next(v, i)) {
			jv k = jv_object_iter_key(v, i), e = jv_object_iter_value(v, i);

			if (!first)
				put(d, ",", 1);
			first = false;
			dump_string(d, k);
			put(d, ":", 1);
			dump_value(d, e, depth + 1);
			jv_free(k);
			jv_free(e);
		}
		put(d, "}", 1);
		break;
	}
	default:
		d->bail = true; /* an invalid value: jq decides what it prints */
	}
}

int cave_json_dump(struct cave_buf *b, jv v)
{
	size_t start = b->len;
	struct dumper d = { .b = b };

	dump_value(&d, v, 0);
	if (d.bail && !d.full) {
		jv s = jv_dump_string(jv_copy(v), 0);

		b->len = start;
		if (b->data)
			b->data[start] = '\0';
		if (cave_buf_add(b, jv_string_value(s), (size_t)jv_string_length_bytes(jv_copy(s))) < 0)
			d.full = true;
		jv_free(s);
	}
	if (d.full) {
		b->len = start;
		if (b->data)
			b->data[start] = '\0';
		return -1;
	}
	return 0;
}

size_t cave_json_dump_len(jv v)
{
	struct dumper d = { .b = NULL };
	size_t n;

	dump_value(&d, v, 0);
	if (!d.bail)
		return d.n;
	{
		jv s = jv_dump_string(jv_copy(v), 0);

		n = (size_t)jv_string_length_bytes(jv_copy(s));
		jv_free(s);
	}
	return n;
}

/* ---- the scan ---- */

struct key {
	const unsigned char *p;
	size_t n;
};

struct scan {
	const unsigned char *p, *end;
	struct key keys[KEYS_MAX];
	size_t nkeys;
	unsigned slow_numbers;
};

/* What jq's parse of one value would hold. */
struct meas {
	jv_kind kind;
	size_t dump, str, count;
	bool escaped;          /* strings: the raw text has a backslash */
};

static void ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int hex4(const unsigned char *p)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		unsigned c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (int)(c - 'A' + 10);
		else
			return -1;
	}
	return v;
}

/* The escapes \X jq takes besides \uXXXX. */
static const bool short_escape[256] = {
	['"'] = true, ['\\'] = true, ['/'] = true, ['b'] = true, ['f'] = true,
	['n'] = true, ['r'] = true, ['t'] = true,
};

/* A string from its opening quote: what jq would store (str: UTF-8
 * bytes) and dump (dump: bytes with quotes). Adjustments count against
 * the raw length, since most bytes are copied as they are. */
static int scan_string(struct scan *s, struct meas *m)
{
	const unsigned char *p = s->p + 1, *start = p, *end = s->end;
	int64_t dump_adj = 0, str_adj = 0;
	bool escaped = false;

	for (;;) {
		unsigned c;

		p = skip_plain(p, end);
		if (p >= end)
			return -1;
		c = *p;
		if (c == '"')
			break;
		if (c >= 0x80) {
			size_t n;

			/* two-byte sequences inline: the common case of accents */
			if (c >= 0xc2 && c <= 0xdf && end - p >= 2 && (p[1] & 0xc0) == 0x80)
				n = 2;
			else if (!(n = utf8_len(p, end)))
				return -1; /* jq would replace it: not measured */
			p += n;
		} else if (c == 0x7f) {
			dump_adj += 5; /* jq writes it \u007f */
			p++;
		} else if (c != '\\') {
			return -1; /* a raw control character: not JSON, jq takes it */
		} else {
			int cp, d, u;

			escaped = true;
			if (end - p < 2)
				return -1;
			if (p[1] != 'u') {
				/* two bytes for one, written back as two ('/' as one) */
				if (!short_escape[p[1]])
					return -1;
				str_adj -= 1;
				dump_adj -= p[1] == '/';
				p += 2;
				continue;
			}
			if (end - p < 6 || (cp = hex4(p + 2)) < 0)
				return -1;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return -1; /* a lone low surrogate */
			if (cp >= 0xd800 && cp <= 0xdbff) {
				int lo;

				if (end - p < 12 || p[6] != '\\' || p[7] != 'u' ||
				    (lo = hex4(p + 8)) < 0xdc00 || lo > 0xdfff)
					return -1;
				dump_adj -= 8; /* twelve bytes for four */
				str_adj -= 8;
				p += 12;
				continue;
			}
			if (cp < 0x20 || cp == 0x7f) {
				char esc[8];

				d = (int)control_escape((unsigned)cp, esc);
				u = 1;
			} else if (cp == '"' || cp == '\\') {
				d = 2;
				u = 1;
			} else {
				u = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
				d = u;
			}
			dump_adj += d - 6;
			str_adj += u - 6;
			p += 6;
		}
	}
	m->kind = JV_KIND_STRING;
	m->escaped = escaped;
	m->str = (size_t)((int64_t)(p - start) + str_adj);
	m->dump = (size_t)((int64_t)(p - start) + dump_adj + 2);
	s->p = p + 1;
	return 0;
}

static bool digit(const unsigned char *p, const unsigned char *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

/* A number in RFC 8259's grammar. An integer of up to 15 digits is
 * written back as it was; jq measures any other. */
static int scan_number(struct scan *s, struct meas *m)
{
	const unsigned char *p = s->p, *end = s->end;
	size_t ndigits = 0, len;
	bool plain = true;

	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0') {
		p++;
		ndigits = 1;
	} else if (digit(p, end)) {
		while (digit(p, end)) {
			p++;
			ndigits++;
		}
	} else {
		return -1;
	}
	if (p < end && *p == '.') {
		p++;
		plain = false;
		if (!digit(p, end))
			return -1;
		while (digit(p, end))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		plain = false;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (!digit(p, end))
			return -1;
		while (digit(p, end))
			p++;
	}
	len = (size_t)(p - s->p);
	m->kind = JV_KIND_NUMBER;
	if (plain && ndigits <= 15) {
		m->dump = len;
	} else {
		char text[NUMBER_MAX + 1];
		jv v, d;

		if (len > NUMBER_MAX || ++s->slow_numbers > SLOW_NUMBERS_MAX)
			return -1;
		memcpy(text, s->p, len);
		text[len] = '\0';
		v = jv_parse_sized(text, (int)len);
		if (jv_get_kind(v) != JV_KIND_NUMBER) {
			jv_free(v);
			return -1;
		}
		d = jv_dump_string(v, 0); /* consumes v */
		m->dump = (size_t)jv_string_length_bytes(jv_copy(d));
		jv_free(d);
	}
	s->p = p;
	return 0;
}

static int scan_literal(struct scan *s, struct meas *m, const char *w, jv_kind k)
{
	size_t n = strlen(w);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
		return -1;
	s->p += n;
	m->kind = k;
	m->dump = n;
	return 0;
}

static int scan_value(struct scan *s, struct meas *m, int depth);

/* An object from its '{'; at the top (f not NULL) its members fill f. */
/* After an object member or array element: 1 past the closing bracket,
 * 0 past a comma (counted in *dump), -1 on anything else. */
static int after_item(struct scan *s, char close, size_t *dump)
{
	ws(s);
	if (s->p >= s->end)
		return -1;
	if (*s->p == (unsigned char)close) {
		s->p++;
		return 1;
	}
	if (*s->p != ',')
		return -1;
	s->p++;
	(*dump)++;
	return 0;
}

static int scan_object(struct scan *s, struct meas *m, int depth,
		       struct cave_json_field *f, size_t nf)
{
	size_t frame = s->nkeys, dump = 2, count = 0;
	int r;

	if (depth > DEPTH_MAX)
		return -1;
	s->p++;
	ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		goto done;
	}
	for (;;) {
		const unsigned char *key, *val;
		struct meas km, vm;
		size_t klen;

		ws(s);
		if (s->p >= s->end || *s->p != '"')
			return -1;
		key = s->p + 1;
		if (scan_string(s, &km) < 0 || km.escaped)
			return -1; /* an escaped key could repeat another unseen */
		klen = (size_t)(s->p - 1 - key);
		for (size_t i = frame; i < s->nkeys; i++)
			if (s->keys[i].n == klen && memcmp(s->keys[i].p, key, klen) == 0)
				return -1; /* jq keeps the last: not measured */
		if (s->nkeys - frame >= OBJECT_KEYS_MAX || s->nkeys >= KEYS_MAX)
			return -1;
		s->keys[s->nkeys].p = key;
		s->keys[s->nkeys++].n = klen;
		ws(s);
		if (s->p >= s->end || *s->p != ':')
			return -1;
		s->p++;
		ws(s);
		val = s->p;
		if (scan_value(s, &vm, depth + 1) < 0)
			return -1;
		for (size_t i = 0; f && i < nf; i++) {
			if (strlen(f[i].key) != klen || memcmp(f[i].key, key, klen) != 0)
				continue;
			f[i].found = true;
			f[i].kind = vm.kind;
			f[i].raw = (const char *)val;
			f[i].raw_len = (size_t)(s->p - val);
			f[i].dump_len = vm.dump;
			f[i].str_len = vm.kind == JV_KIND_STRING ? vm.str : 0;
			f[i].count = vm.count;
		}
		dump += km.dump + 1 + vm.dump;
		count++;
		if ((r = after_item(s, '}', &dump)) != 0) {
			if (r < 0)
				return -1;
			break;
		}
	}
done:
	s->nkeys = frame;
	m->kind = JV_KIND_OBJECT;
	m->dump = dump;
	m->count = count;
	return 0;
}

static int scan_array(struct scan *s, struct meas *m, int depth)
{
	size_t dump = 2, count = 0;
	int r;

	if (depth > DEPTH_MAX)
		return -1;
	s->p++;
	ws(s);
	if (s->p < s->end && *s->p == ']') {
		s->p++;
		goto done;
	}
	for (;;) {
		struct meas vm;

		ws(s);
		if (scan_value(s, &vm, depth + 1) < 0)
			return -1;
		dump += vm.dump;
		count++;
		if ((r = after_item(s, ']', &dump)) != 0) {
			if (r < 0)
				return -1;
			break;
		}
	}
done:
	m->kind = JV_KIND_ARRAY;
	m->dump = dump;
	m->count = count;
	return 0;
}

static int scan_value(struct scan *s, struct meas *m, int depth)
{
	memset(m, 0, sizeof *m);
	if (s->p >= s->end)
		return -1;
	switch (*s->p) {
	case '{':
		return scan_object(s, m, depth, NULL, 0);
	case '[':
		return scan_array(s, m, depth);
	case '"':
		return scan_string(s, m);
	case 't':
		return scan_literal(s, m, "true", JV_KIND_TRUE);
	case 'f':
		return scan_literal(s, m, "false", JV_KIND_FALSE);
	case 'n':
		return scan_literal(s, m, "null", JV_KIND_NULL);
	default:
		return scan_number(s, m);
	}
}

int cave_json_scan(const char *line, size_t len, struct cave_json_field *f,
		   size_t n, size_t *close)
{
	struct scan *s = cave_xmalloc(sizeof *s);
	struct meas m;
	size_t at = 0;
	int ret = -1;

	for (size_t i = 0; i < n; i++) {
		f[i].found = false;
		f[i].kind = JV_KIND_INVALID;
		f[i].raw = NULL;
		f[i].raw_len = f[i].dump_len = f[i].str_len = f[i].count = 0;
	}
	s->p = (const unsigned char *)line;
	s->end = s->p + len;
	s->nkeys = 0;
	s->slow_numbers = 0;
	ws(s);
	if (s->p >= s->end || *s->p != '{' || scan_object(s, &m, 1, f, n) < 0)
		goto out;
	at = (size_t)((const char *)s->p - 1 - line);
	ws(s);
	if (s->p != s->end)
		goto out;
	if (close)
		*close = at;
	ret = 0;
out:
	if (ret < 0)
		for (size_t i = 0; i < n; i++)
			f[i].found = false;
	free(s);
	return ret;
}

char *cave_json_splice(const char *line, size_t len, size_t close,
		       const struct cave_json_field *f, const char *text,
		       size_t *out_len)
{
	size_t at = close, cut = 0, klen = 0, tlen = strlen(text), n;
	bool comma = true;
	char *out, *o;

	if (f->found) {
		at = (size_t)(f->raw - line);
		cut = f->raw_len;
	} else {
		/* before the final '}', after a comma unless the object is empty */
		size_t last = close;

		while (last > 0 && (line[last - 1] == ' ' || line[last - 1] == '\t' ||
				    line[last - 1] == '\n' || line[last - 1] == '\r'))
			last--;
		comma = last > 0 && line[last - 1] != '{';
		klen = strlen(f->key) + 3 + comma; /* [,]"key": */
	}
	n = at + klen + tlen + (len - at - cut);
	out = o = cave_xmalloc(n + 1);
	memcpy(o, line, at);
	o += at;
	if (!f->found) {
		if (comma)
			*o++ = ',';
		*o++ = '"';
		memcpy(o, f->key, strlen(f->key));
		o += strlen(f->key);
		*o++ = '"';
		*o++ = ':';
	}
	memcpy(o, text, tlen);
	o += tlen;
	memcpy(o, line + at + cut, len - at - cut);
	out[n] = '\0';
	if (out_len)
		*out_len = n;
	return out;
}
