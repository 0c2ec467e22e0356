/* jit_sha256.h — SHA-256 (FIPS 180-4), the digest that names run-time compilation cache
 * entries and checks their payloads. Written here so that libdlop needs no crypto library. */
#ifndef DLOP_JIT_SHA256_H
#define DLOP_JIT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DLOP__SHA256_BYTES 32

typedef struct dlop__sha256 {
  uint32_t state[8];
  uint64_t total_bytes;
  uint8_t block[64];
  size_t block_used;
} dlop__sha256;

void dlop__sha256_init(dlop__sha256 *hash);
void dlop__sha256_update(dlop__sha256 *hash, const void *data, size_t bytes);
void dlop__sha256_final(dlop__sha256 *hash, uint8_t digest[DLOP__SHA256_BYTES]);
/* The digest of one buffer. */
void dlop__sha256_digest(const void *data, size_t bytes, uint8_t digest[DLOP__SHA256_BYTES]);
/* 64 lowercase hex digits and a NUL into text. */
void dlop__sha256_hex(const uint8_t digest[DLOP__SHA256_BYTES], char text[2 * DLOP__SHA256_BYTES + 1]);

#endif
