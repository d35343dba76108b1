/* catalog.h: public list prices and model limits from catalog/current.yaml.
 * Money never passes through floating point: rates are integer micro-USD
 * per million tokens, so one token at a rate costs rate pico-USD exactly,
 * and a cost is an int64 count of pico-USD (1e-12 USD; the range is about
 * 9.2 million USD). A model the catalog cannot price is unpriced, never $0. */
#ifndef CAVE_CATALOG_H
#define CAVE_CATALOG_H

#include <stdbool.h>
#include <stdint.h>
#include <jv.h>

#include "digest.h"
#include "msg.h"

#define CAVE_RATE_UNKNOWN INT64_C(-1)

struct cave_rates {
	/* micro-USD per million tokens; CAVE_RATE_UNKNOWN where not listed */
	int64_t input, output, cache_read, cache_write_5m, cache_write_1h;
	/* long context: when the whole prompt (uncached + cache read + cache
	 * write) exceeds threshold tokens, every input rate is multiplied by
	 * in_mult and the output rate by out_mult; multipliers are in
	 * thousandths (2.0 -> 2000); threshold 0 means none */
	int64_t lc_threshold;
	int64_t lc_in_mult_milli, lc_out_mult_milli;
};

struct cave_model {
	const char *id;       /* "anthropic/claude-haiku-4-5" */
	const char *provider; /* "anthropic" */
	const char *name;     /* "claude-haiku-4-5" */
	const char *api;      /* default wire protocol: "anthropic-messages",
	                         "openai-responses", "openai-chat", "gemini",
	                         "openai-embeddings" (priced, not called) */
	struct cave_rates rates;
	bool priced;          /* input and output rates are both known */
	int64_t context_window, max_output; /* 0 when unknown */
	bool reasoning;
	const char *const *aliases; /* other names under the same provider */
	size_t n_aliases;
};

/* Normalised usage of one call (see DESIGN.md section 3). cache_write is
 * the whole cache write, cache_write_1h the part of it kept one hour.
 * output includes reasoning. available is false when the provider did not
 * report usage: then every count is meaningless and nothing is priced. */
struct cave_usage {
	int64_t input, cache_read, cache_write, cache_write_1h, output, reasoning;
	bool reasoning_known;
	bool available;
};

struct cave_catalog;

/* Loads path, or when path is NULL the default: $CAVE_CATALOG, else
 * catalog/current.yaml beside the program's own bin/ directory, else the
 * installed copy. Returns NULL with e set (code "catalog"). */
struct cave_catalog *cave_catalog_load(const char *path, cave_err *e);
void cave_catalog_free(struct cave_catalog *c);
/* sha256 of the catalog file's bytes. */
const char *cave_catalog_digest(const struct cave_catalog *c);
const char *cave_catalog_path(const struct cave_catalog *c);
/* Parses and validates catalog text already in memory; name is used in
 * messages and as the path. Same contract as cave_catalog_load. */
struct cave_catalog *cave_catalog_parse(const char *text, size_t len,
					const char *name, cave_err *e);
/* The catalog document as JSON (a new value the caller frees); models
 * appear in file order, so cave_catalog_at(c, i) is .models[i]. */
jv cave_catalog_json(const struct cave_catalog *c);
size_t cave_catalog_count(const struct cave_catalog *c);
const struct cave_model *cave_catalog_at(const struct cave_catalog *c, size_t i);

/* Finds a model by provider and name or alias. provider "fixture" with a
 * name "P/M" finds P/M (a fixture prices as the model it impersonates);
 * provider "gemini" is read as "google".
 * NULL when the catalog does not know it. */
const struct cave_model *cave_catalog_find(const struct cave_catalog *c,
					   const char *provider, const char *name);
/* Same, from "provider/model". */
const struct cave_model *cave_catalog_find_id(const struct cave_catalog *c,
					      const char *id);

/* Cost of usage at m's rates in pico-USD. Returns 0, or -1 when m is NULL,
 * unpriced, usage unavailable, or a used kind has no known rate; also -1
 * (never a wrapped number) when a count is negative, cache_write_1h exceeds
 * cache_write, or the cost would not fit in int64. With long context the
 * input side and the output side are each rounded up to a whole pico-USD. */
int cave_price_usage(const struct cave_model *m, const struct cave_usage *u,
		     int64_t *pico_usd);

/* Parses a decimal string ("0.075", "3", "1.25e0" is refused) into an
 * integer count of 10^-scale units exactly; -1 when it has more decimals
 * than scale allows or is not a plain decimal. Plain means: an optional
 * '-', digits, optionally '.' and digits ("5." and ".5" are refused);
 * trailing zeros past scale are exact and accepted; scale is 0..18; -1 on
 * int64 overflow. */
int cave_decimal_parse(const char *s, int scale, int64_t *out);
/* Formats pico-USD as a plain decimal with no trailing zeros ("0.0015",
 * "0"); returns out. */
char *cave_usd_format(int64_t pico, char out[32]);
/* The same amount as a JSON number (exactly the decimal above while it has
 * at most 15 significant digits, as every amount under 1000 USD does: jq
 * prints numbers as the shortest decimal that reads back the same). */
jv cave_usd_jv(int64_t pico);

#endif
