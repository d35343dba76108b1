/* Unit tests of the retry arithmetic: statuses, Retry-After forms, backoff
 * bounds. */
#include "retry.h"
#include "tap.h"

int main(void)
{
	struct cave_retry_policy p = { .max_attempts = 4, .base_ms = 500, .max_ms = 8000 };
	ok(cave_retry_status(429) && cave_retry_status(500) && cave_retry_status(529) &&
	   cave_retry_status(503) && cave_retry_status(408), "429, 408 and 5xx are retryable");
	ok(!cave_retry_status(400) && !cave_retry_status(401) && !cave_retry_status(404) &&
	   !cave_retry_status(200), "other statuses are not");
	is_int(cave_retry_after_ms("2", 0), 2000, "delta seconds");
	is_int(cave_retry_after_ms(" 0.25 ", 0), 250, "fractional seconds");
	is_int(cave_retry_after_ms("soon", 0), -1, "garbage is -1");
	is_int(cave_retry_after_ms("-3", 0), -1, "negative is -1");
	is_int(cave_retry_after_ms("Thu, 01 Jan 1970 00:00:10 GMT", 4), 6000, "HTTP date");
	is_int(cave_retry_after_ms("Thu, 01 Jan 1970 00:00:10 GMT", 20), 0, "past date waits 0");
	is_int(cave_retry_delay_ms(&p, 1, 3000, 0.9), 3000, "retry-after wins");
	is_int(cave_retry_delay_ms(&p, 1, 30000, 0.9), 8000, "retry-after capped");
	is_int(cave_retry_delay_ms(&p, 1, -1, 0.0), 250, "first backoff low end");
	is_int(cave_retry_delay_ms(&p, 1, -1, 0.999999), 499, "first backoff high end");
	is_int(cave_retry_delay_ms(&p, 3, -1, 0.0), 1000, "third doubles twice");
	is_int(cave_retry_delay_ms(&p, 10, -1, 0.0), 4000, "capped at max (half fixed)");
	ok(cave_retry_delay_ms(&p, 10, -1, 0.99) <= 8000, "never past max");
	return tap_done();
}
