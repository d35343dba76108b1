/* journal.c: append-only NDJSON journal with explicit sync points and
 * torn-tail repair. It stores lines as they were given and never rewrites
 * a whole line that was written. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "buf.h"
#include "event.h"
#include "journal.h"

int cave_mkdirs(const char *path, cave_err *e)
{
	char p[4096];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof p)
		return cave_errf(e, "io", "bad directory name '%.200s'", path);
	memcpy(p, path, n + 1);
	for (char *s = p + 1; ; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0700) < 0 && errno != EEXIST)
				return cave_errf(e, "io", "cannot make directory '%.200s': %s",
						 p, strerror(errno));
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

/* Cuts a torn tail: everything after the last '\n'. */
static int repair(int fd, const char *path, size_t *torn, cave_err *e)
{
	off_t end = lseek(fd, 0, SEEK_END), pos = end;
	char buf[4096];
	if (torn)
		*torn = 0;
	if (end <= 0)
		return 0;
	while (pos > 0) {
		size_t chunk = pos > (off_t)sizeof buf ? sizeof buf : (size_t)pos;
		ssize_t r = pread(fd, buf, chunk, pos - (off_t)chunk);
		if (r != (ssize_t)chunk)
			return cave_errf(e, "io", "cannot read '%.200s': %s", path,
					 r < 0 ? strerror(errno) : "short read");
		for (size_t i = chunk; i > 0; i--)
			if (buf[i - 1] == '\n') {
				off_t keep = pos - (off_t)chunk + (off_t)i;
				if (keep == end)
					return 0;
				if (ftruncate(fd, keep) < 0)
					return cave_errf(e, "io", "cannot repair '%.200s': %s",
							 path, strerror(errno));
				if (torn)
					*torn = (size_t)(end - keep);
				return 0;
			}
		pos -= (off_t)chunk;
	}
	if (ftruncate(fd, 0) < 0)
		return cave_errf(e, "io", "cannot repair '%.200s': %s", path, strerror(errno));
	if (torn)
		*torn = (size_t)end;
	return 0;
}

int cave_journal_open(struct cave_journal *j, const char *path, size_t *torn,
		      cave_err *e)
{
	memset(j, 0, sizeof *j);
	j->fd = -1;
	if ((size_t)snprintf(j->path, sizeof j->path, "%s", path) >= sizeof j->path)
		return cave_errf(e, "io", "journal path too long");
	j->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0)
		return cave_errf(e, "io", "cannot open '%.200s': %s", path, strerror(errno));
	if (repair(j->fd, path, torn, e) < 0) {
		close(j->fd);
		j->fd = -1;
		return -1;
	}
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int cave_journal_append(struct cave_journal *j, const char *line, size_t len,
			cave_err *e)
{
	/* one write for line and newline, so a crash tears at most this
	 * line; gathered, so a megabyte line is not copied to add the '\n' */
	struct iovec iov[2] = { { (void *)line, len }, { "\n", 1 } };
	ssize_t w;
	int ret = 0;
	do
		w = writev(j->fd, iov, 2);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		ret = -1;
	else if ((size_t)w < len) /* a short write: the rest, then the '\n' */
		ret = write_all(j->fd, line + w, len - (size_t)w) < 0 ||
		      write_all(j->fd, "\n", 1) < 0 ? -1 : 0;
	else if ((size_t)w == len)
		ret = write_all(j->fd, "\n", 1);
	if (ret < 0)
		return cave_errf(e, "io", "cannot write '%.200s': %s", j->path, strerror(errno));
	j->lines++;
	j->dirty = true;
	return 0;
}

int cave_journal_sync(struct cave_journal *j, cave_err *e)
{
	if (!j->dirty)
		return 0;
	if (fdatasync(j->fd) < 0)
		return cave_errf(e, "io", "cannot sync '%.200s': %s", j->path, strerror(errno));
	j->dirty = false;
	return 0;
}

void cave_journal_close(struct cave_journal *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
}

int cave_journal_read(const char *path, cave_journal_fn fn, void *ctx, cave_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -1;
	struct cave_buf b;
	unsigned long lineno = 0;
	char chunk[65536];
	ssize_t r;

	cave_buf_init(&b, CAVE_EVENT_MAX + sizeof chunk + 1);
	if (fd < 0)
		return cave_errf(e, "io", "cannot open '%.200s': %s", path, strerror(errno));
	for (;;) {
		size_t start = 0;
		char *nl;
		r = read(fd, chunk, sizeof chunk);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			cave_errf(e, "io", "cannot read '%.200s': %s", path, strerror(errno));
			goto out;
		}
		if (r == 0)
			break; /* whatever is left has no '\n': a torn line */
		if (cave_buf_add(&b, chunk, (size_t)r) < 0) {
			cave_errf(e, "bad_event", "%.200s:%lu: event longer than %zu bytes",
				  path, lineno + 1, (size_t)CAVE_EVENT_MAX);
			goto out;
		}
		while ((nl = memchr(b.data + start, '\n', b.len - start))) {
			size_t len = (size_t)(nl - (b.data + start));
			*nl = '\0';
			lineno++;
			if (len && fn(ctx, b.data + start, len, lineno) < 0)
				goto out;
			start += len + 1;
		}
		cave_buf_consume(&b, start);
		if (b.len > CAVE_EVENT_MAX) {
			cave_errf(e, "bad_event", "%.200s:%lu: event longer than %zu bytes",
				  path, lineno + 1, (size_t)CAVE_EVENT_MAX);
			goto out;
		}
	}
	ret = 0;
out:
	cave_buf_free(&b);
	close(fd);
	return ret;
}
