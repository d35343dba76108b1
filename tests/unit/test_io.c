/* Unit tests of the ring reader/writer: whole lines across chunk
 * boundaries, a final unterminated line, the size cap, EPIPE quietly. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "event.h"
#include "io.h"
#include "tap.h"

struct seen {
	int n;
	char last[64];
	size_t total;
};

static int on_line(void *ctx, char *line, size_t len)
{
	struct seen *s = ctx;
	s->n++;
	s->total += len;
	snprintf(s->last, sizeof s->last, "%.*s", (int)(len < 60 ? len : 60), line);
	return 0;
}

/* a child writes p in pieces of k bytes into a pipe we read */
static int feeder(const char *p, size_t n, size_t k)
{
	int fd[2];
	if (pipe(fd) < 0)
		return -1;
	if (fork() == 0) {
		close(fd[0]);
		for (size_t i = 0; i < n; i += k) {
			size_t m = n - i < k ? n - i : k;
			if (write(fd[1], p + i, m) < 0)
				_exit(1);
			usleep(200);
		}
		_exit(0);
	}
	close(fd[1]);
	return fd[0];
}

int main(void)
{
	const char *text = "{\"type\":\"a\"}\n\n{\"type\":\"b\"}\n{\"type\":\"c\"}";
	for (size_t k = 1; k <= 7; k += 3) {
		struct cave_io io;
		struct seen s = { 0 };
		cave_err e;
		int fd = feeder(text, strlen(text), k);
		int devnull[2];
		if (pipe(devnull) < 0)
			return 1;
		cave_io_init(&io, fd, devnull[1]);
		ok(cave_io_run(&io, on_line, &s, &e) == 0, "run to EOF (pieces of %zu)", k);
		is_int(s.n, 3, "three lines, the empty one skipped, the last unterminated");
		is_str(s.last, "{\"type\":\"c\"}", "final unterminated line delivered");
		cave_io_free(&io);
		close(fd);
		close(devnull[0]);
		close(devnull[1]);
		wait(NULL);
	}

	/* pass-through to a reader that goes away: EPIPE is a quiet end */
	{
		int in[2], out[2];
		struct cave_io io;
		if (pipe(in) < 0 || pipe(out) < 0)
			return 1;
		close(out[0]);
		cave_io_init(&io, in[0], out[1]);
		cave_io_pass(&io, "{\"type\":\"x\"}", 12);
		ok(io.out_closed && io.error == 0, "EPIPE marks the output closed, not an error");
		ok(cave_io_done(&io), "a closed reader ends the loop");
		cave_io_free(&io);
		close(in[0]);
		close(in[1]);
		close(out[1]);
	}

	/* a line over the cap is an error naming the line */
	{
		size_t big = CAVE_EVENT_MAX + 10;
		char *p = malloc(big);
		struct cave_io io;
		struct seen s = { 0 };
		cave_err e = { 0 };
		int fd, devnull[2];
		memset(p, 'x', big);
		p[0] = '{';
		fd = feeder(p, big, 1 << 20);
		if (pipe(devnull) < 0)
			return 1;
		cave_io_init(&io, fd, devnull[1]);
		ok(cave_io_run(&io, on_line, &s, &e) < 0, "an event over the cap stops the loop");
		ok(strstr(e.msg, "<stdin>:1: event longer than") != NULL, "message names the line: %s", e.msg);
		cave_io_free(&io);
		free(p);
		close(fd);
		close(devnull[0]);
		close(devnull[1]);
		kill(0, 0);
		wait(NULL);
	}
	return tap_done();
}
