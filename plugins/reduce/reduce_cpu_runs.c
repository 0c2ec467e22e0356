/* reduce_cpu_runs.c — the reduce plugin's CPU runs, per dtype: a sum, max or min along one dim
 * for one output (contiguous runs vectorized) and for a block of adjacent outputs at once
 * (lanes: vectorized across them), each computing exactly the same tree or order whichever
 * runs. The loops that vectorize are built for AVX-512, AVX2 and the baseline. */
#include <math.h>
#include <string.h>

#include "reduce_cpu.h"

/* ---- runs along one dim, per dtype ---------------------------------------------------- */

#define LOAD_PLAIN(v) (v)
#define LOAD_HALF(v) dlop_half_to_float(v)
#define LOAD_BF16(v) dlop_bfloat16_to_float(v)

/* Pairwise summation (as NumPy): 8 accumulators below 128 elements, halves above; error
 * O(log n) ulps. Accumulator k takes elements k, k + 8, k + 16, ...: on a contiguous run the 8
 * accumulators are one or two vectors (gcc's vector extensions, lanes exact the same as the
 * scalar loop's), in a leaf built for AVX-512, AVX2 and the baseline. The lane version below
 * computes the same tree for each of w outputs. */
#define PAIRWISE_STRIDED(fname, T, A, LOAD)                                                  \
  static A fname(const T *x, int64_t s, int64_t n) {                                        \
    if (n < 8) {                                                                            \
      A r = (A)0;                                                                           \
      for (int64_t i = 0; i < n; i++) r += LOAD(x[i * s]);                                  \
      return r;                                                                             \
    }                                                                                       \
    if (n <= 128) {                                                                         \
      A a[8];                                                                               \
      int64_t i;                                                                            \
      for (int k = 0; k < 8; k++) a[k] = LOAD(x[k * s]);                                    \
      for (i = 8; i + 8 <= n; i += 8)                                                       \
        for (int k = 0; k < 8; k++) a[k] += LOAD(x[(i + k) * s]);                           \
      A r = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));              \
      for (; i < n; i++) r += LOAD(x[i * s]);                                               \
      return r;                                                                             \
    }                                                                                       \
    int64_t half = n / 2;                                                                   \
    half -= half % 8;                                                                       \
    return fname(x, s, half) + fname(x + half * s, s, n - half);                            \
  }

/* The contiguous version: VEC is a 32-byte vector of A, so the 8 accumulators are one (float)
 * or two (double) of them. */
#define PAIRWISE_UNIT(fname, T, A, LOAD, VEC, VECU)                                          \
  DLOP_CPU_MULTIVERSION static A fname##_leaf(const T *x, int64_t n) {                      \
    enum { PER = sizeof(VEC) / sizeof(A) };                                                 \
    A lane[8];                                                                              \
    VEC a0, a1;                                                                             \
    int64_t i;                                                                              \
    if (n < 8) {                                                                            \
      A r = (A)0;                                                                           \
      for (i = 0; i < n; i++) r += LOAD(x[i]);                                              \
      return r;                                                                             \
    }                                                                                       \
    REDUCE_LOAD8(a0, a1, x, lane, T, A, LOAD, VECU, PER);                                   \
    for (i = 8; i + 8 <= n; i += 8) {                                                       \
      VEC v0, v1;                                                                           \
      REDUCE_LOAD8(v0, v1, x + i, lane, T, A, LOAD, VECU, PER);                             \
      a0 += v0;                                                                             \
      if (PER == 4) a1 += v1;                                                               \
    }                                                                                       \
    for (int k = 0; k < 8; k++) lane[k] = k < PER ? a0[k % PER] : a1[k % PER];             \
    A r = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])); \
    for (; i < n; i++) r += LOAD(x[i]);                                                     \
    return r;                                                                               \
  }                                                                                         \
  static A fname(const T *x, int64_t n) {                                                   \
    if (n <= 128) return fname##_leaf(x, n);                                                \
    int64_t half = n / 2;                                                                   \
    half -= half % 8;                                                                       \
    return fname(x, half) + fname(x + half, n - half);                                      \
  }

/* The same tree for w outputs side by side: element (i, j) at x[i * s + j]. Accumulator k
 * takes rows k, k + 8, k + 16, ... in that order, as in the scalar version; a pass over the
 * block's outputs adds four of its rows at once (k, k + 8, k + 16, k + 24: the same additions
 * in the same order), so that the accumulators are loaded and stored once per four rows and
 * four rows stream from memory together. A sum over the first axis of 256^3 doubles, in a
 * harness on a 2-core EPYC VM, took 0.82 of the time of one row a pass (which prefetched the
 * row two on) at 2 threads, 27 GB/s against 22 (a streaming read reaches 34), and 0.72 at one
 * thread; prefetches do not help the passes of four. */
#define PAIRWISE_LANES(fname, T, A, LOAD)                                                     \
  DLOP_CPU_MULTIVERSION static void fname##_leaf(const T *x, int64_t s, int64_t n, int64_t w, \
                                                 A *out) {                                  \
    if (n < 8) {                                                                            \
      for (int64_t j = 0; j < w; j++) out[j] = (A)0;                                        \
      for (int64_t i = 0; i < n; i++)                                                       \
        for (int64_t j = 0; j < w; j++) out[j] += LOAD(x[i * s + j]);                       \
      return;                                                                               \
    }                                                                                       \
    A a[8][REDUCE_CPU_LANE_BYTES / sizeof(A)];                                              \
    int64_t i;                                                                              \
    for (int k = 0; k < 8; k++)                                                             \
      for (int64_t j = 0; j < w; j++) a[k][j] = LOAD(x[k * s + j]);                         \
    for (i = 8; i + 32 <= n; i += 32)                                                       \
      for (int k = 0; k < 8; k++) {                                                         \
        const T *x0 = x + (i + k) * s, *x1 = x0 + 8 * s, *x2 = x1 + 8 * s, *x3 = x2 + 8 * s; \
        for (int64_t j = 0; j < w; j++)                                                     \
          a[k][j] = (((a[k][j] + LOAD(x0[j])) + LOAD(x1[j])) + LOAD(x2[j])) + LOAD(x3[j]);  \
      }                                                                                     \
    for (; i + 8 <= n; i += 8)                                                              \
      for (int k = 0; k < 8; k++)                                                           \
        for (int64_t j = 0; j < w; j++) a[k][j] += LOAD(x[(i + k) * s + j]);               \
    for (int64_t j = 0; j < w; j++)                                                         \
      out[j] = ((a[0][j] + a[1][j]) + (a[2][j] + a[3][j])) +                                \
               ((a[4][j] + a[5][j]) + (a[6][j] + a[7][j]));                                 \
    for (; i < n; i++)                                                                      \
      for (int64_t j = 0; j < w; j++) out[j] += LOAD(x[i * s + j]);                         \
  }                                                                                         \
  static void fname(const T *x, int64_t s, int64_t n, int64_t w, A *out) {                  \
    if (n <= 128) {                                                                         \
      fname##_leaf(x, s, n, w, out);                                                        \
      return;                                                                               \
    }                                                                                       \
    A right[w]; /* a row per level: 6 KiB at most (2 KiB rows up to 1024 rows, else 1 KiB) */ \
    int64_t half = n / 2;                                                                   \
    half -= half % 8;                                                                       \
    fname(x, s, half, w, out);                                                              \
    fname(x + half * s, s, n - half, w, right);                                             \
    for (int64_t j = 0; j < w; j++) out[j] = out[j] + right[j];                             \
  }

/* max and min of floats, as a loop keeping r and taking each next v in turn:
 *   r = (r == r && (v >= r || v != v)) ? v : r      (max; min with <=)
 * NaN propagates (the first NaN wins: once r is NaN nothing replaces it), and of equal values
 * (-0.0, 0.0) the later wins, as in NumPy 2's float loops. The contiguous version gets the same
 * answer faster: independent NaN-sticky lanes (one or four 32-byte vectors of gcc's vector
 * extensions: its vectorizer does not turn this select into vector code by itself) find the
 * extreme value and whether there is a NaN; only then, or when the extreme is a zero (whose
 * sign depends on which zero came last), does it look at the elements again, in order. VEC is
 * a 32-byte vector of A, MASK the integer vector its comparisons give. */
#define FLOAT_EXTREME(name, T, A, VEC, VECU, MASK, LOAD, BETTER, BETTER_OR_EQUAL)             \
  static A name##_in_order(const T *x, int64_t s, int64_t n) {                              \
    A r = LOAD(x[0]);                                                                       \
    for (int64_t i = 1; i < n; i++) { /* & and |: a select, no branch to mispredict */      \
      A v = LOAD(x[i * s]);                                                                 \
      r = ((r == r) & (BETTER_OR_EQUAL(v, r) | (v != v))) ? v : r;                          \
    }                                                                                       \
    return r;                                                                               \
  }                                                                                         \
  DLOP_CPU_MULTIVERSION static A name##_unit(const T *x, int64_t n) {                       \
    enum { PER = sizeof(VEC) / sizeof(A), LANES = 4 * PER };                                \
    VEC m0, m1, m2, m3;                                                                     \
    A lane[LANES];                                                                          \
    int64_t i;                                                                              \
    if (n < 2 * PER) return name##_in_order(x, 1, n);                                       \
    if (n < 2 * LANES) { /* a short run: one vector */                                      \
      REDUCE_LOAD1V(m0, x, lane, T, A, LOAD, VECU, PER);                                    \
      for (i = PER; i + PER <= n; i += PER) {                                               \
        VEC v0;                                                                             \
        REDUCE_LOAD1V(v0, x + i, lane, T, A, LOAD, VECU, PER);                              \
        REDUCE_VSTEP(m0, v0, BETTER, VEC, MASK);                                            \
      }                                                                                     \
      for (int k = 0; k < PER; k++) lane[k] = m0[k];                                        \
    } else {                                                                                \
      REDUCE_LOAD4V(m0, m1, m2, m3, x, lane, T, A, LOAD, VECU, PER);                        \
      for (i = LANES; i + LANES <= n; i += LANES) {                                         \
        VEC v0, v1, v2, v3;                                                                 \
        REDUCE_LOAD4V(v0, v1, v2, v3, x + i, lane, T, A, LOAD, VECU, PER);                  \
        REDUCE_VSTEP(m0, v0, BETTER, VEC, MASK);                                            \
        REDUCE_VSTEP(m1, v1, BETTER, VEC, MASK);                                            \
        REDUCE_VSTEP(m2, v2, BETTER, VEC, MASK);                                            \
        REDUCE_VSTEP(m3, v3, BETTER, VEC, MASK);                                            \
      }                                                                                     \
      /* the extreme and NaN-ness of the four in one (the steps are NaN-sticky) */          \
      REDUCE_VSTEP(m0, m1, BETTER, VEC, MASK);                                              \
      REDUCE_VSTEP(m2, m3, BETTER, VEC, MASK);                                              \
      REDUCE_VSTEP(m0, m2, BETTER, VEC, MASK);                                              \
      for (int k = 0; k < PER; k++) lane[k] = m0[k];                                        \
    }                                                                                       \
    for (; i < n; i++) {                                                                    \
      A x_i = LOAD(x[i]);                                                                   \
      lane[0] = (BETTER(x_i, lane[0]) | (x_i != x_i)) ? x_i : lane[0];                      \
    }                                                                                       \
    A r = lane[0];                                                                          \
    int nan = 0;                                                                            \
    for (int k = 0; k < PER; k++) {                                                         \
      nan |= lane[k] != lane[k];                                                            \
      r = BETTER(lane[k], r) ? lane[k] : r;                                                 \
    }                                                                                       \
    if (nan) return name##_in_order(x, 1, n);                                               \
    if (r == 0) /* the last zero decides the sign */                                        \
      for (i = n - 1; i >= 0; i--)                                                          \
        if (LOAD(x[i]) == 0) return LOAD(x[i]);                                             \
    return r;                                                                               \
  }                                                                                         \
  /* The same for w outputs side by side: NaN-sticky lanes across the outputs (vectorized),  \
   * then the in-order loop again for an output whose extreme is a NaN or a zero. */        \
  DLOP_CPU_MULTIVERSION static void name##_lanes_sticky(const T *x, int64_t s, int64_t n,   \
                                                        int64_t w, A *r) {                  \
    int64_t i = 1;                                                                          \
    for (int64_t j = 0; j < w; j++) r[j] = LOAD(x[j]);                                      \
    for (; i + 4 <= n; i += 4) /* four rows per pass over r: a quarter of its traffic */    \
      for (int64_t j = 0; j < w; j++) {                                                     \
        A m = r[j], v0 = LOAD(x[i * s + j]), v1 = LOAD(x[(i + 1) * s + j]);                 \
        A v2 = LOAD(x[(i + 2) * s + j]), v3 = LOAD(x[(i + 3) * s + j]);                     \
        m = (BETTER(v0, m) | (v0 != v0)) ? v0 : m;                                          \
        m = (BETTER(v1, m) | (v1 != v1)) ? v1 : m;                                          \
        m = (BETTER(v2, m) | (v2 != v2)) ? v2 : m;                                          \
        r[j] = (BETTER(v3, m) | (v3 != v3)) ? v3 : m;                                       \
      }                                                                                     \
    for (; i < n; i++)                                                                      \
      for (int64_t j = 0; j < w; j++) {                                                     \
        A v = LOAD(x[i * s + j]);                                                           \
        r[j] = (BETTER(v, r[j]) | (v != v)) ? v : r[j];                                     \
      }                                                                                     \
  }                                                                                         \
  static void name##_lanes(const char *p, int64_t s, int64_t n, int64_t w, void *out) {     \
    const T *x = (const T *)p;                                                              \
    A *r = (A *)out;                                                                        \
    name##_lanes_sticky(x, s, n, w, r);                                                     \
    for (int64_t j = 0; j < w; j++)                                                         \
      if (r[j] != r[j] || r[j] == 0) r[j] = name##_in_order(x + j, s, n);                   \
  }

/* Vectors of the elements at src (PER of A each): loaded straight when T is A (VECU: an
 * unaligned vector type that may alias A), else through lane, converted one by one. */
#define REDUCE_LOAD_FROM(from, src, lane, count, T, A, LOAD)                                 \
  do {                                                                                       \
    if (sizeof(T) == sizeof(A)) {                                                            \
      (from) = (const A *)(const void *)(src);                                               \
    } else {                                                                                 \
      for (int k_ = 0; k_ < (count); k_++) (lane)[k_] = LOAD((src)[k_]);                     \
      (from) = (lane);                                                                       \
    }                                                                                        \
  } while (0)
#define REDUCE_LOAD8(a, b, src, lane, T, A, LOAD, VECU, PER)                                 \
  do {                                                                                       \
    const A *from_;                                                                          \
    REDUCE_LOAD_FROM(from_, src, lane, 8, T, A, LOAD);                                       \
    (a) = *(const VECU *)from_;                                                              \
    if ((PER) == 4) (b) = *(const VECU *)(from_ + 4);                                        \
  } while (0)
#define REDUCE_LOAD1V(a, src, lane, T, A, LOAD, VECU, PER)                                   \
  do {                                                                                       \
    const A *from_;                                                                          \
    REDUCE_LOAD_FROM(from_, src, lane, PER, T, A, LOAD);                                     \
    (a) = *(const VECU *)from_;                                                              \
  } while (0)
#define REDUCE_LOAD4V(a, b, c, d, src, lane, T, A, LOAD, VECU, PER)                           \
  do {                                                                                       \
    const A *from_;                                                                          \
    REDUCE_LOAD_FROM(from_, src, lane, 4 * (PER), T, A, LOAD);                               \
    (a) = *(const VECU *)from_;                                                              \
    (b) = *(const VECU *)(from_ + (PER));                                                    \
    (c) = *(const VECU *)(from_ + 2 * (PER));                                                \
    (d) = *(const VECU *)(from_ + 3 * (PER));                                                \
  } while (0)
#define REDUCE_VSTEP(m, v, BETTER, VEC, MASK)                                                \
  do {                                                                                       \
    MASK take_ = BETTER(v, m) | ((v) != (v));                                                \
    (m) = (VEC)(((MASK)(v) & take_) | ((MASK)(m) & ~take_));                                 \
  } while (0)

typedef float reduce_f32x8 __attribute__((vector_size(32)));
typedef float reduce_f32x8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t reduce_i32x8 __attribute__((vector_size(32)));
typedef double reduce_f64x4 __attribute__((vector_size(32)));
typedef double reduce_f64x4u __attribute__((vector_size(32), aligned(8), may_alias));
typedef int64_t reduce_i64x4 __attribute__((vector_size(32)));

#define GREATER(a, b) ((a) > (b))
#define GREATER_OR_EQUAL(a, b) ((a) >= (b))
#define LESS(a, b) ((a) < (b))
#define LESS_OR_EQUAL(a, b) ((a) <= (b))

#define FLOAT_RUNS(name, T, A, FIELD, LOAD, VEC, VECU, MASK)                                \
  PAIRWISE_UNIT(pairwise_unit_##name, T, A, LOAD, VEC, VECU)                               \
  PAIRWISE_STRIDED(pairwise_strided_##name, T, A, LOAD)                                    \
  PAIRWISE_LANES(pairwise_lanes_##name, T, A, LOAD)                                        \
  FLOAT_EXTREME(max_##name, T, A, VEC, VECU, MASK, LOAD, GREATER, GREATER_OR_EQUAL)       \
  FLOAT_EXTREME(min_##name, T, A, VEC, VECU, MASK, LOAD, LESS, LESS_OR_EQUAL)             \
  static reduce_value sum_##name(const char *p, int64_t s, int64_t n) {                    \
    reduce_value v;                                                                        \
    v.FIELD = s == 1 ? pairwise_unit_##name((const T *)p, n)                               \
                     : pairwise_strided_##name((const T *)p, s, n);                        \
    return v;                                                                              \
  }                                                                                        \
  static void sum_lanes_##name(const char *p, int64_t s, int64_t n, int64_t w, void *out) { \
    pairwise_lanes_##name((const T *)p, s, n, w, (A *)out);                                \
  }                                                                                        \
  static reduce_value max_##name(const char *p, int64_t s, int64_t n) {                    \
    reduce_value v;                                                                        \
    v.FIELD = s == 1 ? max_##name##_unit((const T *)p, n)                                  \
                     : max_##name##_in_order((const T *)p, s, n);                          \
    return v;                                                                              \
  }                                                                                        \
  static reduce_value min_##name(const char *p, int64_t s, int64_t n) {                    \
    reduce_value v;                                                                        \
    v.FIELD = s == 1 ? min_##name##_unit((const T *)p, n)                                  \
                     : min_##name##_in_order((const T *)p, s, n);                          \
    return v;                                                                              \
  }

/* Integers: sums wrap in 64 bits (unsigned arithmetic: no undefined overflow); max and min
 * have no NaN and no signed zeros, so any order gives the same answer. */
#define INT_RUNS(name, T)                                                                   \
  DLOP_CPU_MULTIVERSION static uint64_t sum_##name##_unit(const T *x, int64_t n) {          \
    uint64_t r = 0;                                                                         \
    for (int64_t i = 0; i < n; i++) r += (uint64_t)(int64_t)x[i];                           \
    return r;                                                                               \
  }                                                                                         \
  DLOP_CPU_MULTIVERSION static T max_##name##_unit(const T *x, int64_t n) {                 \
    T r = x[0];                                                                             \
    for (int64_t i = 1; i < n; i++) r = x[i] > r ? x[i] : r;                                \
    return r;                                                                               \
  }                                                                                         \
  DLOP_CPU_MULTIVERSION static T min_##name##_unit(const T *x, int64_t n) {                 \
    T r = x[0];                                                                             \
    for (int64_t i = 1; i < n; i++) r = x[i] < r ? x[i] : r;                                \
    return r;                                                                               \
  }                                                                                         \
  static reduce_value sum_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    uint64_t r = 0;                                                                        \
    if (s == 1)                                                                            \
      r = sum_##name##_unit(x, n);                                                         \
    else                                                                                   \
      for (int64_t i = 0; i < n; i++) r += (uint64_t)(int64_t)x[i * s];                    \
    reduce_value v;                                                                        \
    v.i = (int64_t)r;                                                                      \
    return v;                                                                              \
  }                                                                                        \
  static reduce_value max_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    T r = x[0];                                                                            \
    if (s == 1)                                                                            \
      r = max_##name##_unit(x, n);                                                         \
    else                                                                                   \
      for (int64_t i = 1; i < n; i++) r = x[i * s] > r ? x[i * s] : r;                     \
    reduce_value v;                                                                        \
    v.i = (int64_t)r;                                                                      \
    return v;                                                                              \
  }                                                                                        \
  static reduce_value min_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    T r = x[0];                                                                            \
    if (s == 1)                                                                            \
      r = min_##name##_unit(x, n);                                                         \
    else                                                                                   \
      for (int64_t i = 1; i < n; i++) r = x[i * s] < r ? x[i * s] : r;                     \
    reduce_value v;                                                                        \
    v.i = (int64_t)r;                                                                      \
    return v;                                                                              \
  }                                                                                        \
  DLOP_CPU_MULTIVERSION static void sum_lanes_##name(const char *p, int64_t s, int64_t n,  \
                                                     int64_t w, void *out) {               \
    const T *x = (const T *)p;                                                             \
    uint64_t *r = (uint64_t *)out;                                                         \
    for (int64_t j = 0; j < w; j++) r[j] = 0;                                              \
    for (int64_t i = 0; i < n; i++)                                                        \
      for (int64_t j = 0; j < w; j++) r[j] += (uint64_t)(int64_t)x[i * s + j];             \
  }                                                                                        \
  DLOP_CPU_MULTIVERSION static void max_lanes_##name(const char *p, int64_t s, int64_t n,  \
                                                     int64_t w, void *out) {               \
    const T *x = (const T *)p;                                                             \
    int64_t *r = (int64_t *)out;                                                           \
    for (int64_t j = 0; j < w; j++) r[j] = x[j];                                           \
    for (int64_t i = 1; i < n; i++)                                                        \
      for (int64_t j = 0; j < w; j++) r[j] = x[i * s + j] > r[j] ? x[i * s + j] : r[j];    \
  }                                                                                        \
  DLOP_CPU_MULTIVERSION static void min_lanes_##name(const char *p, int64_t s, int64_t n,  \
                                                     int64_t w, void *out) {               \
    const T *x = (const T *)p;                                                             \
    int64_t *r = (int64_t *)out;                                                           \
    for (int64_t j = 0; j < w; j++) r[j] = x[j];                                           \
    for (int64_t i = 1; i < n; i++)                                                        \
      for (int64_t j = 0; j < w; j++) r[j] = x[i * s + j] < r[j] ? x[i * s + j] : r[j];    \
  }

FLOAT_RUNS(float16, uint16_t, float, f, LOAD_HALF, reduce_f32x8, reduce_f32x8u, reduce_i32x8)
FLOAT_RUNS(bfloat16, uint16_t, float, f, LOAD_BF16, reduce_f32x8, reduce_f32x8u, reduce_i32x8)
FLOAT_RUNS(float32, float, float, f, LOAD_PLAIN, reduce_f32x8, reduce_f32x8u, reduce_i32x8)
FLOAT_RUNS(float64, double, double, d, LOAD_PLAIN, reduce_f64x4, reduce_f64x4u, reduce_i64x4)
INT_RUNS(int8, int8_t)
INT_RUNS(int16, int16_t)
INT_RUNS(int32, int32_t)
INT_RUNS(int64, int64_t)
INT_RUNS(uint8, uint8_t)

int reduce_cpu_runs_for(dlop_dtype dtype, reduce_run_fn runs[3], reduce_lanes_fn lanes[3],
                    acc_class *cls) {
#define RUNS_CASE(DT, name, CLS)                                                            \
  case DT:                                                                                 \
    runs[RUN_SUM] = sum_##name;                                                            \
    runs[RUN_MAX] = max_##name;                                                            \
    runs[RUN_MIN] = min_##name;                                                            \
    lanes[RUN_SUM] = sum_lanes_##name;                                                     \
    lanes[RUN_MAX] = max_##name##_lanes_any;                                               \
    lanes[RUN_MIN] = min_##name##_lanes_any;                                               \
    *cls = CLS;                                                                            \
    return 1;
#define max_float16_lanes_any max_float16_lanes
#define min_float16_lanes_any min_float16_lanes
#define max_bfloat16_lanes_any max_bfloat16_lanes
#define min_bfloat16_lanes_any min_bfloat16_lanes
#define max_float32_lanes_any max_float32_lanes
#define min_float32_lanes_any min_float32_lanes
#define max_float64_lanes_any max_float64_lanes
#define min_float64_lanes_any min_float64_lanes
#define max_int8_lanes_any max_lanes_int8
#define min_int8_lanes_any min_lanes_int8
#define max_int16_lanes_any max_lanes_int16
#define min_int16_lanes_any min_lanes_int16
#define max_int32_lanes_any max_lanes_int32
#define min_int32_lanes_any min_lanes_int32
#define max_int64_lanes_any max_lanes_int64
#define min_int64_lanes_any min_lanes_int64
#define max_uint8_lanes_any max_lanes_uint8
#define min_uint8_lanes_any min_lanes_uint8
  switch (dtype) {
    RUNS_CASE(DLOP_FLOAT16, float16, ACC_FLOAT)
    RUNS_CASE(DLOP_BFLOAT16, bfloat16, ACC_FLOAT)
    RUNS_CASE(DLOP_FLOAT32, float32, ACC_FLOAT)
    RUNS_CASE(DLOP_FLOAT64, float64, ACC_DOUBLE)
    RUNS_CASE(DLOP_INT8, int8, ACC_INT)
    RUNS_CASE(DLOP_INT16, int16, ACC_INT)
    RUNS_CASE(DLOP_INT32, int32, ACC_INT)
    RUNS_CASE(DLOP_INT64, int64, ACC_INT)
    RUNS_CASE(DLOP_UINT8, uint8, ACC_INT)
    default: return 0;
  }
#undef RUNS_CASE
}

