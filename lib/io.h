/* io.h: the ring's reader/writer. One poll-based loop per program reads
 * stdin a line at a time and writes stdout through an output queue, so a
 * ring of filters can never deadlock on full pipes: a program never blocks
 * writing while it could read. Every event is flushed as soon as it is
 * queued (as far as the pipe takes it). EPIPE on stdout is a quiet end.
 * Pipes it reads or writes are grown to 256 KiB where the kernel allows,
 * and a long line goes straight to the pipe when nothing waits before it,
 * so that a megabyte event crosses a hop in a few copies. */
#ifndef CAVE_IO_H
#define CAVE_IO_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <jv.h>

#include "buf.h"
#include "msg.h"

struct cave_io {
	int in_fd, out_fd;
	const char *in_name;    /* for messages: "<stdin>" */
	struct cave_buf in;     /* bytes read, not yet a whole line */
	size_t in_scan;         /* where the search for '\n' resumes */
	struct cave_buf out;    /* queued bytes, from out_off on */
	size_t out_off;
	unsigned long lineno;   /* lines delivered so far */
	bool in_eof;
	bool out_closed;        /* the reader went away (EPIPE) */
	bool out_blocking;      /* stdout is not a pipe: plain writes */
	bool paused;            /* the program asked not to read for now */
	bool batching;          /* delivering a batch: flush after it */
	int error;              /* errno of a failed read or write, else 0 */
};

/* Called with each whole line (no '\n'; line[len] is NUL and writable).
 * Return 0 to go on, -1 to stop the loop (the program has said why). */
typedef int (*cave_line_fn)(void *ctx, char *line, size_t len);

void cave_io_init(struct cave_io *io, int in_fd, int out_fd);
void cave_io_free(struct cave_io *io);

/* Fills up to two pollfds (stdin when there is room to read, stdout when
 * the queue is not empty); returns how many. */
int cave_io_pollfds(struct cave_io *io, struct pollfd *p);
/* Acts on what poll said about the fds cave_io_pollfds gave: reads and
 * delivers whole lines, writes queued bytes. -1 when fn stopped, when a
 * line is longer than CAVE_EVENT_MAX (e set) or on a read error. */
int cave_io_service(struct cave_io *io, const struct pollfd *p, int n,
		    cave_line_fn fn, void *ctx, cave_err *e);

/* Queues bytes and writes as much as the pipe takes now. */
void cave_io_write(struct cave_io *io, const char *p, size_t n);
/* Queues a line and its '\n' (pass-through of lines a program does not own). */
void cave_io_pass(struct cave_io *io, const char *line, size_t len);
/* Queues an event (consumed) with cave_event_dump. */
void cave_io_emit(struct cave_io *io, jv ev);

/* True when stdin is at its end and everything queued is written (or the
 * reader went away). */
bool cave_io_done(const struct cave_io *io);
/* Waits until the queue is written or the reader went away. */
int cave_io_drain(struct cave_io *io);

/* The whole loop for programs that wait on nothing but stdin and stdout:
 * runs until stdin ends and the queue is drained. Returns 0, or -1 as
 * cave_io_service does. */
int cave_io_run(struct cave_io *io, cave_line_fn fn, void *ctx, cave_err *e);

#endif
