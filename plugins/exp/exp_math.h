/* exp_math.h — e^x, one element at a time, for both devices: on the CPU for float and double a
 * form gcc vectorizes (branch-free range reduction x = k ln2 + r, |r| <= ln2/2, a polynomial for
 * e^r, and 2^k built from exponent bits in two halves so gradual underflow and overflow to +inf
 * round exactly once); on CUDA expf and a table-driven double exp. exp_of_float / exp_of_double
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

/* 2^(j/32) for j = 0..31 as (hi, lo) pairs: hi correctly rounded, lo = 2^(j/32) - hi rounded
 * (both computed to 60 digits). */
#define EXP_CUDA_EXP2_TABLE \
  {0x1.0000000000000p+0, 0.0, 0x1.059b0d3158574p+0, 0x1.d73e2a475b465p-55, \
   0x1.0b5586cf9890fp+0, 0x1.8a62e4adc610bp-54, 0x1.11301d0125b51p+0, -0x1.6c51039449b3ap-54, \
   0x1.172b83c7d517bp+0, -0x1.19041b9d78a76p-55, 0x1.1d4873168b9aap+0, 0x1.e016e00a2643cp-54, \
   0x1.2387a6e756238p+0, 0x1.9b07eb6c70573p-54, 0x1.29e9df51fdee1p+0, 0x1.612e8afad1255p-55, \
   0x1.306fe0a31b715p+0, 0x1.6f46ad23182e4p-55, 0x1.371a7373aa9cbp+0, -0x1.63aeabf42eae2p-54, \
   0x1.3dea64c123422p+0, 0x1.ada0911f09ebcp-55, 0x1.44e086061892dp+0, 0x1.89b7a04ef80d0p-59, \
   0x1.4bfdad5362a27p+0, 0x1.d4397afec42e2p-56, 0x1.5342b569d4f82p+0, -0x1.07abe1db13cadp-55, \
   0x1.5ab07dd485429p+0, 0x1.6324c054647adp-54, 0x1.6247eb03a5585p+0, -0x1.383c17e40b497p-54, \
   0x1.6a09e667f3bcdp+0, -0x1.bdd3413b26456p-54, 0x1.71f75e8ec5f74p+0, -0x1.16e4786887a99p-55, \
   0x1.7a11473eb0187p+0, -0x1.41577ee04992fp-55, 0x1.82589994cce13p+0, -0x1.d4c1dd41532d8p-54, \
   0x1.8ace5422aa0dbp+0, 0x1.6e9f156864b27p-54, 0x1.93737b0cdc5e5p+0, -0x1.75fc781b57ebcp-57, \
   0x1.9c49182a3f090p+0, 0x1.c7c46b071f2bep-56, 0x1.a5503b23e255dp+0, -0x1.d2f6edb8d41e1p-54, \
   0x1.ae89f995ad3adp+0, 0x1.7a1cd345dcc81p-54, 0x1.b7f76f2fb5e47p+0, -0x1.5584f7e54ac3bp-56, \
   0x1.c199bdd85529cp+0, 0x1.11065895048ddp-55, 0x1.cb720dcef9069p+0, 0x1.503cbd1e949dbp-56, \
   0x1.d5818dcfba487p+0, 0x1.2ed02d75b3707p-55, 0x1.dfc97337b9b5fp+0, -0x1.1a5cd4f184b5cp-54, \
   0x1.ea4afa2a490dap+0, -0x1.e9c23179c2893p-54, 0x1.f50765b6e4540p+0, 0x1.9d3e12dd8a18bp-54}

static __device__ const double exp_cuda_exp2_table[64] = EXP_CUDA_EXP2_TABLE;

/* e^x in float64 for |x| < 707, where the result is a normal number; the caller sends NaN,
 * infinities and larger |x| to CUDA's exp. CUDA's exp evaluates a degree-11 polynomial on
 * |r| <= ln2/2; here a 32-entry table of 2^(j/32) (with a low part, so the table adds no
 * rounding of its own) shrinks the reduced argument to |r| <= ln2/64, where a degree-6 Taylor
 * polynomial is exact to 4e-18 (r^7/7!): 12 double operations instead of about 17. float64
 * exp needs that to keep pace with memory on an H200: with CUDA's exp it reached 93-95% of
 * a device copy, the other kernels 97-99%. Measured on the host against long double expl
 * (5e7 random and boundary points): within 1 ulp. */
EXP_FN double exp_cuda_reduced(double x, const double *table) {
  const double to_k = 0x1.71547652b82fep+5;               /* 32 / ln2 */
  const double ln2_32_hi = 0x1.62e42fee00000p-6;          /* ln2 / 32, 32 bits: k * hi exact */
  const double ln2_32_lo = 0x1.a39ef35793c76p-38;         /* ln2 / 32 - hi */
  const double shifter = 0x1.8p52;                        /* rounds to an integer when added */
  const double kd_shifted = fma(x, to_k, shifter);        /* k = round(x * 32 / ln2) */
  const int64_t kbits = (int64_t)exp_f64_bits(kd_shifted);
  const int32_t k = (int32_t)(uint32_t)kbits;             /* the low word holds k */
  const double kd = kd_shifted - shifter;
  double r = fma(kd, -ln2_32_hi, x);                      /* exact */
  r = fma(kd, -ln2_32_lo, r);                             /* x - k ln2 / 32, |r| <= 0.0109 */
  /* e^r - 1 = r + r^2 (1/2 + r/6 + r^2 (1/24 + r/120 + r^2/720)) */
  const double r2 = r * r;
  const double a = fma(r, 0x1.5555555555555p-3, 0.5);
  double b = fma(r, 0x1.1111111111111p-7, 0x1.5555555555555p-5);
  b = fma(r2, 0x1.6c16c16c16c17p-10, b);
  const double p = fma(r2, fma(r2, b, a), r);
  const double t = table[2 * (k & 31)];                   /* 2^((k mod 32) / 32) = t + tl */
  const double tl = table[2 * (k & 31) + 1];
  double y = t + fma(t, p, tl);                           /* in [0.98, 2.03) */
  /* times 2^(k div 32): add to the exponent field; |x| < 707 keeps the result normal */
  const int64_t ybits = (int64_t)exp_f64_bits(y) + ((int64_t)(k >> 5) << 52);
  return exp_f64_from_bits((uint64_t)ybits);
}

EXP_FN double exp_cuda_exp(double x) {
  if (fabs(x) < 707.0) return exp_cuda_reduced(x, exp_cuda_exp2_table);
  return exp(x); /* NaN, infinities, overflow, underflow and subnormal results */
}

/* expf is CUDA's full-precision version (no --use_fast_math): within 2 ulp and correct at 0,
 * +-inf and NaN, unlike __expf. */
EXP_FN float exp_of_float(float x) { return expf(x); }
EXP_FN double exp_of_double(double x) { return exp_cuda_exp(x); }
#endif

#if !defined(__CUDACC__)
EXP_FN float exp_of_float(float x) { return exp_poly_f32(x); }
EXP_FN double exp_of_double(double x) { return exp_poly_f64(x); }
#endif

#endif
