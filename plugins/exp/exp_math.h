/* exp_math.h — e^x for float and double written so gcc vectorizes it: branch-free range
 * reduction x = k ln2 + r (|r| <= ln2/2), a polynomial for e^r, and 2^k built from exponent
 * bits in two halves so gradual underflow and overflow to +inf round exactly once. */
#ifndef DLOP_EXP_MATH_H
#define DLOP_EXP_MATH_H

#include <stdint.h>

#include <dlop/kit/half_float.h> /* dlop_float_bits, dlop_double_bits and back */

/* About 1 ulp (Cephes' expf polynomial on |r| <= ln2/2). Beyond 89 the result overflows to
 * +inf and below -104 it is 0 (exp(-104) is under half the smallest subnormal); -inf gives 0,
 * +inf gives +inf, NaN gives NaN. */
static inline float exp_poly_f32(float x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23: x + magic leaves round(x) in the low bits */
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = xc != xc ? 0.0f : xc; /* NaN: compute something harmless, select NaN at the end */
  float t = xc * 1.44269504088896341f + magic;
  int32_t k = (int32_t)(dlop_float_bits(t) - dlop_float_bits(magic));
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
  float s1 = dlop_float_from_bits((uint32_t)(k1 + 127) << 23);
  float s2 = dlop_float_from_bits((uint32_t)(k2 + 127) << 23);
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
static inline double exp_poly_f64(double x) {
  const double magic = 6755399441055744.0; /* 1.5 * 2^52: t's low bits are round(x / ln2) */
  const uint64_t magic_bits = 0x4338000000000000u;
  double xc = x > 710.0 ? 710.0 : x;
  xc = xc < -746.0 ? -746.0 : xc;
  double t = xc * 1.4426950408889634 + magic;
  uint64_t u = dlop_double_bits(t); /* magic_bits + k, k in [-1077, 1025] */
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
  double s1 = dlop_double_from_bits(e1 << 52);
  double s2 = dlop_double_from_bits((b << 52) - (e1 << 52));
  /* s1 is a power of two and s1 (1 + w) normal, so that rounds like 1 + w would and a
   * subnormal result rounds only once, at * s2 */
  double result = (s1 + s1 * w) * s2;
  return x != x ? x : result;
}

#endif
