/* dlop/kit/half_float.h — float16 and bfloat16 to and from float on the host, bit-exact, for CPU
 * kernels that compute in float32 and round once, and the bits of a float or double (for
 * kernels that build results from exponent bits). Part of kernel_util.h; static inline. */
#ifndef DLOP_HALF_FLOAT_H
#define DLOP_HALF_FLOAT_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bit-exact, branch-light conversions (after Maratyszcza's FP16 library) so loops over them
 * stay simple: round to nearest even, NaN stays NaN, infinities and subnormals are exact. */

/* The bits of a float or a double, and back (through memcpy: no aliasing rule is broken). */
static inline uint32_t dlop_float_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float dlop_float_from_bits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline uint64_t dlop_double_bits(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
static inline double dlop_double_from_bits(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }

static inline float dlop_half_to_float(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  /* normal numbers (and inf/NaN): rebias the exponent by 2^112 with one exact multiply */
  const float normalized = dlop_float_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  /* subnormals: place the mantissa under a 0.5 bias and subtract it exactly */
  const float denormalized = dlop_float_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? dlop_float_bits(denormalized)
                                                : dlop_float_bits(normalized);
  return dlop_float_from_bits(sign | magnitude);
}

static inline uint16_t dlop_float_to_half(float f) {
  const uint32_t w = dlop_float_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  float absolute = dlop_float_from_bits(w & 0x7FFFFFFFu);
  /* scaling up then down makes values too large for half overflow to inf (both exact) */
  float base = (absolute * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t bits, nonsign;
  if (bias < 0x71000000u) bias = 0x71000000u;
  /* adding 2^(e+?) makes the FPU round the mantissa to 10 bits, ties to even */
  base = dlop_float_from_bits((bias >> 1) + 0x07800000u) + base;
  bits = dlop_float_bits(base);
  nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float dlop_bfloat16_to_float(uint16_t b) {
  return dlop_float_from_bits((uint32_t)b << 16);
}

static inline uint16_t dlop_float_to_bfloat16(float f) {
  uint32_t bits = dlop_float_bits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x0040u); /* quiet NaN */
  bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest even; overflow carries to inf */
  return (uint16_t)(bits >> 16);
}

#ifdef __cplusplus
}
#endif

#endif
