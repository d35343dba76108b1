/* tap.h: a tiny TAP producer for the C unit tests. Each check prints
 * "ok N - name" or "not ok N - name"; tap_done() prints the plan and
 * returns the exit code. */
#ifndef CAVE_TAP_H
#define CAVE_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, name) do { long long g_ = (long long)(got), w_ = (long long)(want); \
	if (!ok(g_ == w_, "%s", name)) printf("#   got %lld, want %lld\n", g_, w_); } while (0)
#define is_str(got, want, name) do { const char *g_ = (got), *w_ = (want); \
	int e_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_; \
	if (!ok(e_, "%s", name)) printf("#   got '%s', want '%s'\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); } while (0)

__attribute__((format(printf, 4, 5)))
static int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	printf("%s %d - ", pass ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (!pass) {
		tap_failed++;
		printf("#   at %s:%d\n", file, line);
	}
	return pass;
}

static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
