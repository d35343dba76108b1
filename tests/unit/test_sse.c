/* test_sse.c: the SSE parser against the WHATWG event-stream rules, fed at
 * every chunk boundary and one byte at a time: line endings, comments,
 * multi-line data, fields without a colon, event names, a leading BOM, the
 * size cap, and the recorded provider streams in every line-ending style. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "sse.h"
#include "tap.h"

struct log {
	struct cave_buf b;
	int n;
	int stop_at; /* return -1 on this event (1-based), 0: never */
};

static int on_event(void *ctx, const char *event, const char *data,
		    size_t len, cave_err *e)
{
	struct log *l = ctx;
	l->n++;
	cave_buf_adds(&l->b, "[");
	cave_buf_adds(&l->b, event);
	cave_buf_adds(&l->b, "|");
	cave_buf_add(&l->b, data, len);
	cave_buf_adds(&l->b, "]");
	if (data[len] != '\0')
		cave_buf_adds(&l->b, "<no NUL>");
	if (l->stop_at && l->n == l->stop_at)
		return cave_errf(e, "stop", "stopped");
	return 0;
}

/* Feeds p whole (split 0) or as [0,split) + [split,n), or byte by byte
 * (split == (size_t)-1). The log is "[event|data]..." then "#rc,pending". */
static char *feed(const char *p, size_t n, size_t max, size_t split)
{
	struct cave_sse *s = cave_sse_new(max);
	struct log l = {0};
	cave_err e = {0};
	int rc = 0;
	cave_buf_init(&l.b, (size_t)16 << 20);
	if (split == (size_t)-1) {
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = cave_sse_feed(s, p + i, 1, on_event, &l, &e);
	} else {
		rc = cave_sse_feed(s, p, split, on_event, &l, &e);
		if (rc == 0)
			rc = cave_sse_feed(s, p + split, n - split, on_event, &l, &e);
	}
	cave_buf_addf(&l.b, "#%d,%d", rc, cave_sse_finish(s));
	cave_sse_free(s);
	return cave_buf_take(&l.b, NULL);
}

/* Checks the log of p against want, fed whole, at every split and byte by
 * byte. */
static void check(const char *name, const char *p, size_t n, size_t max,
		  const char *want)
{
	char *got = feed(p, n, max, 0);
	int bad = 0;
	is_str(got, want, name);
	for (size_t k = 0; k <= n; k++) {
		char *g = feed(p, n, max, k);
		if (strcmp(g, got) != 0) {
			if (!bad)
				printf("#   split at %zu: %s\n", k, g);
			bad++;
		}
		free(g);
	}
	{
		char *g = feed(p, n, max, (size_t)-1);
		if (strcmp(g, got) != 0)
			bad++;
		free(g);
	}
	ok(bad == 0, "%s: the same at every split and byte by byte", name);
	free(got);
}

#define CHECK(name, lit, want) check(name, lit, sizeof lit - 1, 1024, want)
#define CHECK_CAP(name, lit, max, want) \
	check(name, lit, sizeof lit - 1, max, want)

static char *fixture(const char *name, size_t *len)
{
	const char *root = getenv("CAVE_ROOT");
	char path[1024];
	struct cave_buf b;
	char chunk[4096];
	size_t n;
	FILE *f;
	snprintf(path, sizeof path, "%s/tests/fixtures/proto/%s",
		 root && *root ? root : ".", name);
	if (!(f = fopen(path, "rb")))
		return NULL;
	cave_buf_init(&b, (size_t)16 << 20);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		cave_buf_add(&b, chunk, n);
	fclose(f);
	return cave_buf_take(&b, len);
}

/* p with every "\r\n" and "\n" replaced by eol. */
static char *reline(const char *p, size_t n, const char *eol, size_t *out)
{
	struct cave_buf b;
	cave_buf_init(&b, (size_t)64 << 20);
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
			continue;
		if (p[i] == '\n')
			cave_buf_adds(&b, eol);
		else
			cave_buf_addc(&b, p[i]);
	}
	return cave_buf_take(&b, out);
}

static const char *const fixtures[] = {
	"anthropic_stream_tool.sse", "anthropic_stream_delta_input.sse",
	"anthropic_stream_error.sse", "anthropic_stream_truncated.sse",
	"anthropic_stream_badjson.sse", "chat_stream_tool.sse",
	"chat_stream_nousage.sse", "chat_stream_truncated.sse",
	"chat_stream_error.sse", "responses_stream_tool.sse",
	"responses_stream_incomplete.sse", "responses_stream_failed.sse",
	"gemini_stream_tool.sse", "gemini_stream_error.sse",
	"gemini_stream_truncated.sse",
};

int main(void)
{
	CHECK("one event", "data: a\n\n", "[|a]#0,0");
	CHECK("event name and multi-line data",
	      "event: x\ndata: 1\ndata: 2\n\n", "[x|1\n2]#0,0");
	CHECK("comments are skipped", ": hello\ndata: a\n: more\n\n",
	      "[|a]#0,0");
	CHECK("field without a colon", "data\n\n", "[|]#0,0");
	CHECK("data without a space", "data:a\n\n", "[|a]#0,0");
	CHECK("only one leading space is dropped", "data:  a \n\n",
	      "[| a ]#0,0");
	CHECK("CR endings", "data: a\r\rdata: b\r\r", "[|a][|b]#0,0");
	CHECK("CRLF endings", "event: e\r\ndata: a\r\n\r\n", "[e|a]#0,0");
	CHECK("mixed endings", "data: a\r\n\ndata: b\n\r\ndata: c\r\r\n",
	      "[|a][|b][|c]#0,0");
	CHECK("BOM at the start is dropped", "\xEF\xBB\xBF" "data: a\n\n",
	      "[|a]#0,0");
	CHECK("a second BOM is part of the field name",
	      "\xEF\xBB\xBF\xEF\xBB\xBF" "data: a\n\n", "#0,0");
	CHECK("a partial BOM is data", "\xEF\xBB" "data: a\n\n", "#0,0");
	CHECK("BOM elsewhere is kept", "data: \xEF\xBB\xBF" "a\n\n",
	      "[|\xEF\xBB\xBF" "a]#0,0");
	CHECK("event without data is not dispatched and its name is reset",
	      "event: x\n\ndata: y\n\n", "[|y]#0,0");
	CHECK("id, retry and unknown fields are ignored",
	      "id: 7\nretry: 100\nfoo: bar\ndata: a\n\n", "[|a]#0,0");
	CHECK("blank lines between events", "\n\ndata: a\n\n\n\ndata: b\n\n",
	      "[|a][|b]#0,0");
	CHECK("empty data line", "data:\n\n", "[|]#0,0");
	CHECK("trailing empty data line keeps its newline", "data: a\ndata:\n\n",
	      "[|a\n]#0,0");
	CHECK("an event never ended is dropped", "data: a\n\ndata: b\n",
	      "[|a]#0,1");
	CHECK("a line never ended is dropped", "data: a\n\ndata: b",
	      "[|a]#0,1");
	CHECK("last event name wins", "event: a\nevent: b\ndata: 1\n\n",
	      "[b|1]#0,0");
	CHECK("NUL bytes pass through", "data: a\0b\n\n", "[|a\0b]#0,0");
	check("NUL in data keeps its length", "data: a\0b\n\n", 12, 1024,
	      "[|a");
	CHECK("empty stream", "", "#0,0");

	/* the cap */
	CHECK_CAP("data at the cap", "data: 0123456789abcdef\n\n", 16,
		  "[|0123456789abcdef]#0,0");
	CHECK_CAP("data over the cap", "data: 0123456789abcdefg\n\n", 16,
		  "#-1,1");
	CHECK_CAP("joined lines over the cap",
		  "data: 01234567\ndata: 89abcdef\n\n", 16, "#-1,1");
	CHECK_CAP("joined lines at the cap",
		  "data: 0123456\ndata: 89abcdef\n\n", 16,
		  "[|0123456\n89abcdef]#0,0");
	CHECK_CAP("the cap holds per event", "data: 0123456789abcdef\n\n"
		  "data: 0123456789abcdef\n\n", 16,
		  "[|0123456789abcdef][|0123456789abcdef]#0,0");
	{
		/* one long line with no data field: the line cap */
		static char big[2000];
		struct cave_sse *s = cave_sse_new(16);
		struct log l = {0};
		cave_err e = {0};
		memset(big, 'x', sizeof big);
		cave_buf_init(&l.b, 4096);
		is_int(cave_sse_feed(s, big, sizeof big, on_event, &l, &e), -1,
		       "a line far over the cap fails");
		is_str(e.code, "malformed_stream", "line over the cap: code");
		is_int(cave_sse_feed(s, "\n\n", 2, on_event, &l, &e), -1,
		       "a failed parser stays failed");
		cave_sse_free(s);
		cave_buf_free(&l.b);
	}
	{
		struct cave_sse *s = cave_sse_new(64);
		struct log l = {0};
		cave_err e = {0};
		const char *p = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
		cave_buf_init(&l.b, 4096);
		l.stop_at = 2;
		is_int(cave_sse_feed(s, p, strlen(p), on_event, &l, &e), -1,
		       "a callback's -1 stops the feed");
		is_int(l.n, 2, "no event after the stop");
		is_str(e.code, "stop", "the callback's error is kept");
		cave_sse_free(s);
		cave_buf_free(&l.b);
	}

	/* the recorded provider streams, in all three line-ending styles */
	for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
		size_t n, nl, ncr, ncrlf;
		char *p = fixture(fixtures[i], &n), *lf, *cr, *crlf, *want;
		char name[160];
		if (!p) {
			ok(0, "%s: fixture readable", fixtures[i]);
			continue;
		}
		lf = reline(p, n, "\n", &nl);
		cr = reline(p, n, "\r", &ncr);
		crlf = reline(p, n, "\r\n", &ncrlf);
		want = feed(lf, nl, (size_t)1 << 20, 0);
		ok(strstr(want, "#0,") != NULL && strchr(want, '['),
		   "%s: parses into events", fixtures[i]);
		snprintf(name, sizeof name, "%s (LF)", fixtures[i]);
		check(name, lf, nl, (size_t)1 << 20, want);
		snprintf(name, sizeof name, "%s (CR)", fixtures[i]);
		check(name, cr, ncr, (size_t)1 << 20, want);
		snprintf(name, sizeof name, "%s (CRLF)", fixtures[i]);
		check(name, crlf, ncrlf, (size_t)1 << 20, want);
		free(want);
		free(lf);
		free(cr);
		free(crlf);
		free(p);
	}
	return tap_done();
}
