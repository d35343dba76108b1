/* digest.h: sha256 digests (OpenSSL), always as 64 lower-case hex digits. */
#ifndef CAVE_DIGEST_H
#define CAVE_DIGEST_H

#include <stddef.h>

#define CAVE_SHA256_HEX 65 /* 64 digits and a NUL */

void cave_sha256_hex(const void *p, size_t n, char out[CAVE_SHA256_HEX]);
/* Digest of a file's bytes; -1 with errno set when it cannot be read. */
int cave_sha256_file(const char *path, char out[CAVE_SHA256_HEX]);

/* Streaming form, for content that arrives in pieces. */
struct cave_sha256;
struct cave_sha256 *cave_sha256_new(void);
void cave_sha256_update(struct cave_sha256 *s, const void *p, size_t n);
/* Finishes and frees s. */
void cave_sha256_final(struct cave_sha256 *s, char out[CAVE_SHA256_HEX]);

#endif
