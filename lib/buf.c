/* buf.c: capped growable buffers. A buffer never grows past its max and
 * never loses bytes silently: an add that does not fit is refused whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "msg.h"

void cave_buf_init(struct cave_buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

static int grow(struct cave_buf *b, size_t need)
{
	size_t cap;
	if (need > b->max || need < b->len) {
		errno = ENOBUFS;
		return -1;
	}
	if (need + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need + 1)
		cap = cap > SIZE_MAX / 2 ? need + 1 : cap * 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	b->data = cave_xrealloc(b->data, cap);
	b->cap = cap;
	return 0;
}

int cave_buf_add(struct cave_buf *b, const void *p, size_t n)
{
	if (n > SIZE_MAX - b->len - 1 || grow(b, b->len + n) < 0) {
		errno = ENOBUFS;
		return -1;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int cave_buf_read_fd(struct cave_buf *b, int fd)
{
	char chunk[65536];
	size_t start = b->len;
	ssize_t n;

	while ((n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || cave_buf_add(b, chunk, (size_t)n) < 0) {
			int err = errno;
			b->len = start;
			if (b->data)
				b->data[start] = '\0';
			errno = err;
			return -1;
		}
	}
	return 0;
}

int cave_buf_read_file(struct cave_buf *b, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r, err;

	if (fd < 0)
		return -1;
	r = cave_buf_read_fd(b, fd);
	err = errno;
	close(fd);
	errno = err;
	return r;
}

int cave_buf_adds(struct cave_buf *b, const char *s)
{
	return cave_buf_add(b, s, strlen(s));
}

int cave_buf_addc(struct cave_buf *b, char c)
{
	return cave_buf_add(b, &c, 1);
}

int cave_buf_vaddf(struct cave_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	char small[256];
	int n;
	va_copy(again, ap);
	n = vsnprintf(small, sizeof small, fmt, ap);
	if (n < 0 || (size_t)n < sizeof small) {
		va_end(again);
		return n < 0 ? -1 : cave_buf_add(b, small, (size_t)n);
	}
	if (grow(b, b->len + (size_t)n) < 0) {
		va_end(again);
		return -1;
	}
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
	va_end(again);
	b->len += (size_t)n;
	return 0;
}

int cave_buf_addf(struct cave_buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;
	va_start(ap, fmt);
	r = cave_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return r;
}

void cave_buf_consume(struct cave_buf *b, size_t n)
{
	if (n >= b->len) {
		cave_buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

void cave_buf_reset(struct cave_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

char *cave_buf_take(struct cave_buf *b, size_t *len)
{
	char *p = b->data ? b->data : cave_xstrdup("");
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void cave_buf_free(struct cave_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
