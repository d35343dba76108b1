/* test_ledger.c: the budget ledger's arithmetic (lib/ledger.c) and the
 * worst-case estimator (lib/reserve.c), exactly, then a seeded randomized
 * stress of the wallet tree: children carving wallets and calls in flight
 * at once, the provider reporting random usage up to the reserved worst
 * case, and now and then more.
 * CAVE_STRESS_SEED and CAVE_STRESS_RUNS choose the stress (defaults: a
 * fixed seed, 1000 runs); the same seed prints the same summary line. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "ledger.h"
#include "reserve.h"
#include "tap.h"

#define PICO INT64_C(1000000000000)

static void test_amount_parse(void)
{
	int64_t v = -7;

	ok(cave_amount_parse(CAVE_DENOM_USD, "0.45", &v) == 0 && v == 450000000000,
	   "0.45 USD is 450000000000 pico");
	ok(cave_amount_parse(CAVE_DENOM_USD, "0.000000000001", &v) == 0 && v == 1,
	   "one pico-USD parses");
	ok(cave_amount_parse(CAVE_DENOM_USD, "0.0000000000001", &v) < 0,
	   "finer than a pico-USD is refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, "1e-05", &v) == 0 && v == 10000000,
	   "an exponent as JSON writes it parses exactly");
	ok(cave_amount_parse(CAVE_DENOM_USD, "2.5E+1", &v) == 0 && v == 25 * PICO,
	   "a positive exponent parses");
	ok(cave_amount_parse(CAVE_DENOM_USD, "3", &v) == 0 && v == 3 * PICO,
	   "a whole number of dollars");
	ok(cave_amount_parse(CAVE_DENOM_USD, "0.10000000000000000000000", &v) == 0 &&
	   v == PICO / 10, "trailing zeros past int64 digits stay exact");
	ok(cave_amount_parse(CAVE_DENOM_USD, "9300000", &v) < 0,
	   "past int64 pico-USD is refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, "-1", &v) < 0, "negative refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, "", &v) < 0, "empty refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, ".", &v) < 0, "a lone point refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, "1e", &v) < 0, "bare exponent refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, "0.1x", &v) < 0, "trailing junk refused");
	ok(cave_amount_parse(CAVE_DENOM_USD, "nan", &v) < 0, "nan refused");
	ok(cave_amount_parse(CAVE_DENOM_TOKENS, "1000", &v) == 0 && v == 1000,
	   "tokens parse as integers");
	ok(cave_amount_parse(CAVE_DENOM_TOKENS, "1e3", &v) == 0 && v == 1000,
	   "tokens with an exponent");
	ok(cave_amount_parse(CAVE_DENOM_TOKENS, "1.5", &v) < 0,
	   "half a token is refused");
	ok(cave_amount_parse(CAVE_DENOM_TOKENS, "2.000", &v) == 0 && v == 2,
	   "2.000 tokens is two");
	is_str(cave_denom_name(CAVE_DENOM_USD), "usd", "denomination names");
	is_str(cave_denom_name(CAVE_DENOM_TOKENS), "tokens", "tokens name");
	is_str(cave_denom_name(CAVE_DENOM_NONE), "none", "none name");
}

static void test_hold_settle(void)
{
	struct cave_ledger *l = cave_ledger_new(CAVE_DENOM_USD, "root", 1000, 1000);
	struct cave_wallet *w = cave_ledger_root(l);
	struct cave_wallet_state st;

	is_int(cave_wallet_hold(w, 600), CAVE_ADMIT_OK, "a hold that fits is admitted");
	is_int(cave_wallet_hold(w, 401), CAVE_ADMIT_SHORT, "one unit past the rest is refused");
	is_int(cave_wallet_check(w, 400), CAVE_ADMIT_OK, "exactly the rest fits");
	is_int(cave_wallet_remaining(w), 400, "remaining after a hold");
	is_int(cave_wallet_settle(w, 600, 550), 0, "a settle under its hold is no breach");
	is_int(cave_wallet_remaining(w), 450, "the unused part of the hold returns");
	cave_wallet_state(w, &st);
	is_int(st.spent, 550, "spent is the measured amount");
	is_int(st.reserved, 0, "no hold left");
	ok(!st.cap_breached && st.overspent == 0, "no breach");
	/* a provider reports more than the hold: booked as it was */
	is_int(cave_wallet_hold(w, 400), CAVE_ADMIT_OK, "second hold");
	is_int(cave_wallet_settle(w, 400, 500), 1, "an over-report is reported");
	cave_wallet_state(w, &st);
	is_int(st.spent, 1050, "the real amount is kept, not clamped");
	ok(st.cap_breached, "capBreached set");
	is_int(st.overspent, 50, "overspent is spent - max");
	is_int(cave_wallet_check(w, 0), CAVE_ADMIT_BREACHED, "nothing further is funded");
	cave_ledger_free(l);

	/* an over-report that stays under max still breaks the bound */
	l = cave_ledger_new(CAVE_DENOM_TOKENS, "r", 1000, 1000);
	w = cave_ledger_root(l);
	cave_wallet_hold(w, 100);
	is_int(cave_wallet_settle(w, 100, 101), 1, "over the hold, under max");
	cave_wallet_state(w, &st);
	ok(st.cap_breached && st.overspent == 0, "flag set, overspent 0 under max");
	is_int(cave_wallet_hold(w, 1), CAVE_ADMIT_BREACHED, "and funding stops");
	is_int(cave_wallet_book(w, 5), 1, "unheld spend is an over-report");
	cave_ledger_free(l);
	ok(cave_ledger_new(CAVE_DENOM_USD, "x", -1, 0) == NULL, "negative max refused");
}

static void test_tranches(void)
{
	struct cave_ledger *l = cave_ledger_new(CAVE_DENOM_USD, "root", 1000, 100);
	struct cave_wallet *w = cave_ledger_root(l);
	struct cave_wallet_state st;

	is_int(cave_wallet_hold(w, 150), CAVE_ADMIT_SHORT, "the first tranche bounds holds");
	is_int(cave_wallet_release(w, 901), -1, "a release past max is refused");
	cave_wallet_state(w, &st);
	is_int(st.released, 100, "and changes nothing");
	is_int(cave_wallet_release(w, 0), -1, "a zero release is refused");
	is_int(cave_wallet_release(w, 900), 0, "a release up to max");
	is_int(cave_wallet_hold(w, 150), CAVE_ADMIT_OK, "now it fits");
	is_int(cave_wallet_release(w, 1), -1, "nothing more past max");
	cave_wallet_state(w, &st);
	ok(st.released == 1000 && st.max == 1000, "released reaches max");
	cave_ledger_free(l);
	l = cave_ledger_new(CAVE_DENOM_USD, "root", 10, 50);
	cave_wallet_state(cave_ledger_root(l), &st);
	is_int(st.released, 10, "an initial past max is max");
	cave_ledger_free(l);
}

static void test_wallets(void)
{
	struct cave_ledger *l = cave_ledger_new(CAVE_DENOM_USD, "root", 1000, 1000);
	struct cave_wallet *root = cave_ledger_root(l), *a, *b, *g;
	struct cave_wallet_state st;
	enum cave_admit why;

	a = cave_wallet_carve(root, "aaaa", 300, &why);
	ok(a && why == CAVE_ADMIT_OK, "a carve that fits");
	ok(cave_ledger_find(l, "aaaa") == a && cave_wallet_parent(a) == root,
	   "found by key, under its parent");
	is_int(cave_wallet_remaining(root), 700, "the carve leaves the parent");
	b = cave_wallet_carve(root, "bbbb", 701, &why);
	ok(!b && why == CAVE_ADMIT_SHORT, "a second carve cannot double-spend");
	ok(!cave_wallet_carve(root, "aaaa", 1, &why), "a key is carved once");
	is_int(cave_wallet_hold(a, 300), CAVE_ADMIT_OK, "the child spends its carve");
	is_int(cave_wallet_hold(a, 1), CAVE_ADMIT_SHORT, "and no more");
	is_int(cave_wallet_release(a, 1), -1, "a child has no tranche past its carve");
	cave_wallet_settle(a, 300, 100);
	is_int(cave_wallet_remaining(root), 700, "a live child keeps its carve");
	cave_wallet_state(root, &st);
	is_int(st.spent, 100, "the parent's spent includes the child's");
	is_int(st.reserved, 200, "and the unspent carve is reserved");
	cave_wallet_close(a);
	is_int(cave_wallet_remaining(root), 900, "the remainder returns at the end");
	is_int(cave_wallet_check(a, 0), CAVE_ADMIT_CLOSED, "an ended wallet is not funded");

	/* breach in a child: the flag rolls up, the amount does not */
	b = cave_wallet_carve(root, "bbb2", 100, &why);
	if (!ok(b != NULL, "a carve after a close")) {
		cave_ledger_free(l);
		return;
	}
	cave_wallet_hold(b, 100);
	is_int(cave_wallet_settle(b, 100, 150), 1, "the child over-reports");
	cave_wallet_state(b, &st);
	ok(st.cap_breached && st.overspent == 50, "the child's own overspent");
	cave_wallet_state(root, &st);
	ok(st.cap_breached, "the flag rolls up");
	is_int(st.overspent, 0, "the amount does not");
	is_int(st.spent, 250, "the parent counts the real amount");
	is_int(cave_wallet_remaining(root), 750, "the excess is taken from the parent");
	is_int(cave_wallet_check(b, 0), CAVE_ADMIT_BREACHED, "the breached child gets nothing");
	is_int(cave_wallet_check(root, 10), CAVE_ADMIT_OK, "the parent still funds within max");

	/* revocation covers every wallet below */
	a = cave_wallet_carve(root, "cccc", 200, &why);
	g = a ? cave_wallet_carve(a, "dddd", 50, &why) : NULL;
	if (!ok(g != NULL, "a grandchild carves from its parent")) {
		cave_ledger_free(l);
		return;
	}
	is_int(cave_wallet_remaining(a), 150, "from the child's remainder");
	cave_wallet_revoke(a);
	is_int(cave_wallet_check(g, 1), CAVE_ADMIT_REVOKED, "a revoked parent revokes below");
	is_int(cave_wallet_check(root, 1), CAVE_ADMIT_OK, "but not above");
	ok(!cave_wallet_carve(a, "eeee", 1, &why) && why == CAVE_ADMIT_REVOKED,
	   "a revoked wallet carves nothing");
	cave_ledger_free(l);
}

static void test_tree_over(void)
{
	struct cave_ledger *l = cave_ledger_new(CAVE_DENOM_TOKENS, "root", 100, 100);
	struct cave_wallet *root = cave_ledger_root(l), *a, *b;

	a = cave_wallet_carve(root, "a", 50, NULL);
	b = cave_wallet_carve(root, "b", 50, NULL);
	ok(a && b, "two siblings carve the whole budget");
	if (a && b) {
		cave_wallet_hold(a, 50);
		cave_wallet_settle(a, 50, 80);
		is_int(cave_wallet_remaining(root), -30, "the tree is past max");
		is_int(cave_wallet_check(b, 1), CAVE_ADMIT_BREACHED,
		       "a sibling's carve funds nothing once the tree is over");
	}
	cave_ledger_free(l);
}

static struct cave_model model_sonnet(void)
{
	struct cave_model m;

	memset(&m, 0, sizeof(m));
	m.id = "anthropic/test";
	m.provider = "anthropic";
	m.name = "test";
	m.priced = true;
	m.rates.input = 3000000;        /* $3 per million */
	m.rates.output = 15000000;      /* $15 per million */
	m.rates.cache_read = 300000;
	m.rates.cache_write_5m = 3750000;
	m.rates.cache_write_1h = 6000000;
	m.rates.lc_threshold = 200000;
	m.rates.lc_in_mult_milli = 2000;
	m.rates.lc_out_mult_milli = 1500;
	m.context_window = 1000000;
	m.max_output = 64000;
	return m;
}

static void test_reserve_cost(void)
{
	struct cave_model m = model_sonnet(), odd;
	int64_t c = -1;

	ok(cave_reserve_cost(CAVE_DENOM_USD, &m, 1000, 500, &c) == 0 &&
	   c == 1000 * INT64_C(6000000) + 500 * INT64_C(15000000),
	   "input at the dearest input rate (1h cache write), output at its rate");
	ok(cave_reserve_cost(CAVE_DENOM_USD, &m, 300000, 1000, &c) == 0 &&
	   c == 300000 * INT64_C(12000000) + 1000 * INT64_C(22500000),
	   "long-context multipliers past the threshold");
	ok(cave_reserve_cost(CAVE_DENOM_USD, &m, 200000, 0, &c) == 0 &&
	   c == 200000 * INT64_C(6000000), "at the threshold no multiplier");
	ok(cave_reserve_cost(CAVE_DENOM_TOKENS, NULL, 1000, 500, &c) == 0 && c == 1500,
	   "tokens: input plus output");
	ok(cave_reserve_cost(CAVE_DENOM_USD, NULL, 1, 1, &c) < 0, "no model: no USD bound");
	m.priced = false;
	ok(cave_reserve_cost(CAVE_DENOM_USD, &m, 1, 1, &c) < 0, "unpriced: no USD bound");
	m = model_sonnet();
	ok(cave_reserve_cost(CAVE_DENOM_USD, &m, INT64_MAX / 2, 1, &c) < 0,
	   "past int64 fails closed");

	/* rounding goes up, input and output apart */
	memset(&odd, 0, sizeof(odd));
	odd.priced = true;
	odd.rates.input = 1;
	odd.rates.output = 1;
	odd.rates.cache_read = odd.rates.cache_write_5m = odd.rates.cache_write_1h =
		CAVE_RATE_UNKNOWN;
	odd.rates.lc_threshold = 1;
	odd.rates.lc_in_mult_milli = 1500;
	odd.rates.lc_out_mult_milli = 1500;
	ok(cave_reserve_cost(CAVE_DENOM_USD, &odd, 3, 1, &c) == 0 && c == 5 + 2,
	   "ceil(4.5) + ceil(1.5)");
	is_int(cave_reserve_afford_output(CAVE_DENOM_USD, &odd, 3, 7), 1,
	       "7 affords one output token after 5 of input");
	is_int(cave_reserve_afford_output(CAVE_DENOM_USD, &odd, 3, 8), 2,
	       "8 affords two (ceil(3.0) = 3)");
	is_int(cave_reserve_afford_output(CAVE_DENOM_USD, &odd, 3, 4), -1,
	       "the input alone does not fit");

	ok(cave_reserve_cost(CAVE_DENOM_USD, &m, 1000, 500, &c) == 0, "cost again");
	is_int(cave_reserve_afford_output(CAVE_DENOM_USD, &m, 1000, c), 500,
	       "the exact cost affords the whole allowance");
	is_int(cave_reserve_afford_output(CAVE_DENOM_USD, &m, 1000, c - 1), 499,
	       "one pico less affords one token less");
	is_int(cave_reserve_afford_output(CAVE_DENOM_TOKENS, NULL, 1000, 1300), 300,
	       "tokens afford the rest");
	is_int(cave_reserve_afford_output(CAVE_DENOM_TOKENS, NULL, 1000, 999), -1,
	       "tokens: the input alone does not fit");
}

static void test_input_ceiling(void)
{
	struct cave_model m = model_sonnet();
	jv req = jv_parse("{\"system\":\"h\\u00e9llo\",\"messages\":[{\"role\":\"user\","
			  "\"content\":\"hi\"}],\"max_output_tokens\":500}");
	int64_t msgs = (int64_t)strlen("[{\"role\":\"user\",\"content\":\"hi\"}]");

	is_int(cave_reserve_input_ceiling(req, NULL), 64 + 6 + msgs,
	       "UTF-8 bytes of system and messages plus the frame margin");
	is_int(cave_reserve_output_allowance(req, &m), 500, "the request's allowance");
	jv_free(req);
	req = jv_parse("{\"messages\":[],\"restorable_bytes\":100,"
		       "\"tools\":[{\"name\":\"t\"}]}");
	is_int(cave_reserve_input_ceiling(req, NULL),
	       64 + 2 + 100 + 1024 + (int64_t)strlen("[{\"name\":\"t\"}]"),
	       "restorable bytes and tools with their margin");
	is_int(cave_reserve_output_allowance(req, &m), 64000,
	       "no max_output_tokens: the model's max output");
	is_int(cave_reserve_output_allowance(req, NULL), -1,
	       "neither: the call cannot be bounded");
	m.context_window = 100;
	is_int(cave_reserve_input_ceiling(req, &m), 100, "capped at the context window");
	jv_free(req);
	req = jv_parse("{\"messages\":[],\"max_output_tokens\":1.5}");
	is_int(cave_reserve_output_allowance(req, NULL), -1, "a fractional allowance is refused");
	jv_free(req);
}

/* ---- the stress ---- */

static uint64_t rng_state;

static uint64_t rnd(void) /* splitmix64: the same seed, the same run */
{
	uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static int64_t rnd_upto(int64_t n) /* 0..n */
{
	return n <= 0 ? 0 : (int64_t)(rnd() % ((uint64_t)n + 1));
}

struct flight {
	struct cave_wallet *w;
	int64_t held, in_ceiling, out_allow;
};

struct stress_tally {
	unsigned long admitted, refused, settles, overreports, carves, closes,
		revokes, releases, failures;
	uint64_t checksum;
};

static void mix(struct stress_tally *t, int64_t v)
{
	t->checksum = (t->checksum ^ (uint64_t)v) * UINT64_C(0x100000001b3);
}

static void fail(struct stress_tally *t, unsigned run, const char *what)
{
	if (t->failures++ < 5)
		printf("# run %u: %s\n", run, what);
}

/* Checks every wallet after a step: without an over-report nothing spends
 * or holds past what was released; spent > max never without the flag;
 * the root's spent is every booked amount, nothing lost or clamped. */
static void stress_check(struct cave_ledger *l, struct cave_wallet **ws, size_t nw,
			 int64_t booked, int64_t excess, struct stress_tally *t,
			 unsigned run)
{
	struct cave_wallet_state st;

	for (size_t i = 0; i < nw; i++) {
		cave_wallet_state(ws[i], &st);
		if (st.spent > st.max && !st.cap_breached)
			fail(t, run, "spent past max without capBreached");
		if (!st.cap_breached && st.spent + st.reserved > st.released)
			fail(t, run, "used past released without a breach");
		if (st.released > st.max)
			fail(t, run, "released past max");
	}
	cave_wallet_state(cave_ledger_root(l), &st);
	if (st.spent != booked)
		fail(t, run, "root spent is not the sum of booked amounts");
	if (st.spent > st.max + excess)
		fail(t, run, "the tree spent past max beyond the over-reports");
	if (excess == 0 && st.spent > st.max)
		fail(t, run, "the tree spent past max with no over-report");
}

static void stress_run(unsigned run, struct stress_tally *t)
{
	enum cave_denom d = rnd() % 2 ? CAVE_DENOM_USD : CAVE_DENOM_TOKENS;
	struct cave_model m = model_sonnet();
	int64_t max = d == CAVE_DENOM_USD ? 1 + rnd_upto(PICO / 10) : 1 + rnd_upto(2000000);
	int64_t initial = rnd() % 3 ? max : rnd_upto(max);
	struct cave_ledger *l = cave_ledger_new(d, "root", max, initial);
	struct cave_wallet *ws[64];
	struct flight fl[32];
	size_t nw = 1, nf = 0;
	int64_t booked = 0, excess = 0;
	bool liar = rnd() % 4 == 0; /* this run's provider may over-report */
	int steps = 20 + (int)rnd_upto(200);

	m.context_window = 1 + rnd_upto(400000);
	m.rates.lc_threshold = rnd() % 2 ? 200000 : 0;
	ws[0] = cave_ledger_root(l);
	for (int s = 0; s < steps; s++) {
		unsigned op = (unsigned)(rnd() % 100);
		struct cave_wallet *w = ws[rnd() % nw];

		if (op < 10 && nw < 64) { /* a spawn carves a wallet */
			char key[24];
			int64_t rem = cave_wallet_remaining(w), amt = rnd_upto(rem > 0 ? rem + rem / 4 : 10);
			enum cave_admit why, want = cave_wallet_check(w, amt);
			struct cave_wallet *c;

			snprintf(key, sizeof(key), "w%u.%d", run, s);
			c = cave_wallet_carve(w, key, amt, &why);
			if (why != want || (c != NULL) != (want == CAVE_ADMIT_OK))
				fail(t, run, "carve disagrees with check");
			if (c) {
				ws[nw++] = c;
				t->carves++;
				if (cave_wallet_remaining(w) < 0)
					fail(t, run, "a carve took more than the remainder");
			}
		} else if (op < 55 && nf < 32) { /* a call reserves its worst case */
			int64_t in = 1 + rnd_upto(rnd() % 8 ? 4000 : 300000);
			int64_t out = rnd_upto(rnd() % 8 ? 2000 : 64000), cost;
			int64_t rem = cave_wallet_remaining(w);
			enum cave_admit a;

			if (in > m.context_window)
				in = m.context_window;
			if (cave_reserve_cost(d, &m, in, out, &cost) < 0) {
				fail(t, run, "cost of a bounded call failed");
				continue;
			}
			/* clamp as the filter does, half the time */
			if (rnd() % 2 && cost > rem) {
				int64_t k = cave_reserve_afford_output(d, &m, in, rem);

				if (k >= 0 && k < out) {
					out = k;
					cave_reserve_cost(d, &m, in, out, &cost);
					if (cost > rem)
						fail(t, run, "a clamped call does not fit");
				}
			}
			a = cave_wallet_hold(w, cost);
			mix(t, a);
			if (a == CAVE_ADMIT_OK) {
				t->admitted++;
				for (struct cave_wallet *x = w; x; x = cave_wallet_parent(x))
					if (cave_wallet_remaining(x) < 0)
						fail(t, run, "admitted a call that did not fit");
				if (cost > rem)
					fail(t, run, "admitted past the remainder");
				fl[nf++] = (struct flight){ w, cost, in, out };
			} else {
				t->refused++;
				if (a == CAVE_ADMIT_SHORT && cost <= rem)
					fail(t, run, "refused a call that fit");
			}
		} else if (op < 85 && nf > 0) { /* a response settles one */
			size_t i = rnd() % nf;
			struct flight f = fl[i];
			struct cave_usage u;
			int64_t actual;
			int64_t in = rnd_upto(f.in_ceiling);

			memset(&u, 0, sizeof(u));
			u.available = true;
			u.cache_read = rnd_upto(in);
			u.cache_write = rnd_upto(in - u.cache_read);
			u.cache_write_1h = rnd_upto(u.cache_write);
			u.input = in - u.cache_read - u.cache_write;
			u.output = rnd_upto(f.out_allow);
			if (d == CAVE_DENOM_USD) {
				if (cave_price_usage(&m, &u, &actual) < 0) {
					fail(t, run, "pricing failed");
					actual = f.held;
				}
			} else {
				actual = u.input + u.cache_read + u.cache_write + u.output;
			}
			if (actual > f.held)
				fail(t, run, "honest usage above the worst case");
			if (liar && rnd() % 5 == 0)
				actual = f.held + 1 + rnd_upto(f.held + 1000);
			if (actual > f.held)
				excess += actual - f.held;
			booked += actual;
			mix(t, actual);
			t->settles++;
			t->overreports += (unsigned long)cave_wallet_settle(f.w, f.held, actual);
			fl[i] = fl[--nf];
		} else if (op < 88 && w != ws[0]) { /* a child ends */
			cave_wallet_close(w);
			t->closes++;
		} else if (op < 96) { /* a tranche */
			int64_t amt = 1 + rnd_upto(max / 2);
			struct cave_wallet_state st;
			int r;

			cave_wallet_state(ws[0], &st);
			r = cave_wallet_release(ws[0], amt);
			if ((r == 0) != (st.released + amt <= st.max))
				fail(t, run, "release past max not refused, or a fitting one refused");
			t->releases += r == 0;
		} else if (op < 97 && w != ws[0]) {
			cave_wallet_revoke(w);
			t->revokes++;
		}
		stress_check(l, ws, nw, booked, excess, t, run);
	}
	/* every call in flight finishes and is counted */
	while (nf > 0) {
		nf--;
		booked += fl[nf].held / 2;
		cave_wallet_settle(fl[nf].w, fl[nf].held, fl[nf].held / 2);
	}
	stress_check(l, ws, nw, booked, excess, t, run);
	mix(t, booked);
	cave_ledger_free(l);
}

static void test_stress(void)
{
	const char *s = getenv("CAVE_STRESS_SEED"), *r = getenv("CAVE_STRESS_RUNS");
	unsigned long long seed = 20260801, runs = 1000;
	struct stress_tally t;
	char *end;

	if (s && *s) {
		errno = 0;
		seed = strtoull(s, &end, 10);
		if (errno || *end)
			seed = 20260801;
	}
	if (r && *r) {
		errno = 0;
		runs = strtoull(r, &end, 10);
		if (errno || *end || runs > 1000000)
			runs = 1000;
	}
	memset(&t, 0, sizeof(t));
	rng_state = seed;
	for (unsigned i = 0; i < runs; i++)
		stress_run(i, &t);
	printf("# stress seed %llu runs %llu: admitted %lu refused %lu settles %lu "
	       "overreports %lu carves %lu closes %lu revokes %lu releases %lu "
	       "checksum %016" PRIx64 "\n", seed, runs, t.admitted, t.refused,
	       t.settles, t.overreports, t.carves, t.closes, t.revokes,
	       t.releases, t.checksum);
	is_int(t.failures, 0, "stress: every invariant held in every run");
	ok(t.admitted > 0 && t.refused > 0 && t.overreports > 0 && t.carves > 0,
	   "stress: admissions, refusals, over-reports and carves all happened");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_amount_parse();
	test_hold_settle();
	test_tranches();
	test_wallets();
	test_tree_over();
	test_reserve_cost();
	test_input_ceiling();
	test_stress();
	return tap_done();
}
