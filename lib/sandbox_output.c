/* sandbox_output.c: a tool's output, capped. The first inline_max bytes go
 * in the result; every byte is counted and digested; the whole output is
 * kept in the store as <digest> when it fits keep_max. It never holds more
 * than inline_max bytes in memory and never writes more than keep_max. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "sandbox.h"

void cave_capture_init(struct cave_capture *c, size_t inline_max,
		       size_t keep_max, const char *store)
{
	memset(c, 0, sizeof *c);
	c->inline_max = inline_max;
	c->keep_max = keep_max;
	c->inl = cave_xmalloc(inline_max + 1);
	c->sha = cave_sha256_new();
	c->blob_fd = -1;
	c->store = store;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void keep(struct cave_capture *c, const char *p, size_t n)
{
	if (c->keep_failed || !c->store)
		return;
	if (c->size + n > c->keep_max) {
		c->keep_failed = true;
		return;
	}
	if (c->blob_fd < 0) {
		if ((size_t)snprintf(c->blob_tmp, sizeof c->blob_tmp,
				     "%s/.tmp.XXXXXX", c->store) >= sizeof c->blob_tmp ||
		    (mkdir(c->store, 0700) != 0 && errno != EEXIST) ||
		    (c->blob_fd = mkostemp(c->blob_tmp, O_CLOEXEC)) < 0 ||
		    write_all(c->blob_fd, c->inl, c->inl_len) != 0) {
			c->keep_failed = true;
			return;
		}
	}
	if (write_all(c->blob_fd, p, n) != 0)
		c->keep_failed = true;
}

void cave_capture_add(struct cave_capture *c, const char *p, size_t n)
{
	cave_sha256_update(c->sha, p, n);
	if (c->inl_len < c->inline_max) {
		size_t take = c->inline_max - c->inl_len;

		if (take > n)
			take = n;
		memcpy(c->inl + c->inl_len, p, take);
		c->inl_len += take;
		c->size += take;
		p += take;
		n -= take;
	}
	if (n) {
		keep(c, p, n);
		c->size += n;
	}
	c->inl[c->inl_len] = '\0';
}

void cave_capture_finish(struct cave_capture *c, char digest[65], bool *stored)
{
	cave_sha256_final(c->sha, digest);
	c->sha = NULL;
	*stored = false;
	if (c->blob_fd >= 0) {
		char final[4200];

		if (!c->keep_failed && fsync(c->blob_fd) == 0 &&
		    (size_t)snprintf(final, sizeof final, "%s/%s", c->store, digest) <
		    sizeof final && rename(c->blob_tmp, final) == 0)
			*stored = true;
		else
			unlink(c->blob_tmp);
		close(c->blob_fd);
		c->blob_fd = -1;
	}
}

void cave_capture_free(struct cave_capture *c)
{
	if (c->sha) {
		char d[65];

		cave_sha256_final(c->sha, d);
		c->sha = NULL;
	}
	if (c->blob_fd >= 0) {
		close(c->blob_fd);
		unlink(c->blob_tmp);
		c->blob_fd = -1;
	}
	free(c->inl);
	c->inl = NULL;
}
