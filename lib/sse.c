/* sse.c: the incremental Server-Sent Events parser (WHATWG event-stream
 * rules). It owns line splitting, field parsing and the per-event cap; it
 * never interprets an event's data and never cuts an event short. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "msg.h"
#include "sse.h"

/* Room a line may take beyond the data cap: the field name, ": " and slack. */
#define SSE_LINE_SLACK 256
/* The longest event name kept; longer names are bad input. */
#define SSE_EVENT_MAX 256

struct cave_sse {
	size_t max;
	struct cave_buf line;  /* the current line, without its ending */
	struct cave_buf data;  /* data of the event being built, '\n'-joined */
	char event[SSE_EVENT_MAX + 1];
	bool have_data;        /* at least one data field since the last dispatch */
	bool skip_lf;          /* the last byte was '\r': a '\n' next is its pair */
	bool failed;
	unsigned bom;          /* bytes of a leading BOM matched so far */
	bool started;          /* past the point where a BOM may appear */
	bool pending;          /* anything seen since the last dispatch */
};

static const unsigned char bom_bytes[3] = {0xEF, 0xBB, 0xBF};

struct cave_sse *cave_sse_new(size_t max)
{
	struct cave_sse *s = cave_xcalloc(1, sizeof *s);
	s->max = max;
	cave_buf_init(&s->line, max + SSE_LINE_SLACK);
	cave_buf_init(&s->data, max + 1); /* +1: the '\n' each data line adds */
	return s;
}

void cave_sse_free(struct cave_sse *s)
{
	if (!s)
		return;
	cave_buf_free(&s->line);
	cave_buf_free(&s->data);
	free(s);
}

static int fail(struct cave_sse *s, cave_err *e, const char *what)
{
	s->failed = true;
	return cave_errf(e, "malformed_stream", "event stream: %s", what);
}

static int dispatch(struct cave_sse *s, cave_sse_fn fn, void *ctx,
		    cave_err *e)
{
	int rc = 0;
	s->pending = false;
	if (s->have_data) {
		char *d = s->data.data;
		size_t n = s->data.len;
		/* the buffer ends in the '\n' of the last data line */
		if (n > 0)
			n--;
		if (n > s->max)
			return fail(s, e, "event over the size cap");
		d[n] = '\0';
		rc = fn(ctx, s->event, d, n, e);
		if (rc < 0)
			s->failed = true;
	}
	cave_buf_reset(&s->data);
	s->have_data = false;
	s->event[0] = '\0';
	return rc < 0 ? -1 : 0;
}

/* One whole line (s->line), ending not included. */
static int line(struct cave_sse *s, cave_sse_fn fn, void *ctx, cave_err *e)
{
	const char *l = s->line.data ? s->line.data : "";
	size_t n = s->line.len, flen, vlen;
	const char *colon, *v;
	int rc = 0;

	if (n == 0) {
		rc = dispatch(s, fn, ctx, e);
		goto out;
	}
	s->pending = true;
	if (l[0] == ':')
		goto out; /* a comment */
	colon = memchr(l, ':', n);
	if (colon) {
		flen = (size_t)(colon - l);
		v = colon + 1;
		vlen = n - flen - 1;
		if (vlen > 0 && *v == ' ') {
			v++;
			vlen--;
		}
	} else {
		flen = n;
		v = "";
		vlen = 0;
	}
	if (flen == 4 && memcmp(l, "data", 4) == 0) {
		if (cave_buf_add(&s->data, v, vlen) < 0 ||
		    cave_buf_addc(&s->data, '\n') < 0) {
			rc = fail(s, e, "event over the size cap");
			goto out;
		}
		s->have_data = true;
	} else if (flen == 5 && memcmp(l, "event", 5) == 0) {
		if (vlen > SSE_EVENT_MAX || memchr(v, '\0', vlen)) {
			rc = fail(s, e, "bad event name");
			goto out;
		}
		memcpy(s->event, v, vlen);
		s->event[vlen] = '\0';
	}
	/* "id", "retry" and unknown fields are ignored: nothing here resumes */
out:
	cave_buf_reset(&s->line);
	return rc;
}

/* Bytes after any BOM handling. */
static int feed_body(struct cave_sse *s, const char *p, size_t n,
		     cave_sse_fn fn, void *ctx, cave_err *e)
{
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		if (s->skip_lf) {
			s->skip_lf = false;
			if (p[i] == '\n') {
				i++;
				continue;
			}
		}
		while (j < n && p[j] != '\n' && p[j] != '\r')
			j++;
		if (j > i) {
			s->pending = true;
			if (cave_buf_add(&s->line, p + i, j - i) < 0)
				return fail(s, e, "line over the size cap");
		}
		if (j == n)
			break;
		if (p[j] == '\r')
			s->skip_lf = true;
		if (line(s, fn, ctx, e) < 0)
			return -1;
		i = j + 1;
	}
	return 0;
}

int cave_sse_feed(struct cave_sse *s, const char *p, size_t n,
		  cave_sse_fn fn, void *ctx, cave_err *e)
{
	if (s->failed)
		return cave_errf(e, "malformed_stream",
				 "event stream: parser already failed");
	/* A single U+FEFF at the very start is dropped, even split in pieces. */
	while (!s->started && n > 0) {
		if ((unsigned char)*p == bom_bytes[s->bom]) {
			s->bom++;
			p++;
			n--;
			if (s->bom == 3)
				s->started = true;
			continue;
		}
		s->started = true;
		if (s->bom > 0 &&
		    feed_body(s, (const char *)bom_bytes, s->bom, fn, ctx, e) < 0)
			return -1;
	}
	if (n == 0)
		return 0;
	return feed_body(s, p, n, fn, ctx, e);
}

int cave_sse_finish(struct cave_sse *s)
{
	int pending = s->pending || s->line.len > 0 || s->have_data ||
		      (!s->started && s->bom > 0);
	cave_buf_reset(&s->line);
	cave_buf_reset(&s->data);
	s->have_data = false;
	s->pending = false;
	s->event[0] = '\0';
	return pending ? 1 : 0;
}
