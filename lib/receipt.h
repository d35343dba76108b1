/* receipt.h: the receipt fold. Folds a run's events, one at a time, into a
 * caveman.agent.run-receipt.v1 object (schemas/receipt.schema.json). The
 * same fold serves cave-receipt (a stream) and cave run (its journal), so a
 * receipt re-folded from a journal equals the one the run wrote.
 * Content-blind: the fold keeps counts, ids, amounts and names of models and
 * tools, never text, prompts or tool output. */
#ifndef CAVE_RECEIPT_H
#define CAVE_RECEIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jv.h>

#include "catalog.h"
#include "msg.h"

#define CAVE_RECEIPT_SCHEMA "caveman.agent.run-receipt.v1"

struct cave_receipt;

/* A new, empty fold pricing with cat (borrowed: it must outlive the fold).
 * cat may be NULL: then every call with usage is unpriced. */
struct cave_receipt *cave_receipt_new(const struct cave_catalog *cat);
void cave_receipt_free(struct cave_receipt *r);

/* True when the fold reads events of this type (by the envelope prefix,
 * see cave_event_peek): a reader may skip every other line unparsed. */
bool cave_receipt_wants(const char *type, size_t type_len);

/* Folds one event (borrowed). Returns 0, or -1 with e set (code
 * "bad_event") when the event is not what its type promises; whatever
 * could be used of it was folded, so the receipt stays the best account
 * of the rest (a call.response without usage is still a call). */
int cave_receipt_fold(struct cave_receipt *r, jv ev, cave_err *e);

/* The receipt so far, as a new object that validates against the
 * contract. Calls still in flight are not in it (the contract has no
 * field for them): ask cave_receipt_unknown_calls. */
jv cave_receipt_jv(const struct cave_receipt *r);

/* The span the receipt is for: the first run.start's, else the first
 * folded event's; NULL when no event named one. Borrowed from r. */
const char *cave_receipt_span(const struct cave_receipt *r);

/* Model calls requested whose outcome the stream never told (no
 * call.response, no final call.error): they may have been billed. Counts
 * the whole tree, subagents included. */
unsigned long cave_receipt_unknown_calls(const struct cave_receipt *r);

/* A USD amount read back from JSON (a double of a decimal with at most 12
 * places) as pico-USD: the nearest integer is the decimal's own. Values
 * that are not positive give 0. */
int64_t cave_receipt_pico(double usd);

/* Writes receipt (borrowed) to path as one JSON line, atomically: a
 * temporary file in the same directory, fsync'd, then renamed over path.
 * -1 with e set (code "io") when it cannot. */
int cave_receipt_write(const char *path, jv receipt, cave_err *e);

#endif
