/* msg.h: the one message module and the project's exit codes.
 * Every line a program prints on stderr goes through here: "prog: message",
 * lower-case, no final full stop. Library code never exits; programs do. */
#ifndef CAVE_MSG_H
#define CAVE_MSG_H

#include <stdarg.h>
#include <stddef.h>

/* Exit codes: pick once, keep them. Documented in README.md. */
enum {
	CAVE_EX_OK = 0,
	CAVE_EX_NO = 1,          /* a definite "no": drift, failed gate */
	CAVE_EX_USAGE = 2,       /* bad command line */
	CAVE_EX_DATA = 65,       /* bad input data: malformed event, response */
	CAVE_EX_UNAVAILABLE = 69,/* provider unavailable after retries */
	CAVE_EX_SOFTWARE = 70,   /* internal error */
	CAVE_EX_IO = 74,         /* I/O error */
	CAVE_EX_POLICY = 77,     /* refused by policy, budget or sandbox */
	CAVE_EX_CONFIG = 78,     /* bad config or catalog */
};

/* An error a library function reports to its caller instead of printing.
 * code is a short machine word ("http_429", "malformed_stream"); msg is the
 * one-line human text; retryable says whether trying again may help. */
typedef struct cave_err {
	char code[40];
	char msg[512];
	int retryable;
} cave_err;

/* Sets e (when not NULL) and returns -1, so "return cave_errf(...)" works. */
int cave_errf(cave_err *e, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

extern const char *cave_prog;
void cave_set_prog(const char *argv0);

/* A format ending in ':' appends ": strerror(errno)". */
void cave_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void cave_die(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void cave_vwarn(const char *fmt, va_list ap);

/* Flushes and closes stdout; returns CAVE_EX_IO on a write error other than
 * EPIPE (a reader that went away is a quiet end), else 0. */
int cave_close_stdout(void);

/* Memory that cannot be had is an internal error: these die with 70. */
void *cave_xmalloc(size_t n);
void *cave_xcalloc(size_t n, size_t m);
void *cave_xrealloc(void *p, size_t n);
char *cave_xstrdup(const char *s);
char *cave_xstrndup(const char *s, size_t n);

#endif
