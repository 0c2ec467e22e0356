/* elemwise_cpu_powf.c — pow for float computed in double with AVX-512, 16 elements a step as
 * two vectors of 8 doubles. Why not the math library: on an AMD EPYC (Zen 4) glibc's vector
 * powf (libmvec, _ZGVeN16vv_powf) takes 1.94 ns an element and SLEEF's (Sleef_powf16_u10)
 * 2.40, against NumPy's 0.71 (Intel's SVML); this kernel takes 0.85 (bench/RESULTS.md).
 *
 * In double the arithmetic has 29 bits to spare, so short polynomials and one rounding at the
 * end give 0.504 ulp at worst (no case past 1 ulp in 100 M tested):
 *   x = 2^k m, m in [0.699, 1.398), split at the bits of 0.69921875 so that x near 1 has k = 0;
 *   the top 4 mantissa bits of that split pick one of 16 intervals, with 1/c and log2(c) from
 *   tables held in two registers each (vpermt2pd); the interval holding 1 has c = 1, so
 *   log2(x) near 1 keeps a small relative error;
 *   r = m / c - 1 by one fma (|r| < 0.0297), log2(x) = k + log2(c) + r Q(r), Q of degree 5
 *   (minimax, relative error 2^-38); v = y log2(x);
 *   2^v = 2^(N / 16) 2^f with N = round(16 v) and |f| <= 1/32: 2^(N mod 16 / 16) from a third
 *   table, 2^f by a degree-4 minimax polynomial (2^-37), and vscalefpd for the power of two,
 *   which also gives infinity or zero for |v| past the float range; the conversion to float
 *   rounds once, subnormal results included.
 * Lanes the formula does not cover (x zero, negative, infinite or NaN; y infinite or NaN) are
 * found by one class test per 16 and recomputed by libm's powf, so every special case is C's.
 * Subnormal x needs nothing: it is a normal double. The constants come from powf_tables.py. */
#include "elemwise_cpu_powf.h"
#include "elemwise_cpu_avx512.h"

#include <math.h>

#if EW_AVX512_HAVE_KERNELS

/* 1/c and log2(c) of the 16 intervals [0.69921875 + i/16 2^e ...) of m */
static const double POWF_INV_C[16] = {
    0x1.661ec6a5122f9p+0, 0x1.571ed3c506b3ap+0, 0x1.49539e3b2d067p+0, 0x1.3c995a47babe7p+0,
    0x1.30d190130d190p+0, 0x1.25e22708092f1p+0, 0x1.1bb4a4046ed29p+0, 0x1.12358e75d3033p+0,
    0x1.0953f39010954p+0, 0x1.0000000000000p+0, 0x1.e573ac901e574p-1, 0x1.ca4b3055ee191p-1,
    0x1.b2036406c80d9p-1, 0x1.9c2d14ee4a102p-1, 0x1.886e5f0abb04ap-1, 0x1.767dce434a9b1p-1};
static const double POWF_LOG2_C[16] = {
    -0x1.efec61b011f85p-2, -0x1.b0b67f4f46812p-2, -0x1.7418acebbf18fp-2, -0x1.39de8e1559f6ep-2,
    -0x1.01d9bbcfa61d4p-2, -0x1.97c1cb13c7ec0p-3, -0x1.2f9e32d5bfdd1p-3, -0x1.960caf9abb7c1p-4,
    -0x1.a6f9c377dd31dp-5, 0x0.0p+0,              0x1.3aa2fdd27f1bfp-4, 0x1.476a9f983f74dp-3,
    0x1.e840be74e6a4dp-3,  0x1.406463b1b0448p-2,  0x1.88e9c72e0b224p-2, 0x1.ce0a4923a587dp-2};
/* 2^(j / 16) */
static const double POWF_EXP2_J[16] = {
    0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
/* log2(1 + r) = r Q(r), Q(r) = Q0 + Q1 r + ... + Q5 r^5 for |r| <= 0.0297 */
static const double POWF_Q[6] = {0x1.71547652bcfc0p+0,  -0x1.71547652d2935p-1, 0x1.ec7097c2f2a24p-2,
                                 -0x1.71546e91a0ac3p-2, 0x1.27bdf953ff604p-2,  -0x1.ecff097be7f21p-3};
/* 2^f = 1 + f P(f), P(f) = P1 + P2 f + P3 f^2 + P4 f^3 for |f| <= 1/32 */
static const double POWF_P[4] = {0x1.62e42fee461a2p-1, 0x1.ebfbdffb53f9cp-3, 0x1.c6b3487ff36b7p-5,
                                 0x1.3b2ab6f8e3f81p-7};
#define POWF_SPLIT 0x3fe6600000000000LL /* the bits of 0.69921875 */

/* The six tables, two registers each */
typedef struct powf_tables {
  __m512d inv_c[2], log2_c[2], exp2_j[2];
} powf_tables;

/* powf of 8 lanes, x > 0 and finite, y finite, both already in double */
EW_AVX512_TARGET static inline __m256 powf8(__m512d x, __m512d y, const powf_tables *t) {
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512i bits = _mm512_castpd_si512(x);
  const __m512i split = _mm512_sub_epi64(bits, _mm512_set1_epi64(POWF_SPLIT));
  const __m512i interval = _mm512_srli_epi64(split, 48); /* vpermt2pd reads bits 0..3 */
  const __m512d k = _mm512_cvtepi64_pd(_mm512_srai_epi64(split, 52));
  const __m512i k_bits = _mm512_and_si512(split, _mm512_set1_epi64((long long)0xfff0000000000000ULL));
  const __m512d m = _mm512_castsi512_pd(_mm512_sub_epi64(bits, k_bits));
  const __m512d inv_c = _mm512_permutex2var_pd(t->inv_c[0], interval, t->inv_c[1]);
  const __m512d log2_c = _mm512_permutex2var_pd(t->log2_c[0], interval, t->log2_c[1]);
  const __m512d r = _mm512_fmsub_pd(m, inv_c, one);
  __m512d q = _mm512_set1_pd(POWF_Q[5]);
  for (int i = 4; i >= 0; i--) q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(POWF_Q[i]));
  const __m512d log2_x = _mm512_fmadd_pd(r, q, _mm512_add_pd(k, log2_c));
  const __m512d v = _mm512_mul_pd(y, log2_x);
  /* n = N / 16 rounded to 1/16 (vrndscalepd keeps 4 fraction bits), f = v - n exactly */
  const __m512d n = _mm512_roundscale_pd(v, (4 << 4) | _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d f = _mm512_sub_pd(v, n);
  /* v + 1.5 2^48 has ulp 1/16, so its low mantissa bits are N mod 16 (the same rounding) */
  const __m512d shifted = _mm512_add_pd(v, _mm512_set1_pd(0x1.8p48));
  const __m512d exp2_j = _mm512_permutex2var_pd(t->exp2_j[0], _mm512_castpd_si512(shifted), t->exp2_j[1]);
  __m512d p = _mm512_set1_pd(POWF_P[3]);
  for (int i = 2; i >= 0; i--) p = _mm512_fmadd_pd(p, f, _mm512_set1_pd(POWF_P[i]));
  p = _mm512_fmadd_pd(p, f, one);
  /* times 2^floor(n) = 2^((N - j) / 16); past the float range it is infinity or zero */
  return _mm512_cvtpd_ps(_mm512_scalef_pd(_mm512_mul_pd(exp2_j, p), n));
}

/* 16 lanes: x and y readable for 16 floats, z written once, after every lane is computed */
EW_AVX512_TARGET static inline void powf16(float *z, const float *x, const float *y, const powf_tables *t) {
  /* x NaN, zero, infinite or negative (0xdf); y NaN or infinite (0x99) */
  const __mmask16 special = _mm512_fpclass_ps_mask(_mm512_loadu_ps(x), 0xdf) |
                            _mm512_fpclass_ps_mask(_mm512_loadu_ps(y), 0x99);
  __m256 low = powf8(_mm512_cvtps_pd(_mm256_loadu_ps(x)), _mm512_cvtps_pd(_mm256_loadu_ps(y)), t);
  __m256 high = powf8(_mm512_cvtps_pd(_mm256_loadu_ps(x + 8)), _mm512_cvtps_pd(_mm256_loadu_ps(y + 8)), t);
  if (__builtin_expect(special != 0, 0)) {
    float lanes[16];
    _mm256_storeu_ps(lanes, low);
    _mm256_storeu_ps(lanes + 8, high);
    for (unsigned left = special; left != 0; left &= left - 1) {
      const int j = __builtin_ctz(left);
      lanes[j] = powf(x[j], y[j]);
    }
    low = _mm256_loadu_ps(lanes);
    high = _mm256_loadu_ps(lanes + 8);
  }
  _mm256_storeu_ps(z, low);
  _mm256_storeu_ps(z + 8, high);
}

EW_AVX512_TARGET static void powf_avx512(float *z, const float *x, const float *y, int64_t n) {
  powf_tables t;
  int64_t i = 0;
  t.inv_c[0] = _mm512_loadu_pd(POWF_INV_C), t.inv_c[1] = _mm512_loadu_pd(POWF_INV_C + 8);
  t.log2_c[0] = _mm512_loadu_pd(POWF_LOG2_C), t.log2_c[1] = _mm512_loadu_pd(POWF_LOG2_C + 8);
  t.exp2_j[0] = _mm512_loadu_pd(POWF_EXP2_J), t.exp2_j[1] = _mm512_loadu_pd(POWF_EXP2_J + 8);
  for (; i + 16 <= n; i += 16) powf16(z + i, x + i, y + i, &t);
  if (i < n) { /* the last few, padded with 1.0 */
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    float xs[16], ys[16], zs[16];
    _mm512_storeu_ps(xs, _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, x + i));
    _mm512_storeu_ps(ys, _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, y + i));
    powf16(zs, xs, ys, &t);
    _mm512_mask_storeu_ps(z + i, m, _mm512_loadu_ps(zs));
  }
}

#endif

void ew_cpu_powf_fast(float *z, const float *x, const float *y, int64_t n) {
#if EW_AVX512_HAVE_KERNELS
  powf_avx512(z, x, y, n);
#else
  for (int64_t i = 0; i < n; i++) z[i] = powf(x[i], y[i]); /* unreachable: never available */
#endif
}
