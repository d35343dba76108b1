/* catalog.c: the price catalog (catalog/current.yaml): finding it, checking
 * it, looking models up, and pricing usage in exact integer pico-USD.
 * It must never price through floating point, and never turn a price it
 * does not know into 0: unknown is -1 (unpriced) all the way out. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "catalog.h"
#include "yaml.h"

#define CATALOG_SCHEMA "cave.catalog.v1"
/* A catalog larger than this is refused rather than read. */
#define CATALOG_MAX ((size_t)4 << 20)
/* Rates are micro-USD per million tokens; multipliers are thousandths. */
#define RATE_SCALE 6
#define MULT_SCALE 3

struct cave_catalog {
	char *path;
	char digest[CAVE_SHA256_HEX];
	jv doc; /* owned: the parsed document */
	struct cave_model *models;
	size_t n;
};

/* ---- decimals ---- */

int cave_decimal_parse(const char *s, int scale, int64_t *out)
{
	int64_t v = 0;
	int frac = 0;
	bool neg = false, digits = false;

	if (!s || scale < 0 || scale > 18)
		return -1;
	if (*s == '-')
		neg = true, s++;
	for (; *s >= '0' && *s <= '9'; s++) {
		digits = true;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, *s - '0', &v))
			return -1;
	}
	if (!digits)
		return -1;
	if (*s == '.') {
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return -1;
		for (; *s >= '0' && *s <= '9'; s++) {
			if (frac == scale) {
				if (*s != '0')
					return -1; /* more precision than scale */
				continue;
			}
			frac++;
			if (__builtin_mul_overflow(v, 10, &v) ||
			    __builtin_add_overflow(v, *s - '0', &v))
				return -1;
		}
	}
	if (*s)
		return -1;
	for (; frac < scale; frac++)
		if (__builtin_mul_overflow(v, 10, &v))
			return -1;
	*out = neg ? -v : v;
	return 0;
}

char *cave_usd_format(int64_t pico, char out[32])
{
	uint64_t mag = pico < 0 ? (uint64_t)0 - (uint64_t)pico : (uint64_t)pico;
	uint64_t whole = mag / UINT64_C(1000000000000), frac = mag % UINT64_C(1000000000000);
	char f[16];
	int n;

	if (!frac) {
		snprintf(out, 32, "%s%llu", pico < 0 ? "-" : "",
			 (unsigned long long)whole);
		return out;
	}
	snprintf(f, sizeof f, "%012llu", (unsigned long long)frac);
	for (n = 12; n > 0 && f[n - 1] == '0'; n--)
		f[n - 1] = '\0';
	snprintf(out, 32, "%s%llu.%s", pico < 0 ? "-" : "",
		 (unsigned long long)whole, f);
	return out;
}

jv cave_usd_jv(int64_t pico)
{
	char s[32];
	cave_usd_format(pico, s);
	return jv_number(strtod(s, NULL));
}

/* ---- pricing ---- */

/* *acc += n * rate; a rate that is unknown is an error only when n > 0. */
static int add_kind(int64_t *acc, int64_t n, int64_t rate)
{
	int64_t t;
	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	if (rate < 0)
		return -1;
	if (__builtin_mul_overflow(n, rate, &t) || __builtin_add_overflow(*acc, t, acc))
		return -1;
	return 0;
}

/* v * milli / 1000, rounded up. */
static int scale_milli(int64_t *v, int64_t milli)
{
	int64_t t;
	if (__builtin_mul_overflow(*v, milli, &t))
		return -1;
	*v = t / 1000 + (t % 1000 > 0);
	return 0;
}

int cave_price_usage(const struct cave_model *m, const struct cave_usage *u,
		     int64_t *pico_usd)
{
	const struct cave_rates *r;
	int64_t in = 0, out = 0, prompt;

	if (!m || !u || !m->priced || !u->available)
		return -1;
	r = &m->rates;
	if (u->cache_write < 0 || u->cache_write_1h < 0 ||
	    u->cache_write_1h > u->cache_write)
		return -1;
	if (add_kind(&in, u->input, r->input) < 0 ||
	    add_kind(&in, u->cache_read, r->cache_read) < 0 ||
	    add_kind(&in, u->cache_write - u->cache_write_1h, r->cache_write_5m) < 0 ||
	    add_kind(&in, u->cache_write_1h, r->cache_write_1h) < 0 ||
	    add_kind(&out, u->output, r->output) < 0)
		return -1;
	if (__builtin_add_overflow(u->input, u->cache_read, &prompt) ||
	    __builtin_add_overflow(prompt, u->cache_write, &prompt))
		return -1;
	if (r->lc_threshold > 0 && prompt > r->lc_threshold) {
		if (scale_milli(&in, r->lc_in_mult_milli) < 0 ||
		    scale_milli(&out, r->lc_out_mult_milli) < 0)
			return -1;
	}
	if (__builtin_add_overflow(in, out, pico_usd))
		return -1;
	return 0;
}

/* ---- lookup ---- */

const struct cave_model *cave_catalog_find(const struct cave_catalog *c,
					   const char *provider, const char *name)
{
	if (!c || !provider || !name)
		return NULL;
	if (!strcmp(provider, "fixture")) {
		/* a fixture prices as the model it impersonates, never itself */
		if (!strncmp(name, "fixture/", 8))
			return NULL;
		return cave_catalog_find_id(c, name);
	}
	if (!strcmp(provider, "gemini"))
		provider = "google"; /* the API's name for the provider */
	for (size_t i = 0; i < c->n; i++) {
		const struct cave_model *m = &c->models[i];
		if (strcmp(m->provider, provider))
			continue;
		if (!strcmp(m->name, name))
			return m;
		for (size_t k = 0; k < m->n_aliases; k++)
			if (!strcmp(m->aliases[k], name))
				return m;
	}
	return NULL;
}

const struct cave_model *cave_catalog_find_id(const struct cave_catalog *c,
					      const char *id)
{
	const char *slash = id ? strchr(id, '/') : NULL;
	char provider[64];

	if (!c || !slash || slash == id || (size_t)(slash - id) >= sizeof provider)
		return NULL;
	memcpy(provider, id, (size_t)(slash - id));
	provider[slash - id] = '\0';
	return cave_catalog_find(c, provider, slash + 1);
}

const char *cave_catalog_digest(const struct cave_catalog *c)
{
	return c->digest;
}

const char *cave_catalog_path(const struct cave_catalog *c)
{
	return c->path;
}

jv cave_catalog_json(const struct cave_catalog *c)
{
	return jv_copy(c->doc);
}

size_t cave_catalog_count(const struct cave_catalog *c)
{
	return c ? c->n : 0;
}

const struct cave_model *cave_catalog_at(const struct cave_catalog *c, size_t i)
{
	return c && i < c->n ? &c->models[i] : NULL;
}

/* ---- loading and validation ---- */

static void model_free(struct cave_model *m)
{
	free((char *)m->id);
	free((char *)m->provider);
	free((char *)m->name);
	free((char *)m->api);
	for (size_t k = 0; k < m->n_aliases; k++)
		free((char *)m->aliases[k]);
	free((void *)m->aliases);
}

void cave_catalog_free(struct cave_catalog *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		model_free(&c->models[i]);
	free(c->models);
	jv_free(c->doc);
	free(c->path);
	free(c);
}

/* Validation context: file name and the model being read, for messages. */
struct vctx {
	const char *file;
	size_t index;
	const char *id; /* NULL until known */
	cave_err *e;
};

__attribute__((format(printf, 2, 3)))
static int bad(struct vctx *v, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (v->id)
		return cave_errf(v->e, "catalog", "%s: model '%.100s': %s", v->file,
				 v->id, what);
	return cave_errf(v->e, "catalog", "%s: models[%zu]: %s", v->file, v->index,
			 what);
}

static bool is_kind(jv v, jv_kind k)
{
	return jv_get_kind(v) == k;
}

/* Borrows o; the result borrows nothing (a fresh value to free). */
static jv field(jv o, const char *k)
{
	return jv_object_get(jv_copy(o), jv_string(k));
}

/* A required string field, copied; NULL (with e set) when absent. */
static char *str_field(struct vctx *v, jv o, const char *k)
{
	jv s = field(o, k);
	char *r = NULL;
	if (!is_kind(s, JV_KIND_STRING) || !*jv_string_value(s))
		bad(v, "'%s' must be a non-empty string", k);
	else
		r = cave_xstrdup(jv_string_value(s));
	jv_free(s);
	return r;
}

/* A non-negative whole number, or null/absent (0). */
static int count_field(struct vctx *v, jv o, const char *k, int64_t *out)
{
	jv n = field(o, k);
	int ret = -1;
	double d;

	*out = 0;
	if (is_kind(n, JV_KIND_NULL) || is_kind(n, JV_KIND_INVALID)) {
		ret = 0;
		goto out;
	}
	if (!is_kind(n, JV_KIND_NUMBER)) {
		bad(v, "'%s' must be a whole number or null", k);
		goto out;
	}
	d = jv_number_value(n);
	if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) {
		bad(v, "'%s' must be a non-negative whole number", k);
		goto out;
	}
	*out = (int64_t)d;
	ret = 0;
out:
	jv_free(n);
	return ret;
}

/* A quoted non-negative decimal at scale, or null (CAVE_RATE_UNKNOWN).
 * required: the key must be present. */
static int decimal_field(struct vctx *v, jv o, const char *k, int scale,
			 bool nullable, int64_t *out)
{
	jv s = field(o, k);
	int ret = -1;

	*out = CAVE_RATE_UNKNOWN;
	if (is_kind(s, JV_KIND_NULL) && nullable) {
		ret = 0;
		goto out;
	}
	if (!is_kind(s, JV_KIND_STRING) ||
	    cave_decimal_parse(jv_string_value(s), scale, out) < 0 || *out < 0) {
		*out = CAVE_RATE_UNKNOWN;
		bad(v, "'%s' must be a quoted non-negative decimal%s with at most %d decimals",
		    k, nullable ? " or null" : "", scale);
		goto out;
	}
	ret = 0;
out:
	jv_free(s);
	return ret;
}

static int only_keys(struct vctx *v, jv o, const char *what, const char *const *keys)
{
	int ret = 0;
	jv_object_foreach(o, k, val) {
		bool known = false;
		for (size_t i = 0; keys[i]; i++)
			if (!strcmp(keys[i], jv_string_value(k)))
				known = true;
		if (!known && ret == 0)
			ret = bad(v, "unknown key '%.60s' in %s", jv_string_value(k), what);
		jv_free(k);
		jv_free(val);
	}
	return ret;
}

static const char *const model_keys[] = {
	"id", "provider", "name", "api", "aliases", "rates", "long_context",
	"context_window", "max_output", "reasoning", "sources", "verified", "note",
	NULL
};
static const char *const rate_keys[] = {
	"input", "output", "cache_read", "cache_write_5m", "cache_write_1h", NULL
};
static const char *const lc_keys[] = {
	"threshold_tokens", "input_multiplier", "output_multiplier", NULL
};
static const char *const apis[] = {
	"anthropic-messages", "openai-responses", "openai-chat", "gemini",
	"openai-embeddings", NULL
};

static int read_rates(struct vctx *v, jv mo, struct cave_rates *r)
{
	jv rates = field(mo, "rates"), lc = field(mo, "long_context");
	int ret = -1;

	if (!is_kind(rates, JV_KIND_OBJECT)) {
		bad(v, "'rates' must be a mapping");
		goto out;
	}
	if (only_keys(v, rates, "'rates'", rate_keys) < 0)
		goto out;
	for (size_t i = 0; rate_keys[i]; i++) {
		if (!jv_object_has(jv_copy(rates), jv_string(rate_keys[i]))) {
			bad(v, "'rates' lacks '%s' (write null when there is no such price)",
			    rate_keys[i]);
			goto out;
		}
	}
	if (decimal_field(v, rates, "input", RATE_SCALE, true, &r->input) < 0 ||
	    decimal_field(v, rates, "output", RATE_SCALE, true, &r->output) < 0 ||
	    decimal_field(v, rates, "cache_read", RATE_SCALE, true, &r->cache_read) < 0 ||
	    decimal_field(v, rates, "cache_write_5m", RATE_SCALE, true,
			  &r->cache_write_5m) < 0 ||
	    decimal_field(v, rates, "cache_write_1h", RATE_SCALE, true,
			  &r->cache_write_1h) < 0)
		goto out;
	r->lc_threshold = 0;
	r->lc_in_mult_milli = r->lc_out_mult_milli = 1000;
	if (is_kind(lc, JV_KIND_OBJECT)) {
		if (only_keys(v, lc, "'long_context'", lc_keys) < 0 ||
		    count_field(v, lc, "threshold_tokens", &r->lc_threshold) < 0 ||
		    decimal_field(v, lc, "input_multiplier", MULT_SCALE, false,
				  &r->lc_in_mult_milli) < 0 ||
		    decimal_field(v, lc, "output_multiplier", MULT_SCALE, false,
				  &r->lc_out_mult_milli) < 0)
			goto out;
		if (r->lc_threshold <= 0) {
			bad(v, "'long_context.threshold_tokens' must be positive");
			goto out;
		}
	} else if (!is_kind(lc, JV_KIND_NULL) && !is_kind(lc, JV_KIND_INVALID)) {
		bad(v, "'long_context' must be a mapping or null");
		goto out;
	}
	ret = 0;
out:
	jv_free(rates);
	jv_free(lc);
	return ret;
}

/* Reads aliases into m (which owns them from then on). */
static int read_aliases(struct vctx *v, jv mo, struct cave_model *m)
{
	jv a = field(mo, "aliases");
	int ret = -1, n;

	if (is_kind(a, JV_KIND_NULL) || is_kind(a, JV_KIND_INVALID)) {
		ret = 0;
		goto out;
	}
	if (!is_kind(a, JV_KIND_ARRAY)) {
		bad(v, "'aliases' must be a list of strings");
		goto out;
	}
	n = jv_array_length(jv_copy(a));
	m->aliases = cave_xcalloc((size_t)n + 1, sizeof *m->aliases);
	for (int i = 0; i < n; i++) {
		jv s = jv_array_get(jv_copy(a), i);
		if (!is_kind(s, JV_KIND_STRING) || !*jv_string_value(s)) {
			jv_free(s);
			bad(v, "'aliases' must be a list of non-empty strings");
			goto out;
		}
		((const char **)m->aliases)[m->n_aliases++] = cave_xstrdup(jv_string_value(s));
		jv_free(s);
	}
	ret = 0;
out:
	jv_free(a);
	return ret;
}

static int read_model(struct vctx *v, jv mo, struct cave_model *m)
{
	jv x = jv_invalid();
	int ret = -1;
	char want[256];

	if (!is_kind(mo, JV_KIND_OBJECT)) {
		bad(v, "a model must be a mapping");
		goto out;
	}
	if (!(m->id = str_field(v, mo, "id")))
		goto out;
	v->id = m->id;
	if (only_keys(v, mo, "a model", model_keys) < 0 ||
	    !(m->provider = str_field(v, mo, "provider")) ||
	    !(m->name = str_field(v, mo, "name")) ||
	    !(m->api = str_field(v, mo, "api")))
		goto out;
	snprintf(want, sizeof want, "%s/%s", m->provider, m->name);
	if (strcmp(want, m->id)) {
		bad(v, "'id' must be provider/name ('%.200s')", want);
		goto out;
	}
	if (!strcmp(m->provider, "fixture") || strchr(m->provider, '/')) {
		bad(v, "provider '%.60s' is reserved or malformed", m->provider);
		goto out;
	}
	{
		bool known = false;
		for (size_t i = 0; apis[i]; i++)
			known |= !strcmp(apis[i], m->api);
		if (!known) {
			bad(v, "unknown api '%.60s'", m->api);
			goto out;
		}
	}
	if (read_aliases(v, mo, m) < 0 || read_rates(v, mo, &m->rates) < 0 ||
	    count_field(v, mo, "context_window", &m->context_window) < 0 ||
	    count_field(v, mo, "max_output", &m->max_output) < 0)
		goto out;
	x = field(mo, "reasoning");
	if (!is_kind(x, JV_KIND_TRUE) && !is_kind(x, JV_KIND_FALSE)) {
		bad(v, "'reasoning' must be true or false");
		goto out;
	}
	m->reasoning = is_kind(x, JV_KIND_TRUE);
	jv_free(x);
	x = field(mo, "sources");
	if (!is_kind(x, JV_KIND_ARRAY) || jv_array_length(jv_copy(x)) == 0) {
		bad(v, "'sources' must be a non-empty list of URLs");
		goto out;
	}
	jv_array_foreach(x, i, s) {
		bool ok = is_kind(s, JV_KIND_STRING) &&
			  !strncmp(jv_string_value(s), "https://", 8);
		jv_free(s);
		if (!ok) {
			bad(v, "'sources[%d]' must be an https URL", i);
			goto out;
		}
	}
	jv_free(x);
	x = field(mo, "verified");
	if (!is_kind(x, JV_KIND_STRING)) {
		bad(v, "'verified' must be a date string");
		goto out;
	}
	jv_free(x);
	x = field(mo, "note");
	if (!is_kind(x, JV_KIND_INVALID) && !is_kind(x, JV_KIND_NULL) &&
	    !is_kind(x, JV_KIND_STRING)) {
		bad(v, "'note' must be a string");
		goto out;
	}
	m->priced = m->rates.input >= 0 && m->rates.output >= 0;
	ret = 0;
out:
	jv_free(x);
	return ret;
}

/* Every id unique; every name and alias unique within its provider. */
static int check_unique(struct cave_catalog *c, struct vctx *v)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct cave_model *a = &c->models[i];
		for (size_t j = 0; j <= i; j++) {
			const struct cave_model *b = &c->models[j];
			if (strcmp(a->provider, b->provider))
				continue;
			v->id = a->id;
			if (j < i && !strcmp(a->name, b->name))
				return bad(v, "duplicate id");
			for (size_t k = 0; k < a->n_aliases; k++) {
				if (!strcmp(a->aliases[k], b->name))
					return bad(v, "alias '%.100s' is the name of '%.100s'",
						   a->aliases[k], b->id);
				for (size_t l = 0; l < b->n_aliases; l++)
					if ((j < i || l < k) &&
					    !strcmp(a->aliases[k], b->aliases[l]))
						return bad(v, "alias '%.100s' also names '%.100s'",
							   a->aliases[k], b->id);
			}
			for (size_t l = 0; j < i && l < b->n_aliases; l++)
				if (!strcmp(a->name, b->aliases[l]))
					return bad(v, "name is an alias of '%.100s'", b->id);
		}
	}
	return 0;
}

struct cave_catalog *cave_catalog_parse(const char *text, size_t len,
					const char *name, cave_err *e)
{
	struct cave_catalog *c = cave_xcalloc(1, sizeof *c);
	struct vctx v = { .file = name ? name : "<catalog>", .e = e };
	jv models = jv_invalid(), x = jv_invalid();
	int n;

	c->doc = jv_invalid();
	c->path = cave_xstrdup(v.file);
	cave_sha256_hex(text, len, c->digest);
	c->doc = cave_yaml_parse(text, len, v.file, e);
	if (!jv_is_valid(c->doc)) {
		if (e)
			snprintf(e->code, sizeof e->code, "catalog");
		goto fail;
	}
	if (!is_kind(c->doc, JV_KIND_OBJECT)) {
		cave_errf(e, "catalog", "%s: a catalog must be a mapping", v.file);
		goto fail;
	}
	x = field(c->doc, "schema");
	if (!is_kind(x, JV_KIND_STRING) || strcmp(jv_string_value(x), CATALOG_SCHEMA)) {
		cave_errf(e, "catalog", "%s: 'schema' must be '%s'", v.file, CATALOG_SCHEMA);
		goto fail;
	}
	models = field(c->doc, "models");
	if (!is_kind(models, JV_KIND_ARRAY)) {
		cave_errf(e, "catalog", "%s: 'models' must be a list", v.file);
		goto fail;
	}
	n = jv_array_length(jv_copy(models));
	c->models = cave_xcalloc((size_t)n + 1, sizeof *c->models);
	for (int i = 0; i < n; i++) {
		jv mo = jv_array_get(jv_copy(models), i);
		int r;
		v.index = (size_t)i;
		v.id = NULL;
		c->n++; /* counted before reading so a partial model is freed */
		r = read_model(&v, mo, &c->models[i]);
		jv_free(mo);
		if (r < 0)
			goto fail;
	}
	if (check_unique(c, &v) < 0)
		goto fail;
	jv_free(models);
	jv_free(x);
	return c;
fail:
	jv_free(models);
	jv_free(x);
	cave_catalog_free(c);
	return NULL;
}

/* Resolves the default catalog path into out; -1 with e set if none. */
static int default_path(char *out, size_t n, cave_err *e)
{
	static const char *const rel[] = {
		"../catalog/current.yaml", "../share/cave/catalog/current.yaml", NULL
	};
	const char *env = getenv("CAVE_CATALOG");
	char exe[PATH_MAX];
	ssize_t len;
	char *slash;

	if (env && *env) {
		if ((size_t)snprintf(out, n, "%s", env) >= n)
			return cave_errf(e, "catalog", "CAVE_CATALOG is too long");
		return 0;
	}
	len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len < 0)
		return cave_errf(e, "catalog", "cannot find the program's directory: %s",
				 strerror(errno));
	exe[len] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	for (size_t i = 0; rel[i]; i++) {
		if ((size_t)snprintf(out, n, "%s/%s", exe, rel[i]) >= n)
			continue;
		if (access(out, R_OK) == 0)
			return 0;
	}
	return cave_errf(e, "catalog",
			 "no catalog found: set CAVE_CATALOG or install catalog/current.yaml");
}

struct cave_catalog *cave_catalog_load(const char *path, cave_err *e)
{
	char def[PATH_MAX + 64];
	struct cave_buf b;
	struct cave_catalog *c = NULL;
	char chunk[65536];
	size_t got;
	FILE *f = NULL;

	cave_buf_init(&b, CATALOG_MAX);
	if (!path) {
		if (default_path(def, sizeof def, e) < 0)
			goto out;
		path = def;
	}
	f = fopen(path, "rb");
	if (!f) {
		cave_errf(e, "catalog", "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (cave_buf_add(&b, chunk, got) < 0) {
			cave_errf(e, "catalog", "'%s': larger than %zu bytes", path,
				  CATALOG_MAX);
			goto out;
		}
	}
	if (ferror(f)) {
		cave_errf(e, "catalog", "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	c = cave_catalog_parse(b.data ? b.data : "", b.len, path, e);
out:
	if (f)
		fclose(f);
	cave_buf_free(&b);
	return c;
}
