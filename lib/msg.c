/* msg.c: "prog: message" lines on stderr and the x-allocators. Never
 * prints anything a caller did not ask for, and never a secret: callers
 * pass only what is safe to show. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

const char *cave_prog = "cave";

void cave_set_prog(const char *argv0)
{
	const char *s = argv0 ? strrchr(argv0, '/') : NULL;
	if (argv0)
		cave_prog = s ? s + 1 : argv0;
}

void cave_vwarn(const char *fmt, va_list ap)
{
	int saved = errno;
	size_t n = strlen(fmt);
	fprintf(stderr, "%s: ", cave_prog);
	vfprintf(stderr, fmt, ap);
	if (n && fmt[n - 1] == ':')
		fprintf(stderr, " %s", strerror(saved));
	fputc('\n', stderr);
}

void cave_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cave_vwarn(fmt, ap);
	va_end(ap);
}

void cave_die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cave_vwarn(fmt, ap);
	va_end(ap);
	exit(code);
}

int cave_errf(cave_err *e, const char *code, const char *fmt, ...)
{
	va_list ap;
	if (!e)
		return -1;
	snprintf(e->code, sizeof e->code, "%s", code ? code : "error");
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	/* one line: a message never carries a newline into a log */
	for (char *p = e->msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	e->retryable = 0;
	return -1;
}

int cave_close_stdout(void)
{
	int bad = ferror(stdout), saved = errno;
	if (fclose(stdout) != 0) {
		bad = 1;
		saved = errno;
	}
	if (bad && saved != EPIPE) {
		errno = saved;
		cave_warn("write error on stdout:");
		return CAVE_EX_IO;
	}
	return 0;
}

static _Noreturn void oom(void)
{
	cave_die(CAVE_EX_SOFTWARE, "out of memory");
}

void *cave_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *cave_xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

void *cave_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *cave_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *cave_xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}
