/* ledger.c: the budget ledger's arithmetic over a tree of wallets (see
 * ledger.h). Integer amounts only, saturating where an over-report could
 * push a sum past int64. It must never do I/O, read a clock or price
 * anything: callers bring amounts, the ledger only keeps the books. */
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

struct cave_wallet {
	char key[64];
	struct cave_ledger *l;
	struct cave_wallet *parent, *child, *next; /* children, newest first */
	int64_t max, released;
	int64_t own_spent;    /* settled spend of this wallet's own calls */
	int64_t own_reserved; /* holds of this wallet's own calls in flight */
	bool breached;        /* an over-report was booked here */
	bool revoked, closed;
};

struct cave_ledger {
	enum cave_denom d;
	struct cave_wallet **all; /* every wallet, root first; owns them */
	size_t n, cap;
};

const char *cave_denom_name(enum cave_denom d)
{
	switch (d) {
	case CAVE_DENOM_USD: return "usd";
	case CAVE_DENOM_TOKENS: return "tokens";
	case CAVE_DENOM_NONE: break;
	}
	return "none";
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Parses "D[.D][e[+-]N]" into value * 10^scale, exactly. */
static int decimal_scaled(const char *s, int scale, int64_t *out)
{
	const char *p = s;
	int64_t v = 0;
	long exp10 = 0, e = 0;
	int digits = 0, esign = 1;
	bool dot = false;

	if (!s || !*s)
		return -1;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9') {
			digits++;
			if (dot)
				exp10--;
			if (v > (INT64_MAX - 9) / 10) {
				/* past 18 digits only zeros can stay exact:
				 * they move the point instead */
				if (*p != '0')
					return -1;
				exp10++;
				continue;
			}
			v = v * 10 + (*p - '0');
		} else if (*p == '.' && !dot) {
			dot = true;
		} else {
			break;
		}
	}
	if (!digits)
		return -1;
	if (*p == 'e' || *p == 'E') {
		int edigits = 0;

		p++;
		if (*p == '+' || *p == '-')
			esign = *p++ == '-' ? -1 : 1;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (e > 10000)
				return -1;
			e = e * 10 + (*p - '0');
			edigits++;
		}
		if (!edigits)
			return -1;
	}
	if (*p)
		return -1;
	exp10 += esign * e + scale;
	if (v == 0) {
		*out = 0;
		return 0;
	}
	for (; exp10 < 0; exp10++) {
		if (v % 10)
			return -1; /* finer than one unit */
		v /= 10;
	}
	for (; exp10 > 0; exp10--)
		if (__builtin_mul_overflow(v, 10, &v))
			return -1;
	*out = v;
	return 0;
}

int cave_amount_parse(enum cave_denom d, const char *s, int64_t *out)
{
	return decimal_scaled(s, d == CAVE_DENOM_USD ? 12 : 0, out);
}

static struct cave_wallet *wallet_new(struct cave_ledger *l, const char *key,
				      int64_t max)
{
	struct cave_wallet *w;

	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 8;
		struct cave_wallet **na = realloc(l->all, ncap * sizeof(*na));

		if (!na)
			return NULL;
		l->all = na;
		l->cap = ncap;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	if (key) {
		size_t n = strlen(key);

		if (n >= sizeof(w->key))
			n = sizeof(w->key) - 1;
		memcpy(w->key, key, n);
	}
	w->l = l;
	w->max = max;
	w->released = max;
	l->all[l->n++] = w;
	return w;
}

struct cave_ledger *cave_ledger_new(enum cave_denom d, const char *root_key,
				    int64_t max, int64_t initial)
{
	struct cave_ledger *l;
	struct cave_wallet *root;

	if (max < 0 || initial < 0)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->d = d;
	root = wallet_new(l, root_key ? root_key : "", max);
	if (!root) {
		free(l);
		return NULL;
	}
	root->released = initial < max ? initial : max;
	return l;
}

void cave_ledger_free(struct cave_ledger *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->all[i]);
	free(l->all);
	free(l);
}

enum cave_denom cave_ledger_denom(const struct cave_ledger *l)
{
	return l->d;
}

struct cave_wallet *cave_ledger_root(struct cave_ledger *l)
{
	return l->all[0];
}

struct cave_wallet *cave_ledger_find(struct cave_ledger *l, const char *key)
{
	if (!key)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->all[i]->key, key) == 0)
			return l->all[i];
	return NULL;
}

const char *cave_wallet_key(const struct cave_wallet *w)
{
	return w->key;
}

struct cave_wallet *cave_wallet_parent(const struct cave_wallet *w)
{
	return w->parent;
}

/* Everything w has taken from its released amount: its own spend and
 * holds, closed children's use, and for each live child the larger of its
 * carve and its use (an over-reporting child counts in full). */
static int64_t used(const struct cave_wallet *w)
{
	int64_t u = sat_add(w->own_spent, w->own_reserved);

	for (const struct cave_wallet *c = w->child; c; c = c->next) {
		int64_t cu = used(c);

		u = sat_add(u, c->closed ? cu : max64(c->max, cu));
	}
	return u;
}

static int64_t spent(const struct cave_wallet *w)
{
	int64_t s = w->own_spent;

	for (const struct cave_wallet *c = w->child; c; c = c->next)
		s = sat_add(s, spent(c));
	return s;
}

static bool breached_below(const struct cave_wallet *w)
{
	if (w->breached)
		return true;
	for (const struct cave_wallet *c = w->child; c; c = c->next)
		if (breached_below(c))
			return true;
	return false;
}

int64_t cave_wallet_remaining(const struct cave_wallet *w)
{
	return sat_add(w->released, -used(w));
}

enum cave_admit cave_wallet_check(const struct cave_wallet *w, int64_t amount)
{
	const struct cave_wallet *x;

	for (x = w; x; x = x->parent)
		if (x->revoked)
			return CAVE_ADMIT_REVOKED;
	for (x = w; x; x = x->parent)
		if (x->closed)
			return CAVE_ADMIT_CLOSED;
	/* after an over-report anywhere on the way up, the bound failed
	 * there: nothing under it is funded again */
	for (x = w; x; x = x->parent)
		if (x->breached || cave_wallet_remaining(x) < 0)
			return CAVE_ADMIT_BREACHED;
	if (amount < 0 || amount > cave_wallet_remaining(w))
		return CAVE_ADMIT_SHORT;
	return CAVE_ADMIT_OK;
}

enum cave_admit cave_wallet_hold(struct cave_wallet *w, int64_t amount)
{
	enum cave_admit a = cave_wallet_check(w, amount);

	if (a == CAVE_ADMIT_OK)
		w->own_reserved += amount;
	return a;
}

int cave_wallet_settle(struct cave_wallet *w, int64_t held, int64_t actual)
{
	if (held < 0)
		held = 0;
	if (actual < 0)
		actual = 0;
	w->own_reserved = held > w->own_reserved ? 0 : w->own_reserved - held;
	w->own_spent = sat_add(w->own_spent, actual);
	if (actual > held) {
		w->breached = true;
		return 1;
	}
	return 0;
}

int cave_wallet_book(struct cave_wallet *w, int64_t actual)
{
	if (actual <= 0)
		return 0;
	return cave_wallet_settle(w, 0, actual);
}

int cave_wallet_release(struct cave_wallet *w, int64_t amount)
{
	int64_t r;

	if (amount <= 0 || __builtin_add_overflow(w->released, amount, &r) ||
	    r > w->max)
		return -1;
	w->released = r;
	return 0;
}

struct cave_wallet *cave_wallet_carve(struct cave_wallet *w, const char *key,
				      int64_t amount, enum cave_admit *why)
{
	enum cave_admit a = CAVE_ADMIT_SHORT;
	struct cave_wallet *c = NULL;

	if (!key || !*key || strlen(key) >= sizeof(c->key) ||
	    cave_ledger_find(w->l, key) || amount < 0)
		goto out;
	a = cave_wallet_check(w, amount);
	if (a != CAVE_ADMIT_OK)
		goto out;
	c = wallet_new(w->l, key, amount);
	if (!c) {
		a = CAVE_ADMIT_SHORT;
		goto out;
	}
	c->parent = w;
	c->next = w->child;
	w->child = c;
out:
	if (why)
		*why = a;
	return c;
}

void cave_wallet_close(struct cave_wallet *w)
{
	w->closed = true;
}

void cave_wallet_revoke(struct cave_wallet *w)
{
	w->revoked = true;
}

void cave_wallet_state(const struct cave_wallet *w, struct cave_wallet_state *st)
{
	int64_t s = spent(w), u = used(w);

	st->max = w->max;
	st->released = w->released;
	st->spent = s;
	st->reserved = u > s ? u - s : 0;
	st->overspent = s > w->max ? s - w->max : 0;
	st->cap_breached = breached_below(w) || s > w->max;
	st->revoked = w->revoked;
	st->closed = w->closed;
}
