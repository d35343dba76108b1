/* ledger.h: the budget ledger's arithmetic, as a tree of wallets. Pure: no
 * I/O, no clocks, no catalog; the caller says what things cost.
 *
 * Amounts are int64 counts in the ledger's denomination: pico-USD (1e-12
 * USD, as lib/catalog.h prices) under a USD budget, tokens under a token
 * budget. Money never passes through floating point here.
 *
 * A wallet holds a cap (max), the part of it released so far (released, a
 * tranche; released <= max), what its calls spent and what they hold in
 * reservations. A child wallet is carved from its parent's remainder at
 * spawn, synchronously, so parallel spawns cannot both have the same money;
 * while the child lives the parent counts the larger of its carve and what
 * the child has used; when it closes, the parent counts only what the child
 * used and the rest returns.
 *
 * Invariant: without an over-report (a settle larger than its hold), every
 * wallet's used (spent + reserved) stays within released, and so within
 * max. An over-report is booked as it was, never clamped: it sets the
 * wallet's own breach flag, and a wallet whose spent exceeds max always
 * reports cap_breached. The flag rolls up to ancestors; overspent does not
 * (each level's own max(0, spent - max)). */
#ifndef CAVE_LEDGER_H
#define CAVE_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

enum cave_denom {
	CAVE_DENOM_NONE,   /* no budget: ceilings only */
	CAVE_DENOM_USD,    /* pico-USD at public list prices */
	CAVE_DENOM_TOKENS, /* tokens of every kind, summed */
};

/* "none", "usd", "tokens". */
const char *cave_denom_name(enum cave_denom d);

/* Parses a non-negative amount written in the denomination's unit ("0.45"
 * USD, "1000" tokens; an exponent as JSON numbers may carry, "1e-05", is
 * accepted) into its integer count exactly: pico-USD, or tokens. -1 when
 * the text is not a plain non-negative number, has more precision than one
 * pico-USD (or one token), or does not fit in int64. */
int cave_amount_parse(enum cave_denom d, const char *s, int64_t *out);

/* Why a reservation or carve was refused. */
enum cave_admit {
	CAVE_ADMIT_OK,
	CAVE_ADMIT_SHORT,    /* the remainder does not cover it */
	CAVE_ADMIT_BREACHED, /* a breach here or above: fund nothing further */
	CAVE_ADMIT_REVOKED,  /* this wallet or one above it was revoked */
	CAVE_ADMIT_CLOSED,   /* this wallet or one above it has ended */
};

struct cave_ledger;
struct cave_wallet;

/* A ledger whose root wallet (key root_key, copied) has cap max and starts
 * with initial released (initial > max is clamped to max). NULL when max or
 * initial is negative. Free with cave_ledger_free. */
struct cave_ledger *cave_ledger_new(enum cave_denom d, const char *root_key,
				    int64_t max, int64_t initial);
void cave_ledger_free(struct cave_ledger *l);
enum cave_denom cave_ledger_denom(const struct cave_ledger *l);
struct cave_wallet *cave_ledger_root(struct cave_ledger *l);
/* The wallet with this key, or NULL (borrowed; lives as long as l). */
struct cave_wallet *cave_ledger_find(struct cave_ledger *l, const char *key);

const char *cave_wallet_key(const struct cave_wallet *w);
struct cave_wallet *cave_wallet_parent(const struct cave_wallet *w);

/* released - used: what a new reservation may take; negative after an
 * over-report. */
int64_t cave_wallet_remaining(const struct cave_wallet *w);
/* Whether amount could be held in w now (nothing changes). */
enum cave_admit cave_wallet_check(const struct cave_wallet *w, int64_t amount);
/* Holds amount against w when cave_wallet_check allows it; returns what it
 * said. */
enum cave_admit cave_wallet_hold(struct cave_wallet *w, int64_t amount);
/* Ends a hold of held: books actual (the measured spend, kept as it was)
 * and frees the hold. Returns 1 when actual exceeded held (an over-report:
 * the breach flag is set), else 0. actual 0 just releases the hold. */
int cave_wallet_settle(struct cave_wallet *w, int64_t held, int64_t actual);
/* Books spend that had no hold (a failed attempt the provider billed);
 * same return as settle with held 0. */
int cave_wallet_book(struct cave_wallet *w, int64_t actual);

/* Releases a further tranche of amount (> 0). -1, nothing changed, when
 * released + amount would pass max or amount <= 0. */
int cave_wallet_release(struct cave_wallet *w, int64_t amount);

/* Carves a child wallet (key copied, unique in the ledger) of amount from
 * w's remainder; its cap is fully released. Returns the child, or NULL
 * with *why set (CAVE_ADMIT_SHORT also when the key is taken or amount is
 * negative). */
struct cave_wallet *cave_wallet_carve(struct cave_wallet *w, const char *key,
				      int64_t amount, enum cave_admit *why);
/* The child ended: its unspent carve returns to the parent. Idempotent. */
void cave_wallet_close(struct cave_wallet *w);
/* Revokes w and so every wallet under it: nothing further is funded there;
 * holds in flight still settle. */
void cave_wallet_revoke(struct cave_wallet *w);

/* A wallet's figures, as budget.state reports them. spent includes every
 * descendant's spend; reserved is used - spent (own holds and the unspent
 * part of live children's carves); cap_breached is this wallet's own flag
 * or any descendant's, or spent > max; overspent is max(0, spent - max). */
struct cave_wallet_state {
	int64_t max, released, spent, reserved, overspent;
	bool cap_breached, revoked, closed;
};
void cave_wallet_state(const struct cave_wallet *w, struct cave_wallet_state *st);

#endif
