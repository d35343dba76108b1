/* io.c: the poll-based reader/writer every filter's loop stands on. Reads
 * stdin in large chunks and hands over whole lines; writes stdout through
 * a queue that is flushed as far as the pipe takes it after each event (or
 * each batch of lines read at once), so a program never blocks writing
 * while it could read. Stops reading only while more than
 * CAVE_IO_HIGH_WATER bytes wait to be written. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event.h"
#include "io.h"

#define CAVE_IO_CHUNK ((size_t)256 << 10)
#define CAVE_IO_HIGH_WATER ((size_t)256 << 20)
/* The pipes a program reads and writes are grown to this from the
 * kernel's 64 KiB, so that a megabyte event crosses a hop of the ring in
 * four reads and writes rather than sixteen of each with a wake-up between
 * them (a 1 MiB pipe measured no faster). Best effort: past the user's
 * share of pipe memory (/proc/sys/fs/pipe-user-pages-soft, 64 MiB by
 * default; a ring of five pipes takes 1.25 MiB) the kernel refuses and
 * the pipe stays as it was. */
#define CAVE_IO_PIPE_SIZE ((size_t)256 << 10)
/* A line at least this long goes straight to the pipe when nothing is
 * queued before it, instead of being copied into the queue first. */
#define CAVE_IO_DIRECT ((size_t)64 << 10)

static void grow_pipe(int fd)
{
	int cur = fcntl(fd, F_GETPIPE_SZ);

	if (cur >= 0 && (size_t)cur < CAVE_IO_PIPE_SIZE)
		(void)fcntl(fd, F_SETPIPE_SZ, (int)CAVE_IO_PIPE_SIZE);
}

void cave_io_init(struct cave_io *io, int in_fd, int out_fd)
{
	struct stat st;
	memset(io, 0, sizeof *io);
	io->in_fd = in_fd;
	io->out_fd = out_fd;
	io->in_name = "<stdin>";
	cave_buf_init(&io->in, CAVE_EVENT_MAX + CAVE_IO_CHUNK + 1);
	cave_buf_init(&io->out, SIZE_MAX / 4);
	signal(SIGPIPE, SIG_IGN);
	/* Only a pipe or socket of our own is made non-blocking; a terminal
	 * or file is shared with others and is written plainly. */
	io->out_blocking = true;
	if (out_fd >= 0 && fstat(out_fd, &st) == 0 &&
	    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
		int fl = fcntl(out_fd, F_GETFL);
		if (fl >= 0 && fcntl(out_fd, F_SETFL, fl | O_NONBLOCK) == 0)
			io->out_blocking = false;
		if (S_ISFIFO(st.st_mode))
			grow_pipe(out_fd);
	}
	if (in_fd >= 0 && fstat(in_fd, &st) == 0 && S_ISFIFO(st.st_mode))
		grow_pipe(in_fd);
	if (in_fd < 0)
		io->in_eof = true;
}

void cave_io_free(struct cave_io *io)
{
	cave_buf_free(&io->in);
	cave_buf_free(&io->out);
}

static size_t queued(const struct cave_io *io)
{
	return io->out.len - io->out_off;
}

/* Writes what the pipe takes now (everything, for a blocking fd). */
static void flush(struct cave_io *io)
{
	while (queued(io) && !io->out_closed) {
		ssize_t w = write(io->out_fd, io->out.data + io->out_off, queued(io));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno != EPIPE)
				io->error = errno;
			io->out_closed = true;
			break;
		}
		io->out_off += (size_t)w;
	}
	if (io->out_closed || io->out_off == io->out.len) {
		cave_buf_reset(&io->out);
		io->out_off = 0;
	} else if (io->out_off > (1u << 20) && io->out_off > io->out.len / 2) {
		cave_buf_consume(&io->out, io->out_off);
		io->out_off = 0;
	}
}

/* Writes what the pipe takes of p now, when nothing is queued before it;
 * returns how much. */
static size_t write_direct(struct cave_io *io, const char *p, size_t n)
{
	size_t off = 0;
	while (off < n && !io->out_closed && queued(io) == 0) {
		ssize_t w = write(io->out_fd, p + off, n - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno != EPIPE)
				io->error = errno;
			io->out_closed = true;
			break;
		}
		off += (size_t)w;
	}
	return off;
}

static void enqueue(struct cave_io *io, const char *p, size_t n)
{
	if (io->out_closed)
		return;
	if (cave_buf_add(&io->out, p, n) < 0)
		cave_die(CAVE_EX_SOFTWARE, "output queue overflow");
}

void cave_io_write(struct cave_io *io, const char *p, size_t n)
{
	if (n >= CAVE_IO_DIRECT && queued(io) == 0) {
		size_t w = write_direct(io, p, n);
		p += w;
		n -= w;
	}
	enqueue(io, p, n);
	if (!io->batching)
		flush(io);
}

void cave_io_pass(struct cave_io *io, const char *line, size_t len)
{
	if (len >= CAVE_IO_DIRECT && queued(io) == 0) {
		size_t w = write_direct(io, line, len);
		line += w;
		len -= w;
	}
	enqueue(io, line, len);
	enqueue(io, "\n", 1);
	if (!io->batching)
		flush(io);
}

void cave_io_emit(struct cave_io *io, jv ev) /* consumes ev */
{
	size_t n;
	char *s = cave_event_dump(ev, &n);
	if (!s)
		cave_die(CAVE_EX_SOFTWARE, "internal error: event without a type");
	cave_io_write(io, s, n);
	free(s);
}

int cave_io_pollfds(struct cave_io *io, struct pollfd *p)
{
	int n = 0;
	if (!io->in_eof && !io->paused && !io->out_closed &&
	    queued(io) < CAVE_IO_HIGH_WATER) {
		p[n].fd = io->in_fd;
		p[n].events = POLLIN;
		p[n++].revents = 0;
	}
	if (queued(io) && !io->out_closed) {
		p[n].fd = io->out_fd;
		p[n].events = POLLOUT;
		p[n++].revents = 0;
	}
	return n;
}

/* Delivers the whole lines in io->in; keeps a partial one. At EOF a last
 * line without '\n' is delivered too. */
static int deliver(struct cave_io *io, cave_line_fn fn, void *ctx, cave_err *e)
{
	char *base = io->in.data;
	size_t start = 0, end = io->in.len;
	int ret = 0;
	io->batching = true;
	while (start < end) {
		char *nl = memchr(base + io->in_scan, '\n', end - io->in_scan);
		size_t len;
		if (!nl) {
			if (!io->in_eof) {
				io->in_scan = end;
				break;
			}
			nl = base + end; /* the final line, unterminated */
		}
		len = (size_t)(nl - (base + start));
		if (len > CAVE_EVENT_MAX) {
			ret = cave_errf(e, "event_too_large",
					"%s:%lu: event longer than %zu bytes",
					io->in_name, io->lineno + 1, (size_t)CAVE_EVENT_MAX);
			break;
		}
		if (nl < base + end)
			*nl = '\0';
		io->lineno++;
		start = (size_t)(nl - base) + 1;
		io->in_scan = start;
		if (len && fn(ctx, base + start - len - 1, len) < 0) {
			ret = -1;
			break;
		}
	}
	if (start > end)
		start = end;
	if (!ret && io->in_scan - start > CAVE_EVENT_MAX)
		ret = cave_errf(e, "event_too_large", "%s:%lu: event longer than %zu bytes",
				io->in_name, io->lineno + 1, (size_t)CAVE_EVENT_MAX);
	cave_buf_consume(&io->in, start);
	io->in_scan = io->in_scan >= start ? io->in_scan - start : 0;
	io->batching = false;
	flush(io);
	return ret;
}

static int read_some(struct cave_io *io, cave_line_fn fn, void *ctx, cave_err *e)
{
	ssize_t r;
	if (io->in.cap - io->in.len < CAVE_IO_CHUNK + 1 &&
	    cave_buf_add(&io->in, "", 0) == 0) {
		/* grow to hold a whole chunk */
		size_t want = io->in.len + CAVE_IO_CHUNK + 1;
		if (want > io->in.max + 1)
			want = io->in.max + 1;
		if (want > io->in.cap) {
			io->in.data = cave_xrealloc(io->in.data, want);
			io->in.cap = want;
		}
	}
	do
		r = read(io->in_fd, io->in.data + io->in.len, io->in.cap - io->in.len - 1);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		io->error = errno;
		return cave_errf(e, "io", "%s: read error: %s", io->in_name, strerror(errno));
	}
	if (r == 0)
		io->in_eof = true;
	io->in.len += (size_t)r;
	io->in.data[io->in.len] = '\0';
	return deliver(io, fn, ctx, e);
}

int cave_io_service(struct cave_io *io, const struct pollfd *p, int n,
		    cave_line_fn fn, void *ctx, cave_err *e)
{
	for (int i = 0; i < n; i++) {
		if (!p[i].revents)
			continue;
		if (p[i].fd == io->in_fd && (p[i].events & POLLIN)) {
			if (read_some(io, fn, ctx, e) < 0)
				return -1;
		} else if (p[i].fd == io->out_fd && (p[i].events & POLLOUT)) {
			if (p[i].revents & (POLLERR | POLLHUP) && !(p[i].revents & POLLOUT))
				io->out_closed = true;
			flush(io);
		}
	}
	return 0;
}

bool cave_io_done(const struct cave_io *io)
{
	return io->out_closed || (io->in_eof && queued(io) == 0);
}

int cave_io_drain(struct cave_io *io)
{
	while (queued(io) && !io->out_closed) {
		struct pollfd p = { .fd = io->out_fd, .events = POLLOUT };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
		if (p.revents & (POLLERR | POLLHUP) && !(p.revents & POLLOUT))
			io->out_closed = true;
		flush(io);
	}
	return io->error ? -1 : 0;
}

int cave_io_run(struct cave_io *io, cave_line_fn fn, void *ctx, cave_err *e)
{
	struct pollfd p[2];
	while (!cave_io_done(io)) {
		int n = cave_io_pollfds(io, p);
		if (n == 0)
			break;
		if (poll(p, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return cave_errf(e, "io", "poll failed: %s", strerror(errno));
		}
		if (cave_io_service(io, p, n, fn, ctx, e) < 0)
			return -1;
	}
	return 0;
}
