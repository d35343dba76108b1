/* reserve.c: the worst case of one planned call (see reserve.h for why a
 * byte count bounds tokens). It must never under-reserve: every rounding
 * here goes up, an unknown rate or limit fails closed (-1), and it never
 * prices anything at a rate lower than the one the catalog would bill. */
#include <string.h>

#include "reserve.h"

static int64_t json_bytes(jv v) /* borrows v */
{
	if (!jv_is_valid(v) || jv_get_kind(v) == JV_KIND_NULL)
		return 0;
	if (jv_get_kind(v) == JV_KIND_STRING)
		return jv_string_length_bytes(jv_copy(v));
	return (int64_t)cave_json_dump_len(v); /* jv_dump_string's length */
}

/* json_bytes of a member as a scan measured it */
static int64_t scanned_bytes(const struct cave_json_field *f)
{
	if (!f->found || f->kind == JV_KIND_NULL)
		return 0;
	return (int64_t)(f->kind == JV_KIND_STRING ? f->str_len : f->dump_len);
}

static int64_t field_bytes(jv req, const char *key) /* borrows req */
{
	jv v = jv_object_get(jv_copy(req), jv_string(key));
	int64_t n = json_bytes(v);

	jv_free(v);
	return n;
}

/* The ceiling from n bytes (margins included) and "restorable_bytes" r
 * (borrowed; invalid when absent). */
static int64_t ceiling(int64_t n, jv r, const struct cave_model *m)
{
	int64_t restore = 0;

	if (jv_get_kind(r) == JV_KIND_NUMBER && jv_number_value(r) > 0) {
		double d = jv_number_value(r);

		restore = d >= 9e18 ? INT64_MAX / 2 : (int64_t)d;
		if ((double)restore < d)
			restore++; /* a fraction of a byte still counts */
	}
	if (__builtin_add_overflow(n, restore, &n))
		n = INT64_MAX;
	if (m && m->context_window > 0 && n > m->context_window)
		n = m->context_window;
	return n;
}

int64_t cave_reserve_input_ceiling(jv req, const struct cave_model *m)
{
	int64_t n = CAVE_RESERVE_FRAME_TOKENS;
	jv tools, r;

	if (jv_get_kind(req) != JV_KIND_OBJECT)
		return n;
	n += field_bytes(req, "system");
	n += field_bytes(req, "messages");
	tools = jv_object_get(jv_copy(req), jv_string("tools"));
	if (jv_get_kind(tools) == JV_KIND_ARRAY && jv_array_length(jv_copy(tools)) > 0)
		n += json_bytes(tools) + CAVE_RESERVE_TOOLS_TOKENS;
	jv_free(tools);
	r = jv_object_get(jv_copy(req), jv_string("restorable_bytes"));
	n = ceiling(n, r, m);
	jv_free(r);
	return n;
}

int64_t cave_reserve_input_ceiling_scanned(const struct cave_json_field f[4],
					   const struct cave_model *m)
{
	int64_t n = CAVE_RESERVE_FRAME_TOKENS;
	jv r = jv_invalid();

	n += scanned_bytes(&f[0]);
	n += scanned_bytes(&f[1]);
	if (f[2].found && f[2].kind == JV_KIND_ARRAY && f[2].count > 0)
		n += scanned_bytes(&f[2]) + CAVE_RESERVE_TOOLS_TOKENS;
	if (f[3].found && f[3].kind == JV_KIND_NUMBER)
		r = jv_parse_sized(f[3].raw, (int)f[3].raw_len); /* jq's own value */
	n = ceiling(n, r, m);
	jv_free(r);
	return n;
}

int64_t cave_reserve_output_allowance(jv req, const struct cave_model *m)
{
	jv v = jv_object_get(jv_copy(req), jv_string("max_output_tokens"));
	int64_t n = -1;

	if (jv_get_kind(v) == JV_KIND_NUMBER) {
		double d = jv_number_value(v);

		if (d >= 0 && d < 9e18 && d == (double)(int64_t)d)
			n = (int64_t)d;
	} else if (m && m->max_output > 0) {
		n = m->max_output;
	}
	jv_free(v);
	return n;
}

/* The worst rates in pico-USD per token, times 1000 (the long-context
 * multipliers are thousandths; a multiplier below one is not trusted to
 * apply). -1 when the model is not priced. */
static int worst_rates(const struct cave_model *m, int64_t in_tok,
		       int64_t *in_milli, int64_t *out_milli)
{
	const struct cave_rates *r;
	int64_t in, im = 1000, om = 1000;

	if (!m || !m->priced || m->rates.input < 0 || m->rates.output < 0)
		return -1;
	r = &m->rates;
	in = r->input;
	if (r->cache_read > in)
		in = r->cache_read;
	if (r->cache_write_5m > in)
		in = r->cache_write_5m;
	if (r->cache_write_1h > in)
		in = r->cache_write_1h;
	if (r->lc_threshold > 0 && in_tok > r->lc_threshold) {
		if (r->lc_in_mult_milli > im)
			im = r->lc_in_mult_milli;
		if (r->lc_out_mult_milli > om)
			om = r->lc_out_mult_milli;
	}
	if (__builtin_mul_overflow(in, im, in_milli) ||
	    __builtin_mul_overflow(r->output, om, out_milli))
		return -1;
	return 0;
}

/* ceil(tok * rate_milli / 1000), or -1 past int64. Input and output are
 * rounded up apart, as the catalog prices them. */
static int64_t part(int64_t tok, int64_t rate_milli)
{
	__int128 t = (__int128)tok * rate_milli;
	__int128 c = t / 1000 + (t % 1000 > 0);

	return c > INT64_MAX ? -1 : (int64_t)c;
}

int cave_reserve_cost(enum cave_denom d, const struct cave_model *m,
		      int64_t in_tok, int64_t out_tok, int64_t *out)
{
	int64_t im, om, a, b;

	if (in_tok < 0 || out_tok < 0)
		return -1;
	if (d != CAVE_DENOM_USD) {
		if (__builtin_add_overflow(in_tok, out_tok, out))
			return -1;
		return 0;
	}
	if (worst_rates(m, in_tok, &im, &om) < 0)
		return -1;
	a = part(in_tok, im);
	b = part(out_tok, om);
	if (a < 0 || b < 0 || __builtin_add_overflow(a, b, out))
		return -1;
	return 0;
}

int64_t cave_reserve_afford_output(enum cave_denom d, const struct cave_model *m,
				   int64_t in_tok, int64_t avail)
{
	int64_t im, om, a;
	__int128 room;

	if (in_tok < 0 || avail < 0)
		return -1;
	if (d != CAVE_DENOM_USD)
		return avail >= in_tok ? avail - in_tok : -1;
	if (worst_rates(m, in_tok, &im, &om) < 0)
		return -1;
	a = part(in_tok, im);
	if (a < 0 || a > avail)
		return -1;
	if (om == 0)
		return INT64_MAX;
	/* ceil(k * om / 1000) <= avail - a  <=>  k * om <= 1000 (avail - a) */
	room = (__int128)(avail - a) * 1000 / om;
	return room > INT64_MAX ? INT64_MAX : (int64_t)room;
}
