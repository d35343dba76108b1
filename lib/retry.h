/* retry.h: when to try a failed model call again. Bounded attempts, a
 * provider's own retry-after first, else exponential backoff with jitter. */
#ifndef CAVE_RETRY_H
#define CAVE_RETRY_H

#include <stdbool.h>

struct cave_retry_policy {
	int max_attempts;  /* including the first */
	long base_ms;      /* first backoff */
	long max_ms;       /* no wait is longer */
};

/* Whether an HTTP status is worth another attempt (408, 409, 429, 5xx,
 * Anthropic's 529 "overloaded"). */
bool cave_retry_status(long status);

/* Parses a Retry-After value: delta-seconds (fractions allowed) or an
 * HTTP date. Returns milliseconds, or -1 when unparseable. now is the
 * current time in seconds since the epoch. */
long cave_retry_after_ms(const char *value, long now);

/* The wait before attempt number `attempt + 1` (attempt counts from 1):
 * the provider's retry_after_ms when >= 0 (capped at max_ms), else
 * base * 2^(attempt-1), jittered to [half, full], capped. r is a random
 * number in [0, 1). */
long cave_retry_delay_ms(const struct cave_retry_policy *p, int attempt,
			 long retry_after_ms, double r);

#endif
