/* exp_math.h — e^x, one element at a time, for both devices: on the CPU for float and double a
 * form gcc vectorizes (branch-free range reduction x = k ln2 + r, |r| <= ln2/2, a polynomial for
 * e^r, and 2^k built from exponent bits in two halves so gradual underflow and overflow to +inf
 * round exactly once); on CUDA expf and exp. exp_of_float / exp_of_double
 * are the op's value on the device compiling this. The op's kernels include it, and it is the
 * prelude of exp's scalar body (ABI 1.2: the host puts it in front of fused kernels it
 * compiles with cc or NVRTC), so it is self-contained and includes nothing under NVRTC (which
 * has no libc headers; the host's prelude has defined the <stdint.h> types there). */
#ifndef DLOP_EXP_MATH_H
#define DLOP_EXP_MATH_H

#if defined(__CUDACC_RTC__)
#define EXP_FN static __device__ __forceinline__
#elif defined(__CUDACC__)
#include <stdint.h>
#define EXP_FN static __device__ __forceinline__
#else
#include <stdint.h>
#include <string.h>
#define EXP_FN static inline
#endif

/* The bits of a float or double, and back. */
#if defined(__CUDACC__)
EXP_FN uint32_t exp_f32_bits(float f) { return __float_as_uint(f); }
EXP_FN float exp_f32_from_bits(uint32_t u) { return __uint_as_float(u); }
EXP_FN uint64_t exp_f64_bits(double d) { return (uint64_t)__double_as_longlong(d); }
EXP_FN double exp_f64_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
#else
EXP_FN uint32_t exp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
EXP_FN float exp_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
EXP_FN uint64_t exp_f64_bits(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
EXP_FN double exp_f64_from_bits(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
#endif

#if !defined(__CUDACC__)
/* ---- the CPU's: vectorizable polynomials ---- */

/* About 1 ulp (Cephes' expf polynomial on |r| <= ln2/2). Beyond 89 the result overflows to
 * +inf and below -104 it is 0 (exp(-104) is under half the smallest subnormal); -inf gives 0,
 * +inf gives +inf, NaN gives NaN. */
EXP_FN float exp_poly_f32(float x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23: x + magic leaves round(x) in the low bits */
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = xc != xc ? 0.0f : xc; /* NaN: compute something harmless, select NaN at the end */
  float t = xc * 1.44269504088896341f + magic;
  int32_t k = (int32_t)(exp_f32_bits(t) - exp_f32_bits(magic));
  float kf = t - magic;
  float r = xc - kf * 0.693359375f;      /* ln2 high part: kf * it is exact */
  r = r - kf * -2.12194440e-4f;          /* ln2 low part */
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * (r * r) + r + 1.0f;
  /* 2^k = 2^k1 * 2^k2 with both halves normal floats (k in [-150, 128]) */
  int32_t k1 = k >> 1, k2 = k - k1;
  float s1 = exp_f32_from_bits((uint32_t)(k1 + 127) << 23);
  float s2 = exp_f32_from_bits((uint32_t)(k2 + 127) << 23);
  float result = (y * s1) * s2;
  return x != x ? x : result;
}

/* Under 1 ulp (0.97 at most against expl on 3.4e7 points over [-750, 712]): x = k ln2 + r
 * (|r| <= ln2/2, Cody-Waite with a two-part ln2), e^r = 1 + r + r^2 q(r) with q a degree-10
 * polynomial (coefficients: the Chebyshev interpolant of (e^r - 1 - r)/r^2 on [-ln2/2, ln2/2],
 * computed in exact arithmetic; error < 2^-62). Overflow to +inf beyond ~709.78, gradual
 * underflow below ~-708, 0 below -746, NaN stays NaN.
 * Written for op count (the vectorized loop is bound by it): no NaN pre-select (a NaN flows
 * through as garbage in unsigned integer steps and is selected at the end), 2^k split into two
 * normal halves straight from t's bits, and the first half folded into an FMA. */
EXP_FN double exp_poly_f64(double x) {
  const double magic = 6755399441055744.0; /* 1.5 * 2^52: t's low bits are round(x / ln2) */
  const uint64_t magic_bits = 0x4338000000000000u;
  double xc = x > 710.0 ? 710.0 : x;
  xc = xc < -746.0 ? -746.0 : xc;
  double t = xc * 1.4426950408889634 + magic;
  uint64_t u = exp_f64_bits(t); /* magic_bits + k, k in [-1077, 1025] */
  double kf = t - magic;
  double r = xc - kf * 6.93145751953125e-1; /* ln2 high part: kf * it is exact */
  r = r - kf * 1.42860682030941723212e-6;    /* ln2 low part */
  double q = 0x1.1f72fc730b4ffp-29;
  q = q * r + 0x1.af4ddd84882fep-26;
  q = q * r + 0x1.27e4db67b4303p-22;
  q = q * r + 0x1.71de02375656cp-19;
  q = q * r + 0x1.a01a01a6d7808p-16;
  q = q * r + 0x1.a01a01abe62ddp-13;
  q = q * r + 0x1.6c16c16c162d6p-10;
  q = q * r + 0x1.11111111100dfp-7;
  q = q * r + 0x1.5555555555556p-5;
  q = q * r + 0x1.5555555555557p-3;
  q = q * r + 0.5;
  double w = r + (r * r) * q; /* e^r - 1 */
  /* 2^k = 2^k1 * 2^k2, k1 = floor((k + 2048) / 2) - 1024, k2 = k - k1, both in [-539, 513]:
   * biased exponents e1 = (k + 2046) >> 1 and e2 = k + 2046 - e1, taken from u mod 2^64 */
  uint64_t b = u - (magic_bits - 2046u); /* k + 2046 */
  uint64_t e1 = b >> 1;
  double s1 = exp_f64_from_bits(e1 << 52);
  double s2 = exp_f64_from_bits((b << 52) - (e1 << 52));
  /* s1 is a power of two and s1 (1 + w) normal, so that rounds like 1 + w would and a
   * subnormal result rounds only once, at * s2 */
  double result = (s1 + s1 * w) * s2;
  return x != x ? x : result;
}

#else
/* ---- CUDA's ---- */

/* CUDA's full-precision expf and exp (no --use_fast_math): within 2 and 1 ulp, correct at 0,
 * +-inf and NaN, unlike __expf. A table-driven double exp (32 entries of 2^(j/32), a degree-6
 * polynomial) ran here until an H200 showed why not: float64 kernels that call functions run
 * at the card's power limit (700 W, the clock down from 1980 to 1400-1700 MHz), where the
 * table's gathers cost more than CUDA's five more multiply-adds: the seed chain exp(2x) * b +
 * tanh(x) - 1, fused in the same kernel form and timed in steady state, ran at 0.71 of a copy's
 * speed with the table and 0.85 with CUDA's exp (bench/RESULTS.md). */
EXP_FN float exp_of_float(float x) { return expf(x); }
EXP_FN double exp_of_double(double x) { return exp(x); }
#endif

#if !defined(__CUDACC__)
EXP_FN float exp_of_float(float x) { return exp_poly_f32(x); }
EXP_FN double exp_of_double(double x) { return exp_poly_f64(x); }
#endif

#endif
