/* fusion_prelude.h — the text libdlop puts first in every kernel it generates for a fused group
 * (embedded in libdlop as dlop__fusion_host_prelude; never included by libdlop's own code). It
 * is what the host promises an op's scalar body and prelude on both targets (docs/abi.md,
 * "Scalar bodies"): the <stdint.h> integer types and limits, the <math.h> functions of float and
 * double, DLOP_SCALAR_FN for the functions a prelude defines, DLOP_SCALAR_CUDA (set under NVRTC
 * only), and the conversions the host emits around a body: float16 and bfloat16 to and from
 * float32, and the bits of the literal constants it embeds. NVRTC has no libc headers, so there
 * the types are declared here and the math functions are NVRTC's built-ins. */
#ifndef DLOP_FUSION_PRELUDE_H
#define DLOP_FUSION_PRELUDE_H

#if defined(__CUDACC_RTC__)
#define DLOP_SCALAR_CUDA 1
#define DLOP_SCALAR_FN static __device__ __forceinline__
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32767 - 1)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295u
#define UINT64_MAX 18446744073709551615ull
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define DLOP_SCALAR_FN static inline
/* gcc calls glibc's vector math (libmvec) from vectorized loops for functions declared SIMD;
 * glibc declares them so only under -ffast-math, which would also drop IEEE semantics. The
 * host compiles with -fno-math-errno (libmvec sets no errno) and links libm, which brings
 * libmvec. Elsewhere the loops call libm. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define DLOP_SCALAR_VECTOR_FN __attribute__((simd("notinbranch")))
DLOP_SCALAR_VECTOR_FN float expf(float);
DLOP_SCALAR_VECTOR_FN double exp(double);
DLOP_SCALAR_VECTOR_FN float logf(float);
DLOP_SCALAR_VECTOR_FN double log(double);
DLOP_SCALAR_VECTOR_FN float tanhf(float);
DLOP_SCALAR_VECTOR_FN double tanh(double);
DLOP_SCALAR_VECTOR_FN float powf(float, float);
DLOP_SCALAR_VECTOR_FN double pow(double, double);
#endif
#endif

/* ---- bits ------------------------------------------------------------------------------ */

#if defined(DLOP_SCALAR_CUDA)
DLOP_SCALAR_FN uint32_t dlop_scalar_float_bits(float f) { return __float_as_uint(f); }
DLOP_SCALAR_FN float dlop_scalar_float_from_bits(uint32_t u) { return __uint_as_float(u); }
DLOP_SCALAR_FN double dlop_scalar_double_from_bits(uint64_t u) {
  return __longlong_as_double((long long)u);
}
#else
DLOP_SCALAR_FN uint32_t dlop_scalar_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
DLOP_SCALAR_FN float dlop_scalar_float_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
DLOP_SCALAR_FN double dlop_scalar_double_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}
#endif

/* ---- float16 and bfloat16 to and from float32 -------------------------------------------
 * Loads are exact. Stores round to nearest even, and a NaN becomes the canonical quiet NaN with
 * its sign (0x7E00 / 0x7FC0, sign kept), the same bits on both devices. The CPU's are the
 * bit-exact integer forms of dlop/kit/half_float.h; CUDA's the PTX conversions. */
#if defined(DLOP_SCALAR_CUDA)
DLOP_SCALAR_FN float dlop_scalar_load_float16(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
DLOP_SCALAR_FN uint16_t dlop_scalar_round_float16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
DLOP_SCALAR_FN uint16_t dlop_scalar_round_bfloat16(float f) {
#if __CUDA_ARCH__ >= 800
  uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  uint32_t bits = __float_as_uint(f);
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16); /* not NaN (below) */
#endif
}
#else
DLOP_SCALAR_FN float dlop_scalar_load_float16(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
  const float normalized = dlop_scalar_float_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = dlop_scalar_float_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? dlop_scalar_float_bits(denormalized)
                                                : dlop_scalar_float_bits(normalized);
  return dlop_scalar_float_from_bits(sign | magnitude);
}
DLOP_SCALAR_FN uint16_t dlop_scalar_round_float16(float f) {
  const uint32_t w = dlop_scalar_float_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u, bits, nonsign;
  float base = (dlop_scalar_float_from_bits(w & 0x7FFFFFFFu) * 0x1.0p+112f) * 0x1.0p-110f;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = dlop_scalar_float_from_bits((bias >> 1) + 0x07800000u) + base;
  bits = dlop_scalar_float_bits(base);
  nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
DLOP_SCALAR_FN uint16_t dlop_scalar_round_bfloat16(float f) {
  uint32_t bits = dlop_scalar_float_bits(f);
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16); /* not NaN (below) */
}
#endif

DLOP_SCALAR_FN float dlop_scalar_load_bfloat16(uint16_t b) {
  return dlop_scalar_float_from_bits((uint32_t)b << 16);
}
DLOP_SCALAR_FN uint16_t dlop_scalar_store_float16(float f) {
  if (f != f) return (uint16_t)(0x7E00u | ((dlop_scalar_float_bits(f) >> 16) & 0x8000u));
  return dlop_scalar_round_float16(f);
}
DLOP_SCALAR_FN uint16_t dlop_scalar_store_bfloat16(float f) {
  if (f != f) return (uint16_t)(0x7FC0u | ((dlop_scalar_float_bits(f) >> 16) & 0x8000u));
  return dlop_scalar_round_bfloat16(f);
}

#endif
