/* Unit tests of the ring reader/writer: whole lines across chunk
 * boundaries, a final unterminated line, the size cap, EPIPE quietly,
 * megabyte lines passed whole and in order. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
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

/* passes each line on, as a filter does with lines it does not own */
static int echo(void *ctx, char *line, size_t len)
{
	cave_io_pass(ctx, line, len);
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
	/* long lines pass whole and in order with short ones between them
	 * (a long one goes straight to the pipe only when nothing waits) */
	{
		struct cave_buf in;
		struct cave_io io;
		cave_err e;
		char tmpl[] = "/tmp/test_io.XXXXXX", *got;
		int out[2], tmp = mkstemp(tmpl), fd, sz;
		pid_t reader;
		FILE *pm = fopen("/proc/sys/fs/pipe-max-size", "r");
		long max = 0;
		size_t n = 0;

		if (pm) {
			if (fscanf(pm, "%ld", &max) != 1)
				max = 0;
			fclose(pm);
		}
		cave_buf_init(&in, (size_t)8 << 20);
		for (int i = 0; i < 6; i++) {
			cave_buf_addf(&in, "{\"type\":\"small\",\"n\":%d}\n", i);
			cave_buf_addf(&in, "{\"type\":\"big\",\"n\":%d,\"t\":\"", i);
			for (size_t k = 0; k < ((size_t)300 << 10) * (size_t)(i + 1); k++)
				cave_buf_addc(&in, (char)('a' + (k + (size_t)i) % 26));
			cave_buf_adds(&in, "\"}\n");
		}
		if (tmp < 0 || pipe(out) < 0)
			return 1;
		unlink(tmpl);
		reader = fork();
		if (reader == 0) {
			char chunk[65536];
			ssize_t r;

			close(out[1]);
			while ((r = read(out[0], chunk, sizeof chunk)) > 0)
				if (write(tmp, chunk, (size_t)r) != r)
					_exit(1);
			_exit(0);
		}
		close(out[0]);
		fd = feeder(in.data, in.len, 1 << 16);
		cave_io_init(&io, fd, out[1]);
		sz = fcntl(out[1], F_GETPIPE_SZ);
		ok(max < (256 << 10) || sz >= (256 << 10), "the output pipe grown to 256 KiB (%d)", sz);
		ok(cave_io_run(&io, echo, &io, &e) == 0 && cave_io_drain(&io) == 0, "echo to EOF");
		cave_io_free(&io);
		close(out[1]);
		close(fd);
		waitpid(reader, NULL, 0);
		got = malloc(in.len + 1);
		if (lseek(tmp, 0, SEEK_SET) == 0)
			n = (size_t)read(tmp, got, in.len + 1);
		ok(n == in.len && memcmp(got, in.data, in.len) == 0,
		   "every byte of %zu passed, in order", in.len);
		free(got);
		close(tmp);
		cave_buf_free(&in);
		while (wait(NULL) > 0)
			;
	}
	/* a long line never overtakes a short one queued before it in the
	 * same batch (it goes straight to the pipe only when nothing waits) */
	{
		int out[2];
		struct cave_io io;
		size_t big = (size_t)100 << 10, n = 0;
		char *line = malloc(big), *got = malloc(big + 64);
		ssize_t r;

		if (pipe(out) < 0)
			return 1;
		memset(line, 'b', big);
		cave_io_init(&io, -1, out[1]);
		if (fcntl(out[1], F_GETPIPE_SZ) < (int)big + 64) {
			/* the kernel kept the pipe small: no reader here to drain it */
			ok(1, "# skip: the pipe was not grown");
			ok(1, "# skip: the pipe was not grown");
			goto small_pipe;
		}
		io.batching = true; /* as when delivering lines read at once */
		cave_io_pass(&io, "small", 5);
		cave_io_pass(&io, line, big);
		io.batching = false;
		ok(cave_io_drain(&io) == 0, "both written (they fit the grown pipe)");
		while (n < big + 7 && (r = read(out[0], got + n, big + 64 - n)) > 0)
			n += (size_t)r;
		ok(n == big + 7 && memcmp(got, "small\n", 6) == 0 && got[6] == 'b' && got[n - 1] == '\n',
		   "the short line first, then the long one whole");
small_pipe:
		cave_io_free(&io);
		close(out[0]);
		close(out[1]);
		free(line);
		free(got);
	}
	return tap_done();
}
