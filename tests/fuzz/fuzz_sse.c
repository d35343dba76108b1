/* fuzz_sse.c: libFuzzer target for the SSE parser and the protocol
 * accumulators behind it. The first byte picks the protocol and a split
 * point; the stream must give the same events whole and split, and nothing
 * may crash, leak or read out of bounds whatever the bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "proto.h"
#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
	struct cave_buf log;
	struct cave_acc *acc;
};

static void on_delta(void *ctx, const char *text, size_t len)
{
	(void)ctx;
	(void)text;
	(void)len;
}

static int on_event(void *ctx, const char *event, const char *d, size_t len,
		    cave_err *e)
{
	struct sink *s = ctx;
	cave_buf_adds(&s->log, event);
	cave_buf_addc(&s->log, '\x1f');
	cave_buf_add(&s->log, d, len);
	cave_buf_addc(&s->log, '\x1e');
	if (d[len] != '\0')
		abort();
	/* the accumulator's errors do not stop the parser here */
	if (s->acc)
		cave_acc_event(s->acc, event, d, len, on_delta, NULL, e);
	return 0;
}

static char *run(const char *p, size_t n, size_t split, enum cave_api api,
		 int with_acc, size_t *len)
{
	struct cave_sse *sse = cave_sse_new(4096);
	struct sink s;
	cave_err e;
	int rc;
	memset(&s, 0, sizeof s);
	cave_buf_init(&s.log, (size_t)1 << 24);
	s.acc = with_acc ? cave_acc_new(api) : NULL;
	rc = cave_sse_feed(sse, p, split, on_event, &s, &e);
	if (rc == 0)
		rc = cave_sse_feed(sse, p + split, n - split, on_event, &s, &e);
	cave_buf_addf(&s.log, "#%d", rc);
	cave_sse_finish(sse);
	cave_sse_free(sse);
	if (s.acc) {
		jv r = cave_acc_result(s.acc);
		jv_free(r);
		cave_acc_free(s.acc);
	}
	return cave_buf_take(&s.log, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum cave_api api;
	size_t split, la, lb;
	char *a, *b;
	if (size < 1)
		return 0;
	api = (enum cave_api)(data[0] % CAVE_API_COUNT);
	data++;
	size--;
	split = size ? (size_t)data[-1] * 7919u % (size + 1) : 0;
	a = run((const char *)data, size, 0, api, 1, &la);
	b = run((const char *)data, size, split, api, 0, &lb);
	if (la != lb || memcmp(a, b, la) != 0)
		abort(); /* a split changed the events */
	free(a);
	free(b);
	/* the same bytes as a whole body, and as an error body */
	{
		struct cave_acc *acc = cave_acc_new(api);
		cave_err e;
		char msg[128];
		jv r;
		cave_acc_body(acc, (const char *)data, size, &e);
		r = cave_acc_result(acc);
		jv_free(r);
		cave_acc_free(acc);
		cave_proto_error_message(api, (const char *)data, size, msg,
					 sizeof msg);
		if (strlen(msg) >= sizeof msg)
			abort();
	}
	return 0;
}
