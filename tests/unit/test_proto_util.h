/* test_proto_util.h: what the protocol tests share: reading recorded
 * fixtures from tests/fixtures/proto/ and running a recorded stream through
 * the SSE parser and an accumulator, whole, split at every byte and one byte
 * at a time, asserting the result and the deltas exactly. */
#ifndef CAVE_TEST_PROTO_UTIL_H
#define CAVE_TEST_PROTO_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jv.h>

#include "buf.h"
#include "proto.h"
#include "sse.h"
#include "tap.h"

#define TP_UNUSED __attribute__((unused))
#define TP_SSE_MAX ((size_t)1 << 20)

/* The fixture's bytes (caller frees) or NULL. */
TP_UNUSED static char *tp_fixture(const char *name, size_t *len)
{
	const char *root = getenv("CAVE_ROOT");
	char path[1024];
	struct cave_buf b;
	char chunk[4096];
	size_t n;
	FILE *f;
	snprintf(path, sizeof path, "%s/tests/fixtures/proto/%s",
		 root && *root ? root : ".", name);
	f = fopen(path, "rb");
	if (!f) {
		printf("# cannot open %s\n", path);
		return NULL;
	}
	cave_buf_init(&b, (size_t)64 << 20);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		cave_buf_add(&b, chunk, n);
	fclose(f);
	return cave_buf_take(&b, len);
}

TP_UNUSED static jv tp_fixture_json(const char *name)
{
	size_t len;
	char *p = tp_fixture(name, &len);
	jv v = p ? jv_parse_sized(p, (int)len) : jv_invalid();
	free(p);
	return v;
}

struct tp_run {
	struct cave_acc *acc;
	struct cave_buf deltas;
	cave_err err;
	int rc;           /* 0, or -1 on the first error */
	int ndeltas;
	int pending;      /* cave_sse_finish */
};

static void tp_delta(void *ctx, const char *text, size_t len)
{
	struct tp_run *r = ctx;
	cave_buf_add(&r->deltas, text, len);
	r->ndeltas++;
}

static int tp_event(void *ctx, const char *event, const char *data,
		    size_t len, cave_err *e)
{
	struct tp_run *r = ctx;
	return cave_acc_event(r->acc, event, data, len, tp_delta, r, e);
}

/* Runs bytes through a fresh parser and accumulator in pieces of step bytes
 * after a first piece of split bytes (split 0: none; step 0: the rest in one
 * piece). */
TP_UNUSED static void tp_run(struct tp_run *r, enum cave_api api,
			     const char *p, size_t n, size_t split, size_t step)
{
	struct cave_sse *s = cave_sse_new(TP_SSE_MAX);
	size_t off = 0;
	memset(r, 0, sizeof *r);
	r->acc = cave_acc_new(api);
	cave_buf_init(&r->deltas, (size_t)16 << 20);
	if (split > 0) {
		r->rc = cave_sse_feed(s, p, split, tp_event, r, &r->err);
		off = split;
	}
	while (r->rc == 0 && off < n) {
		size_t k = step && step < n - off ? step : n - off;
		r->rc = cave_sse_feed(s, p + off, k, tp_event, r, &r->err);
		off += k;
	}
	r->pending = cave_sse_finish(s);
	cave_sse_free(s);
}

TP_UNUSED static void tp_done(struct tp_run *r)
{
	cave_acc_free(r->acc);
	cave_buf_free(&r->deltas);
}

/* Asserts the stream in fixture `name` gives the result in `result_name`
 * (NULL: skip that check) and the deltas `deltas` (joined), complete as
 * said, at every chunk boundary and one byte at a time. */
TP_UNUSED static void tp_check_stream(enum cave_api api, const char *name,
				      const char *result_name,
				      const char *deltas, bool complete)
{
	size_t n;
	char *p = tp_fixture(name, &n);
	jv want = result_name ? tp_fixture_json(result_name) : jv_null();
	struct tp_run r;
	int bad_splits = 0;
	char *got_s;
	if (!p || (result_name && !jv_is_valid(want))) {
		ok(0, "%s: fixture readable", name);
		free(p);
		jv_free(want);
		return;
	}
	tp_run(&r, api, p, n, 0, 0);
	is_int(r.rc, 0, "stream parses without error");
	if (r.rc)
		printf("#   %s: %s\n", r.err.code, r.err.msg);
	ok(cave_acc_complete(r.acc) == complete, "%s: complete is %d", name,
	   complete);
	is_str(r.deltas.data ? r.deltas.data : "", deltas, "deltas joined");
	{
		jv got = cave_acc_result(r.acc);
		jv gs = jv_dump_string(jv_copy(got), JV_PRINT_SORTED);
		got_s = strdup(jv_string_value(gs));
		jv_free(gs);
		if (result_name) {
			int eq = jv_equal(got, jv_copy(want));
			ok(eq, "%s: result as recorded", name);
			if (!eq)
				printf("#   got %s\n", got_s);
		} else {
			jv_free(got);
		}
	}
	tp_done(&r);

	for (size_t k = 1; k <= n; k++) {
		jv g, gs;
		tp_run(&r, api, p, n, k, 0);
		g = cave_acc_result(r.acc);
		gs = jv_dump_string(g, JV_PRINT_SORTED);
		if (r.rc != 0 || strcmp(jv_string_value(gs), got_s) != 0 ||
		    strcmp(r.deltas.data ? r.deltas.data : "", deltas) != 0 ||
		    cave_acc_complete(r.acc) != complete)
			bad_splits++;
		jv_free(gs);
		tp_done(&r);
	}
	is_int(bad_splits, 0, "same result split at every byte");
	{
		jv g, gs;
		tp_run(&r, api, p, n, 0, 1);
		g = cave_acc_result(r.acc);
		gs = jv_dump_string(g, JV_PRINT_SORTED);
		ok(r.rc == 0 && strcmp(jv_string_value(gs), got_s) == 0 &&
		   strcmp(r.deltas.data ? r.deltas.data : "", deltas) == 0,
		   "%s: same result one byte at a time", name);
		jv_free(gs);
		tp_done(&r);
	}
	free(got_s);
	free(p);
	jv_free(want);
}

/* Asserts the stream fails with code (and retryable), after deltas. */
TP_UNUSED static void tp_check_stream_error(enum cave_api api,
					    const char *name,
					    const char *code, int retryable,
					    const char *deltas)
{
	size_t n;
	char *p = tp_fixture(name, &n);
	struct tp_run r;
	if (!p) {
		ok(0, "%s: fixture readable", name);
		return;
	}
	tp_run(&r, api, p, n, 0, 0);
	is_int(r.rc, -1, "stream fails");
	is_str(r.err.code, code, "error code");
	is_int(r.err.retryable, retryable, "retryable");
	ok(strchr(r.err.msg, '\n') == NULL && r.err.msg[0],
	   "message is one line: %s", r.err.msg);
	is_str(r.deltas.data ? r.deltas.data : "", deltas,
	       "deltas before the error");
	ok(!cave_acc_complete(r.acc), "%s: not complete", name);
	tp_done(&r);
	free(p);
}

/* Asserts a whole body gives the recorded result. */
TP_UNUSED static void tp_check_body(enum cave_api api, const char *name,
				    const char *result_name)
{
	size_t n;
	char *p = tp_fixture(name, &n);
	jv want = tp_fixture_json(result_name), got;
	struct cave_acc *acc = cave_acc_new(api);
	cave_err e = {0};
	int rc, eq;
	if (!p || !jv_is_valid(want)) {
		ok(0, "%s: fixture readable", name);
		free(p);
		jv_free(want);
		cave_acc_free(acc);
		return;
	}
	rc = cave_acc_body(acc, p, n, &e);
	is_int(rc, 0, "body parses");
	if (rc)
		printf("#   %s: %s\n", e.code, e.msg);
	ok(cave_acc_complete(acc), "%s: complete", name);
	got = cave_acc_result(acc);
	{
		jv gs = jv_dump_string(jv_copy(got), JV_PRINT_SORTED);
		eq = jv_equal(got, want);
		ok(eq, "%s: result as recorded", name);
		if (!eq)
			printf("#   got %s\n", jv_string_value(gs));
		jv_free(gs);
	}
	cave_acc_free(acc);
	free(p);
}

/* Asserts the error body's one-line message. */
TP_UNUSED static void tp_check_error_body(enum cave_api api, const char *name,
					  const char *want)
{
	size_t n;
	char *p = tp_fixture(name, &n);
	char out[512];
	if (!p) {
		ok(0, "%s: fixture readable", name);
		return;
	}
	cave_proto_error_message(api, p, n, out, sizeof out);
	is_str(out, want, "provider error message");
	free(p);
}

#endif
