/* reserve.h: the worst case of one planned model call, before it is sent.
 * The input side is one estimator, cave_reserve_input_ceiling, so a tighter
 * one (a real tokenizer) can replace it without touching anything else; the
 * rest is exact integer arithmetic over catalog rates. No I/O here.
 *
 * Why a byte count bounds tokens: the tokenizers of the supported providers
 * (byte-level BPE, and SentencePiece with byte fallback) map UTF-8 text to
 * tokens that each cover at least one byte, so a text of n bytes is at most
 * n tokens. What the provider adds that is not in the request's bytes (role
 * and turn markers, the tool-use preamble) is covered by the fixed margins
 * below; JSON framing bytes, which the provider never bills, more than
 * cover per-message markers. Non-text parts (images, audio) are bounded by
 * their base64 bytes, which exceeds what providers bill for them. */
#ifndef CAVE_RESERVE_H
#define CAVE_RESERVE_H

#include <stdint.h>
#include <jv.h>

#include "catalog.h"
#include "json.h"
#include "ledger.h"

/* Tokens added to every request's ceiling for provider-side framing, and
 * once more when the request declares tools (tool-use system preambles run
 * to a few hundred tokens). */
#define CAVE_RESERVE_FRAME_TOKENS INT64_C(64)
#define CAVE_RESERVE_TOOLS_TOKENS INT64_C(1024)

/* Upper bound of the input tokens req (a call.request, borrowed) can be
 * billed for: the UTF-8 bytes of its system, messages and tools as JSON,
 * plus its "restorable_bytes" (what a restore of compacted content could
 * add back during the call), plus the framing margins, capped at m's
 * context window when m knows it (m may be NULL). Never negative. */
int64_t cave_reserve_input_ceiling(jv req, const struct cave_model *m);

/* The same ceiling from a scan of the request's line that was sure
 * (lib/json.h), without parsing it: f holds the members "system",
 * "messages", "tools" and "restorable_bytes", in that order. */
int64_t cave_reserve_input_ceiling_scanned(const struct cave_json_field f[4],
					   const struct cave_model *m);

/* The output allowance: req's max_output_tokens, else m's max output, else
 * -1 (the call cannot be bounded). */
int64_t cave_reserve_output_allowance(jv req, const struct cave_model *m);

/* Worst-case cost of in_tok input and out_tok output tokens in d's units:
 * tokens, or pico-USD at m's dearest input rate (uncached, cache read or
 * cache write) and its output rate, with the long-context multipliers when
 * in_tok passes the threshold, rounded up. -1 when it cannot be bounded
 * (USD with m NULL or unpriced, or an amount past int64). */
int cave_reserve_cost(enum cave_denom d, const struct cave_model *m,
		      int64_t in_tok, int64_t out_tok, int64_t *out);

/* The most output tokens avail affords after in_tok input at the same
 * worst rates (INT64_MAX when output is free); -1 when even the input does
 * not fit or the cost cannot be bounded. */
int64_t cave_reserve_afford_output(enum cave_denom d, const struct cave_model *m,
				   int64_t in_tok, int64_t avail);

#endif
