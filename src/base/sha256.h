/* sha256.h - SHA-256 (FIPS 180-4), incremental: for checking weights and files against
 * published digests. */
#ifndef PL_BASE_SHA256_H
#define PL_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];   /* the running hash state */
    uint64_t len;    /* bytes hashed so far */
    uint8_t buf[64]; /* a partial block */
    size_t used;     /* bytes in buf */
} pl_sha256;

void pl_sha256_init(pl_sha256 *s);
void pl_sha256_update(pl_sha256 *s, const void *data, size_t n);
/* Finish into 32 bytes; s must be re-initialised before reuse. */
void pl_sha256_final(pl_sha256 *s, uint8_t out[32]);
/* The digest of one buffer as 64 lower-case hex digits plus NUL. */
void pl_sha256_hex(const void *data, size_t n, char out[65]);
/* Format a finished digest as hex (64 digits plus NUL). */
void pl_sha256_to_hex(const uint8_t digest[32], char out[65]);

#endif
