/* sse.h: an incremental Server-Sent Events parser (the WHATWG event-stream
 * rules): lines end in "\r\n", "\n" or "\r"; "data:" lines join with '\n';
 * a blank line dispatches; ':' lines are comments; a field's single leading
 * space is dropped. Bytes may arrive split anywhere, even inside "\r\n". */
#ifndef CAVE_SSE_H
#define CAVE_SSE_H

#include <stddef.h>

#include "msg.h"

/* One dispatched event. event is "" when the stream named none ("message"
 * by the spec); data is NUL-terminated. Return 0 to go on, -1 to stop (set
 * e). */
typedef int (*cave_sse_fn)(void *ctx, const char *event, const char *data,
			   size_t len, cave_err *e);

struct cave_sse;

/* max caps one event's data; a longer event is an error, never cut. */
struct cave_sse *cave_sse_new(size_t max);
void cave_sse_free(struct cave_sse *s);
/* Feeds bytes; calls fn for each complete event. -1 on error (e set:
 * code "malformed_stream") or when fn stopped. */
int cave_sse_feed(struct cave_sse *s, const char *p, size_t n,
		  cave_sse_fn fn, void *ctx, cave_err *e);
/* At the end of the stream: an event never dispatched (no blank line after
 * it) is dropped, as the spec says; returns 1 when anything was pending (a
 * truncated stream), else 0. */
int cave_sse_finish(struct cave_sse *s);

#endif
