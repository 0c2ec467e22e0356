/* exp_math.h — e^x for float and double written so gcc vectorizes it: branch-free range
 * reduction x = k ln2 + r (|r| <= ln2/2), a polynomial for e^r, and 2^k built from exponent
 * bits in two halves so gradual underflow and overflow to +inf round exactly once. */
#ifndef DLOP_EXP_MATH_H
#define DLOP_EXP_MATH_H

#include <stdint.h>
#include <string.h>

static inline uint64_t exp_double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static inline double exp_double_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static inline float exp_float_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t exp_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* About 1 ulp (Cephes' expf polynomial on |r| <= ln2/2). Beyond 89 the result overflows to
 * +inf and below -104 it is 0 (exp(-104) is under half the smallest subnormal); -inf gives 0,
 * +inf gives +inf, NaN gives NaN. */
static inline float exp_poly_f32(float x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23: x + magic leaves round(x) in the low bits */
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = xc != xc ? 0.0f : xc; /* NaN: compute something harmless, select NaN at the end */
  float t = xc * 1.44269504088896341f + magic;
  int32_t k = (int32_t)(exp_float_bits(t) - exp_float_bits(magic));
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
  float s1 = exp_float_from_bits((uint32_t)(k1 + 127) << 23);
  float s2 = exp_float_from_bits((uint32_t)(k2 + 127) << 23);
  float result = (y * s1) * s2;
  return x != x ? x : result;
}

/* About 1 ulp: a degree-13 Taylor polynomial on |r| <= ln2/2 (truncation < 5e-18). Overflow
 * to +inf beyond 710, 0 below -746, NaN stays NaN. */
static inline double exp_poly_f64(double x) {
  const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
  double xc = x > 710.0 ? 710.0 : x;
  xc = xc < -746.0 ? -746.0 : xc;
  xc = xc != xc ? 0.0 : xc;
  double t = xc * 1.4426950408889634 + magic;
  int64_t k = (int64_t)(exp_double_bits(t) - exp_double_bits(magic));
  double kf = t - magic;
  double r = xc - kf * 6.93145751953125e-1;   /* ln2 high part: kf * it is exact */
  r = r - kf * 1.42860682030941723212e-6;      /* ln2 low part */
  double q = 1.0 / 6227020800.0;               /* 1/13! */
  q = q * r + 1.0 / 479001600.0;
  q = q * r + 1.0 / 39916800.0;
  q = q * r + 1.0 / 3628800.0;
  q = q * r + 1.0 / 362880.0;
  q = q * r + 1.0 / 40320.0;
  q = q * r + 1.0 / 5040.0;
  q = q * r + 1.0 / 720.0;
  q = q * r + 1.0 / 120.0;
  q = q * r + 1.0 / 24.0;
  q = q * r + 1.0 / 6.0;
  q = q * r + 0.5;
  double y = 1.0 + (r + (r * r) * q);
  /* k in [-1077, 1025]: split without an arithmetic 64-bit shift (AVX2 has none) */
  int64_t k1 = (int64_t)((uint64_t)(k + 2048) >> 1) - 1024, k2 = k - k1;
  double s1 = exp_double_from_bits((uint64_t)(k1 + 1023) << 52);
  double s2 = exp_double_from_bits((uint64_t)(k2 + 1023) << 52);
  double result = (y * s1) * s2;
  return x != x ? x : result;
}

#endif
