/* digest.c: sha256 through OpenSSL's EVP interface, as hex. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <unistd.h>

#include "digest.h"
#include "msg.h"

struct cave_sha256 {
	EVP_MD_CTX *ctx;
};

static void hex(const unsigned char *d, unsigned n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

struct cave_sha256 *cave_sha256_new(void)
{
	struct cave_sha256 *s = cave_xmalloc(sizeof *s);
	s->ctx = EVP_MD_CTX_new();
	if (!s->ctx || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1)
		cave_die(CAVE_EX_SOFTWARE, "cannot start sha256");
	return s;
}

void cave_sha256_update(struct cave_sha256 *s, const void *p, size_t n)
{
	if (n && EVP_DigestUpdate(s->ctx, p, n) != 1)
		cave_die(CAVE_EX_SOFTWARE, "sha256 update failed");
}

void cave_sha256_final(struct cave_sha256 *s, char out[CAVE_SHA256_HEX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	if (EVP_DigestFinal_ex(s->ctx, md, &n) != 1)
		cave_die(CAVE_EX_SOFTWARE, "sha256 final failed");
	hex(md, n, out);
	EVP_MD_CTX_free(s->ctx);
	free(s);
}

void cave_sha256_hex(const void *p, size_t n, char out[CAVE_SHA256_HEX])
{
	struct cave_sha256 *s = cave_sha256_new();
	cave_sha256_update(s, p, n);
	cave_sha256_final(s, out);
}

int cave_sha256_file(const char *path, char out[CAVE_SHA256_HEX])
{
	char buf[65536];
	struct cave_sha256 *s;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	s = cave_sha256_new();
	while ((r = read(fd, buf, sizeof buf)) != 0) {
		if (r < 0) {
			int saved = errno;
			if (errno == EINTR)
				continue;
			cave_sha256_final(s, out);
			close(fd);
			errno = saved;
			return -1;
		}
		cave_sha256_update(s, buf, (size_t)r);
	}
	close(fd);
	cave_sha256_final(s, out);
	return 0;
}
