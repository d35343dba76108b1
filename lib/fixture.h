/* fixture.h: the offline corpus of recorded exchanges. A fixture model
 * ("fixture/anthropic/claude-haiku-4-5") answers from a file recorded from
 * a provider, replayed through the same protocol parser as a live call.
 * A recorded exchange holds the provider's response bytes and the neutral
 * request that produced them; never a header, so never a credential. */
#ifndef CAVE_FIXTURE_H
#define CAVE_FIXTURE_H

#include <stddef.h>
#include <jv.h>

#include "digest.h"
#include "msg.h"

/* The corpus key of a request (borrowed): sha256 over the canonical JSON of
 * the model it targets ("P/M"), system, messages and tools. Output limits
 * and streaming do not change the key, so a clamped call still matches. */
void cave_fixture_key(jv req, const char *target_model, char out[CAVE_SHA256_HEX]);

/* The corpus directory: dir if given, else $CAVE_FIXTURES, else fixtures/
 * beside the program's bin/, else the installed copy. -1 if none exists. */
int cave_fixture_dir(const char *dir, char *out, size_t n);

/* Loads the exchange for key from dir: {"key","api","model","status",
 * "content_type","body","request"}. jv_invalid with e set (code
 * "fixture_miss") when there is none. */
jv cave_fixture_load(const char *dir, const char *key, cave_err *e);

/* Writes an exchange atomically to dir/<key>.json. -1 with e set. */
int cave_fixture_save(const char *dir, const char *key, jv req /* borrowed */,
		      const char *target_model, const char *api, long status,
		      const char *content_type, const char *body, size_t len,
		      cave_err *e);

#endif
