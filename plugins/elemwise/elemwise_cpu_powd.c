/* elemwise_cpu_powd.c — pow for double with AVX-512, 8 elements a vector. Why not the math
 * library: on an AMD EPYC (Zen 4) glibc's vector pow (libmvec, _ZGVeN8vv_pow) takes 3.9 ns an
 * element against NumPy's 2.3 (Intel's SVML); this kernel takes 2.7 (bench/RESULTS.md).
 *
 * pow(x, y) = exp(y log(x)) with log(x) in double-double, since an error e in y log(x) is a
 * relative error e in the result and y log(x) reaches 708:
 *   x = 2^k z, z in [0.695, 1.391) (the split at OFF puts x near 1 at k = 0); the top 5
 *   mantissa bits of x - OFF pick one of 32 intervals, with invc ~ 1/c and -log(invc) as a
 *   head and a tail from tables held in registers (vpermt2pd); invc = 1 for the interval holding 1;
 *   r = z invc - 1 as r + r_lo (the product and its error by fma; p - 1 is exact), |r| <= 2^-6;
 *   log(x) = k ln2 + logc + log1p(r): the parts that need it summed with their rounding errors
 *   kept (k ln2hi + logc is exact: both are multiples of 2^-42), -r^2/2 split by fma, the rest
 *   r^3 Q(r) (Taylor, degree 11 in all: 2^-69 relative), r_lo (1 - r + r^2 - r^3);
 *   y log(x) = ehi + elo; exp of it: kd = round(32 ehi / ln2), f = ehi - kd ln2/32 + elo,
 *   |f| <= ln2/64, 2^(kd/32) = 2^(kd >> 5) T[j] (1 + tail[j]) with j = kd & 31 from tables held
 *   in registers (vpermt2pd), exp(f) - 1 = f + f^2 P(f) (Taylor, degree 7: 2^-67);
 *   the result T' (1 + tail + f + f^2 P) rounded once, T' = T[j] 2^(kd >> 5).
 * Worst error measured 0.53 ulp (tests/unit/test_powd_fast.c against powl). Lanes the formula
 * does not cover (x not a positive normal number; y NaN or infinite; |y log(x)| > 708, where the
 * result nears overflow or turns subnormal) are found by class tests and a compare per 8 and
 * recomputed by libm's pow, so every special case is C's. The constants come from
 * powd_tables.py. */
#include "elemwise_cpu_powd.h"
#include "elemwise_cpu_avx512.h"

#include <math.h>

#if EW_AVX512_HAVE_KERNELS

#define POWD_OFF 0x3fe6400000000000LL /* the bits of 0.6953125 */
#define POWD_EXP_LIMIT 708.0          /* |y log(x)| beyond: libm (overflow, subnormal results) */
#define POWD_LN2_HI 0x1.62e42fefa3800p-1
#define POWD_LN2_LO 0x1.ef35793c76730p-45
#define POWD_INV_LN2_N 0x1.71547652b82fep+5
#define POWD_LN2_N_HI 0x1.62e42fefa0000p-6
#define POWD_LN2_N_LO 0x1.cf79abc9e3b3ap-45
static const double POWD_INV_C[32] = {
    0x1.6c16c16c16c17p+0, 0x1.642c8590b2164p+0, 0x1.5c9882b931057p+0,
    0x1.5555555555555p+0, 0x1.4e5e0a72f0539p+0, 0x1.47ae147ae147bp+0,
    0x1.4141414141414p+0, 0x1.3b13b13b13b14p+0, 0x1.3521cfb2b78c1p+0,
    0x1.2f684bda12f68p+0, 0x1.29e4129e4129ep+0, 0x1.2492492492492p+0,
    0x1.1f7047dc11f70p+0, 0x1.1a7b9611a7b96p+0, 0x1.15b1e5f75270dp+0,
    0x1.1111111111111p+0, 0x1.0c9714fbcda3bp+0, 0x1.0842108421084p+0,
    0x1.0410410410410p+0, 0x1.0000000000000p+0, 0x1.f07c1f07c1f08p-1,
    0x1.e1e1e1e1e1e1ep-1, 0x1.d41d41d41d41dp-1, 0x1.c71c71c71c71cp-1,
    0x1.bacf914c1bad0p-1, 0x1.af286bca1af28p-1, 0x1.a41a41a41a41ap-1,
    0x1.999999999999ap-1, 0x1.8f9c18f9c18fap-1, 0x1.8618618618618p-1,
    0x1.7d05f417d05f4p-1, 0x1.745d1745d1746p-1,
};
static const double POWD_LOG_C[32] = {
    -0x1.68ac83e9c7000p-2, -0x1.522ae0738a000p-2, -0x1.3c25277333000p-2,
    -0x1.269621134e000p-2, -0x1.1178e8227e000p-2, -0x1.f991c6cb3c000p-3,
    -0x1.d1037f2656000p-3, -0x1.a93ed3c8ae000p-3, -0x1.823c16551a000p-3,
    -0x1.5bf406b544000p-3, -0x1.365fcb015a000p-3, -0x1.1178e8227e000p-3,
    -0x1.da72763844000p-4, -0x1.9335e5d594000p-4, -0x1.4d3115d208000p-4,
    -0x1.08598b59e4000p-4, -0x1.894aa149f8000p-5, -0x1.0415d89e78000p-5,
    -0x1.0205658930000p-6, 0x0.0p+0, 0x1.f829b0e780000p-6,
    0x1.f0a30c0118000p-5, 0x1.6f0d28ae58000p-4, 0x1.e27076e2b0000p-4,
    0x1.29552f8200000p-3, 0x1.5ff3070a7a000p-3, 0x1.9525a9cf46000p-3,
    0x1.c8ff7c79aa000p-3, 0x1.fb9186d5e4000p-3, 0x1.1675cababa000p-2,
    0x1.2e8e2bae12000p-2, 0x1.4618bc21c6000p-2,
};
static const double POWD_LOG_C_TAIL[32] = {
    0x1.7acd66c548a30p-44, -0x1.eba708164c759p-45, -0x1.83454b606bd5cp-46,
    0x1.1ba1f10522625p-44, -0x1.1e9b8ce2d07f2p-44, 0x1.90b84cd7cc834p-44,
    0x1.8527e75b6f6e4p-47, 0x1.86a4350562169p-45, -0x1.e02db9a631e83p-46,
    0x1.28023eb68981cp-46, 0x1.fd720afb9691bp-44, -0x1.1e778ce2d07f2p-45,
    -0x1.a79401fa71733p-46, -0x1.30f5c3abd47dap-45, 0x1.53e2582f4e1efp-48,
    0x1.7e9dd7009902cp-46, -0x1.9a55a8be97661p-44, 0x1.ddfc7f461c516p-44,
    -0x1.60dd27c8e8417p-44, 0x0.0p+0, 0x1.97c267c7e09e4p-45,
    -0x1.d579e83368e91p-45, -0x1.4b2241b664613p-44, -0x1.a2c2c2af0003cp-45,
    -0x1.5bd67f4471dfcp-44, -0x1.8546f183bebf2p-44, -0x1.294937d9f158fp-44,
    -0x1.7814f689f8434p-45, -0x1.d6b2aab993c87p-47, 0x1.83c0e731f55c4p-44,
    -0x1.6791e99b72bd8p-45, -0x1.3e02f484c84ccp-46,
};
static const double POWD_EXP2_J[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0,
    0x1.11301d0125b51p+0, 0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0,
    0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0, 0x1.306fe0a31b715p+0,
    0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0,
    0x1.6247eb03a5585p+0, 0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0,
    0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0, 0x1.8ace5422aa0dbp+0,
    0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0,
    0x1.cb720dcef9069p+0, 0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0,
    0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};
static const double POWD_EXP2_J_TAIL[32] = {
    0x0.0p+0, 0x1.cd2523567f613p-55, 0x1.79aa65d837b6dp-54,
    -0x1.556522a2fbd0ep-54, -0x1.01b15eaa59348p-55, 0x1.aecf73e3a2f60p-54,
    0x1.68efde3a8a894p-54, 0x1.2f7e16d09ab31p-55, 0x1.34d754db0abb6p-55,
    -0x1.24aedcc4b5068p-54, 0x1.59f48a72a4c6dp-55, 0x1.363ed60c2ac11p-59,
    0x1.690cebb7aafb0p-56, -0x1.8dec6bd0f385fp-56, 0x1.063e1e21c5409p-54,
    -0x1.c33c53bef4da8p-55, -0x1.3b3efbf5e2228p-54, -0x1.81f647e5a3ecfp-56,
    -0x1.b32dcb94da51dp-56, -0x1.369b6f13b3734p-54, 0x1.db72fc1f0eab4p-55,
    -0x1.da9b88b6c1e29p-58, 0x1.1affc2b91ce27p-56, -0x1.1bbd1d3bcbb15p-54,
    0x1.c1a7792cb3387p-55, -0x1.8d6f438ad9334p-57, 0x1.36eae30af0cb3p-56,
    0x1.76b2c6c921968p-57, 0x1.4a385a63d07a7p-56, -0x1.2d52107b43e1fp-55,
    -0x1.ff7128fd391f0p-55, 0x1.a64a931d185eep-55,
};
/* log1p(r) = r - r^2/2 + r^3 Q(r), Q(r) = 1/3 - r/4 + ... + r^8/11 (Taylor) */
static const double POWD_Q[9] = {1.0 / 3, -1.0 / 4, 1.0 / 5,  -1.0 / 6, 1.0 / 7,
                                 -1.0 / 8, 1.0 / 9, -1.0 / 10, 1.0 / 11};
/* log1p(r + r_lo) - log1p(r) = r_lo / (1 + r) = r_lo (1 - r + r^2 - r^3), to 2^-77 */
static const double POWD_R_LO[4] = {1.0, -1.0, 1.0, -1.0};
/* exp(f) - 1 = f + f^2 P(f), P(f) = 1/2 + f/6 + ... + f^5/5040 (Taylor) */
static const double POWD_P[6] = {1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040};

/* The five tables of 32 entries, four registers each */
typedef struct powd_tables {
  __m512d inv_c[4], log_c[4], log_c_tail[4], exp2_j[4], exp2_j_tail[4];
} powd_tables;

/* table[j & 31] (two vpermt2pd, which read bits 0..3, and a blend on bit 4) */
EW_AVX512_TARGET static inline __m512d powd_lookup32(const __m512d table[4], __m512i j) {
  const __m512d low = _mm512_permutex2var_pd(table[0], j, table[1]);
  const __m512d high = _mm512_permutex2var_pd(table[2], j, table[3]);
  return _mm512_mask_blend_pd(_mm512_test_epi64_mask(j, _mm512_set1_epi64(16)), low, high);
}

/* Horner's scheme over c[0..n-1] (lowest first) */
EW_AVX512_TARGET static inline __m512d powd_poly(const double *c, int n, __m512d v) {
  __m512d p = _mm512_set1_pd(c[n - 1]);
  for (int i = n - 2; i >= 0; i--) p = _mm512_fmadd_pd(p, v, _mm512_set1_pd(c[i]));
  return p;
}

/* pow of 8 lanes; *special gets the lanes the formula does not cover */
EW_AVX512_TARGET static inline __m512d powd8(__m512d x, __m512d y, const powd_tables *t, __mmask8 *special) {
  const __m512d one = _mm512_set1_pd(1.0);
  /* log(x) = lhi + llo */
  const __m512i bits = _mm512_castpd_si512(x);
  const __m512i split = _mm512_sub_epi64(bits, _mm512_set1_epi64(POWD_OFF));
  const __m512i interval = _mm512_srli_epi64(split, 47); /* its low 5 bits: the top mantissa bits */
  const __m512i k_bits = _mm512_and_si512(split, _mm512_set1_epi64((long long)0xfff0000000000000ULL));
  const __m512d z = _mm512_castsi512_pd(_mm512_sub_epi64(bits, k_bits));
  const __m512d k = _mm512_cvtepi64_pd(_mm512_srai_epi64(split, 52));
  const __m512d invc = powd_lookup32(t->inv_c, interval);
  const __m512d logc = powd_lookup32(t->log_c, interval);
  const __m512d logc_tail = powd_lookup32(t->log_c_tail, interval);
  const __m512d product = _mm512_mul_pd(z, invc);
  const __m512d r_lo = _mm512_fmsub_pd(z, invc, product);
  const __m512d r = _mm512_sub_pd(product, one);
  const __m512d t1 = _mm512_fmadd_pd(k, _mm512_set1_pd(POWD_LN2_HI), logc); /* exact */
  const __m512d t2 = _mm512_add_pd(t1, r);
  const __m512d lo1 = _mm512_fmadd_pd(k, _mm512_set1_pd(POWD_LN2_LO), logc_tail);
  const __m512d lo2 = _mm512_add_pd(_mm512_sub_pd(t1, t2), r); /* |t1| >= |r| or t1 = 0 */
  const __m512d half_r = _mm512_mul_pd(r, _mm512_set1_pd(-0.5));
  const __m512d square = _mm512_mul_pd(half_r, r);               /* -r^2/2 rounded */
  const __m512d lo3 = _mm512_fmsub_pd(half_r, r, square);        /* and its error */
  const __m512d hi = _mm512_add_pd(t2, square);
  const __m512d lo4 = _mm512_add_pd(_mm512_sub_pd(t2, hi), square);
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d rounding = _mm512_add_pd(_mm512_add_pd(lo1, lo2), _mm512_add_pd(lo3, lo4));
  const __m512d lo = _mm512_fmadd_pd(_mm512_mul_pd(r2, r), powd_poly(POWD_Q, 9, r),
                                     _mm512_fmadd_pd(r_lo, powd_poly(POWD_R_LO, 4, r), rounding));
  const __m512d lhi = _mm512_add_pd(hi, lo);
  const __m512d llo = _mm512_add_pd(_mm512_sub_pd(hi, lhi), lo);
  /* y log(x) = ehi + elo */
  const __m512d ehi = _mm512_mul_pd(y, lhi);
  const __m512d elo = _mm512_fmadd_pd(y, llo, _mm512_fmsub_pd(y, lhi, ehi));
  /* exp(ehi + elo) */
  const __m512d kd = _mm512_roundscale_pd(_mm512_mul_pd(ehi, _mm512_set1_pd(POWD_INV_LN2_N)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i ki = _mm512_cvtpd_epi64(kd);
  const __m512d f = _mm512_add_pd(
      _mm512_fnmadd_pd(kd, _mm512_set1_pd(POWD_LN2_N_LO), _mm512_fnmadd_pd(kd, _mm512_set1_pd(POWD_LN2_N_HI), ehi)),
      elo);
  const __m512d exp2_j = powd_lookup32(t->exp2_j, ki); /* j = kd & 31 */
  const __m512d tail = powd_lookup32(t->exp2_j_tail, ki);
  const __m512d sum = _mm512_fmadd_pd(_mm512_mul_pd(f, f), powd_poly(POWD_P, 6, f), _mm512_add_pd(f, tail));
  /* T[j] 2^(kd >> 5) by adding to its exponent: a normal number for |ehi| <= POWD_EXP_LIMIT */
  const __m512d scale = _mm512_castsi512_pd(
      _mm512_add_epi64(_mm512_castpd_si512(exp2_j), _mm512_slli_epi64(_mm512_srai_epi64(ki, 5), 52)));
  /* x: NaN, zero, infinite, subnormal or negative (0xff but positive normal); y NaN or infinite
   * (0x99); |ehi| past the limit or NaN */
  *special = _mm512_fpclass_pd_mask(x, 0xff) | _mm512_fpclass_pd_mask(y, 0x99) |
             _mm512_cmp_pd_mask(_mm512_abs_pd(ehi), _mm512_set1_pd(POWD_EXP_LIMIT), _CMP_NLE_UQ);
  return _mm512_fmadd_pd(scale, sum, scale);
}

/* 8 lanes: x and y readable for 8 doubles, z written once, after every lane is computed */
EW_AVX512_TARGET static inline void powd8_store(double *z, const double *x, const double *y,
                                             const powd_tables *t) {
  __mmask8 special;
  __m512d result = powd8(_mm512_loadu_pd(x), _mm512_loadu_pd(y), t, &special);
  if (__builtin_expect(special != 0, 0)) {
    double lanes[8];
    _mm512_storeu_pd(lanes, result);
    for (unsigned left = special; left != 0; left &= left - 1) {
      const int i = __builtin_ctz(left);
      lanes[i] = pow(x[i], y[i]);
    }
    result = _mm512_loadu_pd(lanes);
  }
  _mm512_storeu_pd(z, result);
}

EW_AVX512_TARGET static void powd_avx512(double *z, const double *x, const double *y, int64_t n) {
  powd_tables t;
  int64_t i = 0;
  for (int r = 0; r < 4; r++) {
    t.inv_c[r] = _mm512_loadu_pd(POWD_INV_C + 8 * r);
    t.log_c[r] = _mm512_loadu_pd(POWD_LOG_C + 8 * r);
    t.log_c_tail[r] = _mm512_loadu_pd(POWD_LOG_C_TAIL + 8 * r);
    t.exp2_j[r] = _mm512_loadu_pd(POWD_EXP2_J + 8 * r);
    t.exp2_j_tail[r] = _mm512_loadu_pd(POWD_EXP2_J_TAIL + 8 * r);
  }
  for (; i + 8 <= n; i += 8) powd8_store(z + i, x + i, y + i, &t);
  if (i < n) { /* the last few, padded with 1.0 */
    const __mmask8 m = (__mmask8)((1u << (n - i)) - 1);
    double xs[8], ys[8], zs[8];
    _mm512_storeu_pd(xs, _mm512_mask_loadu_pd(_mm512_set1_pd(1.0), m, x + i));
    _mm512_storeu_pd(ys, _mm512_mask_loadu_pd(_mm512_set1_pd(1.0), m, y + i));
    powd8_store(zs, xs, ys, &t);
    _mm512_mask_storeu_pd(z + i, m, _mm512_loadu_pd(zs));
  }
}

#endif

void ew_cpu_powd_fast(double *z, const double *x, const double *y, int64_t n) {
#if EW_AVX512_HAVE_KERNELS
  powd_avx512(z, x, y, n);
#else
  for (int64_t i = 0; i < n; i++) z[i] = pow(x[i], y[i]); /* unreachable: never available */
#endif
}
