/* buf.h: growable byte buffers that always have a cap.
 * A buffer never grows past max; an add that would is refused (-1, ENOBUFS)
 * and leaves the buffer as it was. data is always NUL-terminated. */
#ifndef CAVE_BUF_H
#define CAVE_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct cave_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
};

void cave_buf_init(struct cave_buf *b, size_t max);
int cave_buf_add(struct cave_buf *b, const void *p, size_t n);
int cave_buf_adds(struct cave_buf *b, const char *s);
int cave_buf_addc(struct cave_buf *b, char c);
int cave_buf_addf(struct cave_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int cave_buf_vaddf(struct cave_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* Appends the whole file at path. -1 with errno set: the open's or read's,
 * or ENOBUFS when it is larger than what b may still hold (b is then
 * left as it was). */
int cave_buf_read_file(struct cave_buf *b, const char *path);
/* The same for what is left to read on fd (not closed). */
int cave_buf_read_fd(struct cave_buf *b, int fd);
/* Drops the first n bytes. */
void cave_buf_consume(struct cave_buf *b, size_t n);
void cave_buf_reset(struct cave_buf *b);
/* Hands the bytes over (caller frees) and leaves b empty; *len may be NULL. */
char *cave_buf_take(struct cave_buf *b, size_t *len);
void cave_buf_free(struct cave_buf *b);

#endif
