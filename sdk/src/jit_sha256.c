/* jit_sha256.c — SHA-256 as FIPS 180-4 defines it, byte-oriented and portable (no intrinsics):
 * the cache hashes kernel sources of a few kilobytes and payloads of tens, where this runs
 * well under a millisecond. Checked against the standard's test vectors (test_jit_cache.c). */
#include "jit_sha256.h"

#include <string.h>

static const uint32_t round_constants[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

static uint32_t rotate_right(uint32_t value, int bits) {
  return (value >> bits) | (value << (32 - bits));
}

static void compress(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
           (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotate_right(w[i - 15], 7) ^ rotate_right(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotate_right(w[i - 2], 17) ^ rotate_right(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; i++) {
    uint32_t s1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
    uint32_t choice = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + choice + round_constants[i] + w[i];
    uint32_t s0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
    uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = s0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

void dlop__sha256_init(dlop__sha256 *hash) {
  static const uint32_t initial[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                      0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  memcpy(hash->state, initial, sizeof initial);
  hash->total_bytes = 0;
  hash->block_used = 0;
}

void dlop__sha256_update(dlop__sha256 *hash, const void *data, size_t bytes) {
  const uint8_t *next = data;
  hash->total_bytes += bytes;
  if (hash->block_used > 0) {
    size_t taken = 64 - hash->block_used < bytes ? 64 - hash->block_used : bytes;
    memcpy(hash->block + hash->block_used, next, taken);
    hash->block_used += taken;
    next += taken;
    bytes -= taken;
    if (hash->block_used < 64) return;
    compress(hash->state, hash->block);
    hash->block_used = 0;
  }
  for (; bytes >= 64; next += 64, bytes -= 64) compress(hash->state, next);
  memcpy(hash->block, next, bytes);
  hash->block_used = bytes;
}

void dlop__sha256_final(dlop__sha256 *hash, uint8_t digest[DLOP__SHA256_BYTES]) {
  uint64_t bits = hash->total_bytes * 8;
  static const uint8_t padding[64] = {0x80};
  /* 0x80, zeros up to 56 mod 64, then the message length in bits, big-endian. */
  size_t pad = hash->block_used < 56 ? 56 - hash->block_used : 120 - hash->block_used;
  dlop__sha256_update(hash, padding, pad);
  uint8_t length[8];
  for (int i = 0; i < 8; i++) length[i] = (uint8_t)(bits >> (56 - 8 * i));
  dlop__sha256_update(hash, length, 8);
  for (int i = 0; i < 8; i++) {
    digest[4 * i] = (uint8_t)(hash->state[i] >> 24);
    digest[4 * i + 1] = (uint8_t)(hash->state[i] >> 16);
    digest[4 * i + 2] = (uint8_t)(hash->state[i] >> 8);
    digest[4 * i + 3] = (uint8_t)hash->state[i];
  }
}

void dlop__sha256_digest(const void *data, size_t bytes, uint8_t digest[DLOP__SHA256_BYTES]) {
  dlop__sha256 hash;
  dlop__sha256_init(&hash);
  dlop__sha256_update(&hash, data, bytes);
  dlop__sha256_final(&hash, digest);
}

void dlop__sha256_hex(const uint8_t digest[DLOP__SHA256_BYTES],
                      char text[2 * DLOP__SHA256_BYTES + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < DLOP__SHA256_BYTES; i++) {
    text[2 * i] = digits[digest[i] >> 4];
    text[2 * i + 1] = digits[digest[i] & 15];
  }
  text[2 * DLOP__SHA256_BYTES] = '\0';
}
