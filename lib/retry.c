/* retry.c: backoff arithmetic and Retry-After parsing. No clocks read
 * here: callers pass the time and the random number, so tests can. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "retry.h"

bool cave_retry_status(long status)
{
	return status == 408 || status == 409 || status == 429 ||
	       (status >= 500 && status <= 599);
}

long cave_retry_after_ms(const char *value, long now)
{
	char *end;
	double secs;
	struct tm tm;
	if (!value)
		return -1;
	while (isspace((unsigned char)*value))
		value++;
	if (!*value)
		return -1;
	secs = strtod(value, &end);
	if (end != value) {
		while (isspace((unsigned char)*end))
			end++;
		if (*end || secs < 0 || secs > 86400.0)
			return -1;
		return (long)(secs * 1000.0 + 0.5);
	}
	memset(&tm, 0, sizeof tm);
	end = strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end || *end)
		return -1;
	{
		long when = (long)timegm(&tm);
		return when <= now ? 0 : (when - now) * 1000L;
	}
}

long cave_retry_delay_ms(const struct cave_retry_policy *p, int attempt,
			 long retry_after_ms, double r)
{
	long d;
	if (retry_after_ms >= 0)
		return retry_after_ms < p->max_ms ? retry_after_ms : p->max_ms;
	d = p->base_ms;
	for (int i = 1; i < attempt && d < p->max_ms; i++)
		d *= 2;
	if (d > p->max_ms)
		d = p->max_ms;
	/* equal jitter: half fixed, half random, so waits spread but never
	 * collapse to zero */
	return d / 2 + (long)((double)(d - d / 2) * r);
}
