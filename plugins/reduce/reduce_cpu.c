/* reduce_cpu.c — the CPU kernel of sum, mean, max and min over a reduce_layout. Each output is
 * reduced in runs along the innermost reduced dim (pairwise summation for float sums), the runs
 * and fixed chunks of the reduction combined in a fixed binary cascade, so the bits never depend
 * on the thread count. Two ways through it, with the same arithmetic per output (bit for bit):
 * one output at a time (the reduced elements of an output contiguous or strided), or, when the
 * outputs are contiguous in the input (a reduction over a leading or middle axis), a block of
 * up to REDUCE_CPU_LANE_BYTES of adjacent outputs at once, each row of the block one vector
 * load (lanes). Parallel over outputs or blocks, or over (output or block, chunk) pairs when
 * there are few of them. */
#include <math.h>
#include <stdlib.h>

#include "reduce_plugin.h"

/* Reduced elements per chunk: the unit of work when few outputs share the threads, and a
 * fixed level of the summation tree whichever path runs. */
#define REDUCE_CPU_CHUNK ((int64_t)1 << 15)
/* Outputs per parallel_for grain when splitting over outputs: each output is at least a run. */
#define REDUCE_CPU_OUTPUT_GRAIN 16
/* Bytes of one row of a lane block: 512 floats or 256 doubles, so that each row read is half
 * a page in a row (narrower blocks ran up to 2x slower on reductions over a leading axis: the
 * hardware prefetcher needs the run) while the 8 rows of accumulators (16 KiB, on the stack)
 * leave half of a 32 KiB L1 cache to the input streaming through. Reductions of more than
 * 1024 rows that are still one run take 1 KiB rows (the pairwise recursion keeps a row per
 * level on the stack), and blocks whose outputs need a cascade (several runs or chunks) 256
 * bytes, so that their cascades (64 levels of a row each) stay small too. */
#define REDUCE_CPU_LANE_BYTES 2048
#define REDUCE_CPU_MAX_LANES (REDUCE_CPU_LANE_BYTES / 4)
#define REDUCE_CPU_WIDE_ROWS 1024
#define REDUCE_CPU_LONG_LANE_BYTES 1024
#define REDUCE_CPU_CASCADE_LANE_BYTES 256
#define REDUCE_CPU_CASCADE_MAX_LANES (REDUCE_CPU_CASCADE_LANE_BYTES / 4)
/* The lane path needs at least this many adjacent outputs; fewer go one at a time. */
#define REDUCE_CPU_MIN_LANES 4

typedef union reduce_value {
  float f;
  double d;
  int64_t i;
} reduce_value;

typedef enum acc_class { ACC_FLOAT, ACC_DOUBLE, ACC_INT } acc_class;
enum { RUN_SUM = 0, RUN_MAX = 1, RUN_MIN = 2 };

/* One output's run: n elements from p, stride s (in elements). */
typedef reduce_value (*reduce_run_fn)(const char *p, int64_t stride, int64_t n);
/* The runs of w adjacent outputs at once: row i of the block is the w elements at
 * p + i * stride (in elements); out gets w accumulators (float, double or int64). */
typedef void (*reduce_lanes_fn)(const char *p, int64_t stride, int64_t n, int64_t w, void *out);

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

/* The same tree for w outputs side by side: element (i, j) at x[i * s + j]. */
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
    for (i = 8; i + 8 <= n; i += 8)                                                         \
      for (int k = 0; k < 8; k++)                                                           \
        for (int64_t j = 0; j < w; j++) a[k][j] += LOAD(x[(i + k) * s + j]);                \
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

static int runs_for(dlop_dtype dtype, reduce_run_fn runs[3], reduce_lanes_fn lanes[3],
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

/* ---- combining partials in a fixed order ---------------------------------------------- */

/* Float sums: a binary cascade (partial k joins its pairwise tree like a binary counter), so
 * n partials cost O(log n) rounding steps and the tree depends only on n. max and min: the
 * in-order rule of FLOAT_EXTREME over the partials. The lane cascade does the same for each
 * of w lanes (levels[level][j]). */
typedef struct combiner {
  acc_class cls;
  int run; /* RUN_SUM, RUN_MAX, RUN_MIN */
  int has;
  reduce_value acc;
  uint64_t occupied;
  float fstack[64];
  double dstack[64];
} combiner;

static void combiner_init(combiner *c, acc_class cls, int run) {
  c->cls = cls;
  c->run = run;
  c->has = 0;
  c->acc.i = 0;
  c->occupied = 0;
}

static void combiner_push(combiner *c, reduce_value v) {
  if (c->run == RUN_SUM) {
    int level = 0;
    if (c->cls == ACC_INT) {
      c->acc.i = (int64_t)((uint64_t)c->acc.i + (uint64_t)v.i);
      return;
    }
    if (c->cls == ACC_FLOAT) {
      float x = v.f;
      while (c->occupied & (1ull << level)) {
        x = c->fstack[level] + x;
        c->occupied &= ~(1ull << level);
        level++;
      }
      c->fstack[level] = x;
    } else {
      double x = v.d;
      while (c->occupied & (1ull << level)) {
        x = c->dstack[level] + x;
        c->occupied &= ~(1ull << level);
        level++;
      }
      c->dstack[level] = x;
    }
    c->occupied |= 1ull << level;
    return;
  }
  if (!c->has) {
    c->acc = v;
    c->has = 1;
    return;
  }
  if (c->cls == ACC_INT) {
    if (c->run == RUN_MAX ? v.i > c->acc.i : v.i < c->acc.i) c->acc = v;
  } else if (c->cls == ACC_FLOAT) {
    /* Between equal values (-0.0, 0.0) the later one wins, as in NumPy 2's float loops. */
    float a = c->acc.f, x = v.f;
    if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc = v;
  } else {
    double a = c->acc.d, x = v.d;
    if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc = v;
  }
}

static reduce_value combiner_finish(const combiner *c) {
  reduce_value r = c->acc;
  if (c->run != RUN_SUM || c->cls == ACC_INT) return r;
  if (c->cls == ACC_FLOAT) {
    float s = 0.0f;
    for (int level = 0; level < 64; level++)
      if (c->occupied & (1ull << level)) s = c->fstack[level] + s;
    r.f = s;
  } else {
    double s = 0.0;
    for (int level = 0; level < 64; level++)
      if (c->occupied & (1ull << level)) s = c->dstack[level] + s;
    r.d = s;
  }
  return r;
}

/* Lane values are w floats, doubles or int64s; a lane cascade holds up to 64 levels of them
 * (levels are as deep as log2 of the pushes: at most 63). */
typedef struct lane_combiner {
  acc_class cls;
  int run;
  int has;
  int64_t w;
  uint64_t occupied;
  union {
    float f[REDUCE_CPU_CASCADE_MAX_LANES];
    double d[REDUCE_CPU_CASCADE_MAX_LANES / 2];
    int64_t i[REDUCE_CPU_CASCADE_MAX_LANES / 2];
  } acc, levels[64];
} lane_combiner;

static void lane_combiner_init(lane_combiner *c, acc_class cls, int run, int64_t w) {
  c->cls = cls;
  c->run = run;
  c->has = 0;
  c->w = w;
  c->occupied = 0;
  memset(&c->acc, 0, sizeof c->acc);
}

/* v: w values, overwritten (it carries the sum up the cascade) */
static void lane_combiner_push(lane_combiner *c, void *values) {
  const int64_t w = c->w;
  if (c->run == RUN_SUM && c->cls == ACC_INT) {
    const int64_t *v = (const int64_t *)values;
    for (int64_t j = 0; j < w; j++) c->acc.i[j] = (int64_t)((uint64_t)c->acc.i[j] + (uint64_t)v[j]);
    return;
  }
  if (c->run == RUN_SUM) {
    int level = 0;
    while (c->occupied & (1ull << level)) {
      if (c->cls == ACC_FLOAT) {
        float *x = (float *)values;
        for (int64_t j = 0; j < w; j++) x[j] = c->levels[level].f[j] + x[j];
      } else {
        double *x = (double *)values;
        for (int64_t j = 0; j < w; j++) x[j] = c->levels[level].d[j] + x[j];
      }
      c->occupied &= ~(1ull << level);
      level++;
    }
    memcpy(&c->levels[level], values, (size_t)w * (c->cls == ACC_FLOAT ? 4 : 8));
    c->occupied |= 1ull << level;
    return;
  }
  if (!c->has) {
    memcpy(&c->acc, values, (size_t)w * (c->cls == ACC_FLOAT ? 4 : 8));
    c->has = 1;
    return;
  }
  if (c->cls == ACC_INT) {
    const int64_t *v = (const int64_t *)values;
    for (int64_t j = 0; j < w; j++)
      if (c->run == RUN_MAX ? v[j] > c->acc.i[j] : v[j] < c->acc.i[j]) c->acc.i[j] = v[j];
  } else if (c->cls == ACC_FLOAT) {
    const float *v = (const float *)values;
    for (int64_t j = 0; j < w; j++) {
      float a = c->acc.f[j], x = v[j];
      if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc.f[j] = x;
    }
  } else {
    const double *v = (const double *)values;
    for (int64_t j = 0; j < w; j++) {
      double a = c->acc.d[j], x = v[j];
      if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc.d[j] = x;
    }
  }
}

/* Writes the w results as reduce_values. */
static void lane_combiner_finish(const lane_combiner *c, reduce_value *out) {
  const int64_t w = c->w;
  for (int64_t j = 0; j < w; j++) {
    if (c->run != RUN_SUM || c->cls == ACC_INT) {
      if (c->cls == ACC_FLOAT) out[j].f = c->acc.f[j];
      else if (c->cls == ACC_DOUBLE) out[j].d = c->acc.d[j];
      else out[j].i = c->acc.i[j];
    } else if (c->cls == ACC_FLOAT) {
      float s = 0.0f;
      for (int level = 0; level < 64; level++)
        if (c->occupied & (1ull << level)) s = c->levels[level].f[j] + s;
      out[j].f = s;
    } else {
      double s = 0.0;
      for (int level = 0; level < 64; level++)
        if (c->occupied & (1ull << level)) s = c->levels[level].d[j] + s;
      out[j].d = s;
    }
  }
}

/* ---- the reduction -------------------------------------------------------------------- */

typedef struct reduce_cpu_context {
  const reduce_layout *layout;
  reduce_run_fn run;
  reduce_lanes_fn lanes;
  acc_class cls;
  int run_kind;
  reduce_kind kind;
  dlop_dtype out_dtype;
  size_t in_size, out_size;
  const char *input;
  char *output;
  int64_t chunks;         /* chunks per output */
  int64_t lane_width;     /* lane path: outputs per block (0: one output at a time) */
  int64_t blocks_per_row; /* lane path: blocks along the innermost kept dim */
  int64_t units;          /* outputs, or blocks on the lane path */
  int one_run;            /* each output's reduction is one run (one reduced dim, one chunk) */
  reduce_value *partials; /* units * chunks (* lane_width), on the (unit, chunk) path */
} reduce_cpu_context;

/* The reduced elements [begin, end) of output(s) starting at input pointer base, in runs
 * along the innermost reduced dim. One output (w = 0): the result. Lanes (w outputs): into
 * out[w], with lanes as the scratch cascade (on the caller's stack: nothing is allocated). */
static reduce_value reduce_range(const reduce_cpu_context *c, const char *base, int64_t begin,
                                 int64_t end, int64_t w, reduce_value *out, lane_combiner *lanes) {
  const reduce_layout *l = c->layout;
  int64_t index[DLOP_MAX_NDIM], rest = begin, remaining = end - begin;
  int32_t last = l->reduced_ndim - 1, d;
  const char *p = base;
  int64_t inner_stride = l->reduced_strides[last];
  combiner acc;
  union {
    float f[REDUCE_CPU_CASCADE_MAX_LANES];
    double d[REDUCE_CPU_CASCADE_MAX_LANES / 2];
  } run_values;
  reduce_value result = {.i = 0};
  for (d = last; d >= 0; d--) {
    index[d] = rest % l->reduced_shape[d];
    rest /= l->reduced_shape[d];
    p += index[d] * l->reduced_strides[d] * (int64_t)c->in_size;
  }
  /* one run, one push: the cascade's result is the run's (a sum plus 0.0, as finish adds) */
  if (index[last] + remaining <= l->reduced_shape[last]) {
    if (w == 0) {
      result = c->run(p, inner_stride, remaining);
      if (c->run_kind == RUN_SUM && c->cls == ACC_FLOAT) result.f = result.f + 0.0f;
      if (c->run_kind == RUN_SUM && c->cls == ACC_DOUBLE) result.d = result.d + 0.0;
      return result;
    }
    c->lanes(p, inner_stride, remaining, w, &run_values);
    for (int64_t j = 0; j < w; j++) {
      if (c->cls == ACC_FLOAT) out[j].f = c->run_kind == RUN_SUM ? run_values.f[j] + 0.0f : run_values.f[j];
      else if (c->cls == ACC_DOUBLE) out[j].d = c->run_kind == RUN_SUM ? run_values.d[j] + 0.0 : run_values.d[j];
      else out[j].i = ((const int64_t *)(const void *)&run_values)[j];
    }
    return result;
  }
  if (w == 0) {
    combiner_init(&acc, c->cls, c->run_kind);
  } else {
    lane_combiner_init(lanes, c->cls, c->run_kind, w);
  }
  while (remaining > 0) {
    int64_t n = l->reduced_shape[last] - index[last];
    if (n > remaining) n = remaining;
    if (w == 0) {
      combiner_push(&acc, c->run(p, inner_stride, n));
    } else {
      c->lanes(p, inner_stride, n, w, &run_values);
      lane_combiner_push(lanes, &run_values);
    }
    remaining -= n;
    index[last] += n;
    p += n * inner_stride * (int64_t)c->in_size;
    for (d = last; d > 0 && index[d] == l->reduced_shape[d]; d--) {
      index[d] = 0;
      index[d - 1]++;
      p += (l->reduced_strides[d - 1] - l->reduced_shape[d] * l->reduced_strides[d]) *
           (int64_t)c->in_size;
    }
  }
  if (w == 0) return combiner_finish(&acc);
  lane_combiner_finish(lanes, out);
  return result;
}

/* Input and output pointers of output element m. */
static void output_position(const reduce_cpu_context *c, int64_t m, const char **in, char **out) {
  const reduce_layout *l = c->layout;
  int64_t in_offset = 0, out_offset = 0;
  for (int32_t d = l->kept_ndim - 1; d >= 0; d--) {
    int64_t i = m % l->kept_shape[d];
    m /= l->kept_shape[d];
    in_offset += i * l->kept_in_strides[d];
    out_offset += i * l->kept_out_strides[d];
  }
  *in = c->input + in_offset * (int64_t)c->in_size;
  *out = c->output + out_offset * (int64_t)c->out_size;
}

/* Writes a finished accumulator (mean: divided by the count in the accumulator type). */
static inline __attribute__((always_inline)) void store(const reduce_cpu_context *c, reduce_value v, char *out) {
  int64_t count = c->layout->count;
  if (c->kind == REDUCE_MEAN) {
    if (c->cls == ACC_FLOAT) v.f = count > 0 ? v.f / (float)count : (float)NAN;
    else v.d = count > 0 ? v.d / (double)count : NAN;
  }
  switch (c->out_dtype) {
    case DLOP_FLOAT16: *(uint16_t *)out = dlop_float_to_half(v.f); break;
    case DLOP_BFLOAT16: *(uint16_t *)out = dlop_float_to_bfloat16(v.f); break;
    case DLOP_FLOAT32: *(float *)out = v.f; break;
    case DLOP_FLOAT64: *(double *)out = v.d; break;
    case DLOP_INT8: *(int8_t *)out = (int8_t)v.i; break;
    case DLOP_INT16: *(int16_t *)out = (int16_t)v.i; break;
    case DLOP_INT32: *(int32_t *)out = (int32_t)v.i; break;
    case DLOP_INT64: *(int64_t *)out = v.i; break;
    case DLOP_UINT8: *(uint8_t *)out = (uint8_t)v.i; break;
    default: break;
  }
}

/* The reduced elements of chunk k: [first, last). */
static void chunk_bounds(const reduce_cpu_context *c, int64_t k, int64_t *first, int64_t *last) {
  const int64_t count = c->layout->count;
  *first = k * REDUCE_CPU_CHUNK;
  *last = *first + REDUCE_CPU_CHUNK < count ? *first + REDUCE_CPU_CHUNK : count;
}

/* w lane results as the w typed values a lane cascade takes. */
static void lanes_pack(acc_class cls, const reduce_value *v, int64_t w, void *typed) {
  for (int64_t j = 0; j < w; j++) {
    if (cls == ACC_FLOAT) ((float *)typed)[j] = v[j].f;
    else if (cls == ACC_DOUBLE) ((double *)typed)[j] = v[j].d;
    else ((int64_t *)typed)[j] = v[j].i;
  }
}

/* A unit of work: one output (w = 0), or the block of w outputs starting at output m. */
typedef struct reduce_unit {
  const char *in;
  char *out;
  int64_t w;
} reduce_unit;

static reduce_unit unit_at(const reduce_cpu_context *c, int64_t u) {
  reduce_unit unit = {NULL, NULL, 0};
  int64_t m = u;
  if (c->lane_width > 0) {
    const int64_t inner = c->layout->kept_shape[c->layout->kept_ndim - 1];
    int64_t row = u / c->blocks_per_row, first = (u % c->blocks_per_row) * c->lane_width;
    m = row * inner + first;
    unit.w = inner - first < c->lane_width ? inner - first : c->lane_width;
  }
  output_position(c, m, &unit.in, &unit.out);
  return unit;
}

/* Writes the finished result(s) of a unit. */
static void store_unit(const reduce_cpu_context *c, const reduce_unit *unit, const reduce_value *v) {
  const int64_t out_step =
      c->layout->kept_out_strides[c->layout->kept_ndim - 1] * (int64_t)c->out_size;
  if (unit->w == 0) {
    store(c, v[0], unit->out);
    return;
  }
  for (int64_t j = 0; j < unit->w; j++) store(c, v[j], unit->out + j * out_step);
}

/* The lane block of a reduction that is one run per output (one reduced dim, at most a
 * chunk long): the run is the result (a sum plus 0.0, as a cascade's finish adds), stored. */
static void lanes_one_run(const reduce_cpu_context *c, const reduce_unit *unit) {
  const reduce_layout *l = c->layout;
  const int64_t out_step = l->kept_out_strides[l->kept_ndim - 1] * (int64_t)c->out_size;
  union {
    float f[REDUCE_CPU_MAX_LANES];
    double d[REDUCE_CPU_MAX_LANES / 2];
    int64_t i[REDUCE_CPU_MAX_LANES / 2];
  } values;
  c->lanes(unit->in, l->reduced_strides[0], l->count, unit->w, &values);
  if (out_step == (int64_t)c->out_size && c->kind != REDUCE_MEAN) { /* the usual: no conversion */
    if (c->out_dtype == DLOP_FLOAT32) {
      float *out = (float *)(void *)unit->out;
      for (int64_t j = 0; j < unit->w; j++)
        out[j] = c->run_kind == RUN_SUM ? values.f[j] + 0.0f : values.f[j];
      return;
    }
    if (c->out_dtype == DLOP_FLOAT64) {
      double *out = (double *)(void *)unit->out;
      for (int64_t j = 0; j < unit->w; j++)
        out[j] = c->run_kind == RUN_SUM ? values.d[j] + 0.0 : values.d[j];
      return;
    }
  }
  for (int64_t j = 0; j < unit->w; j++) {
    reduce_value v;
    if (c->cls == ACC_FLOAT) v.f = c->run_kind == RUN_SUM ? values.f[j] + 0.0f : values.f[j];
    else if (c->cls == ACC_DOUBLE) v.d = c->run_kind == RUN_SUM ? values.d[j] + 0.0 : values.d[j];
    else v.i = values.i[j];
    store(c, v, unit->out + j * out_step);
  }
}

/* Any other lane block: its chunks in order, each a range, combined by the cascade. Not
 * inlined: its cascades are 33 KiB of stack, which the one-run path does not need. */
__attribute__((noinline)) static void lanes_cascaded(const reduce_cpu_context *c,
                                                     const reduce_unit *unit,
                                                     reduce_value *result) {
  lane_combiner scratch, acc;
  reduce_value part[REDUCE_CPU_CASCADE_MAX_LANES];
  uint64_t typed[REDUCE_CPU_CASCADE_MAX_LANES / 2];
  if (c->chunks == 1) {
    reduce_range(c, unit->in, 0, c->layout->count, unit->w, result, &scratch);
    return;
  }
  lane_combiner_init(&acc, c->cls, c->run_kind, unit->w);
  for (int64_t k = 0; k < c->chunks; k++) {
    int64_t first, last;
    chunk_bounds(c, k, &first, &last);
    reduce_range(c, unit->in, first, last, unit->w, part, &scratch);
    lanes_pack(c->cls, part, unit->w, typed);
    lane_combiner_push(&acc, typed);
  }
  lane_combiner_finish(&acc, result);
}

/* A unit's result(s): its chunks in order, each a range, combined by the cascade. */
static void reduce_unit_all(const reduce_cpu_context *c, const reduce_unit *unit,
                            reduce_value *result) {
  const int64_t count = c->layout->count;
  if (count <= 0) { /* an empty sum (mean: NaN, which store makes of it) */
    for (int64_t j = 0; j < (unit->w ? unit->w : 1); j++) result[j].i = 0;
    return;
  }
  if (unit->w > 0) { /* (lanes_one_run stores its results itself) */
    lanes_cascaded(c, unit, result);
    return;
  }
  if (c->chunks == 1) {
    result[0] = reduce_range(c, unit->in, 0, count, 0, NULL, NULL);
    return;
  }
  combiner acc;
  combiner_init(&acc, c->cls, c->run_kind);
  for (int64_t k = 0; k < c->chunks; k++) {
    int64_t first, last;
    chunk_bounds(c, k, &first, &last);
    combiner_push(&acc, reduce_range(c, unit->in, first, last, 0, NULL, NULL));
  }
  result[0] = combiner_finish(&acc);
}

/* Outputs [begin, end) one at a time, walked with a cursor over the kept dims (a division per
 * output would cost as much as reducing a short row). */
static void outputs_body(const reduce_cpu_context *c, int64_t begin, int64_t end) {
  const reduce_layout *l = c->layout;
  const int32_t last = l->kept_ndim - 1;
  const int64_t in_size = (int64_t)c->in_size, out_size = (int64_t)c->out_size;
  int64_t index[DLOP_MAX_NDIM], m = begin;
  reduce_unit unit = {NULL, NULL, 0};
  for (int32_t d = last; d >= 0; d--) {
    index[d] = m % l->kept_shape[d];
    m /= l->kept_shape[d];
  }
  output_position(c, begin, &unit.in, &unit.out);
  for (int64_t u = begin; u < end; u++) {
    reduce_value v;
    if (c->one_run) { /* the run is the result (a sum plus 0.0, as a cascade's finish adds) */
      v = c->run(unit.in, l->reduced_strides[0], l->count);
      if (c->run_kind == RUN_SUM && c->cls == ACC_FLOAT) v.f = v.f + 0.0f;
      if (c->run_kind == RUN_SUM && c->cls == ACC_DOUBLE) v.d = v.d + 0.0;
    } else {
      reduce_unit_all(c, &unit, &v);
    }
    store(c, v, unit.out);
    unit.in += l->kept_in_strides[last] * in_size;
    unit.out += l->kept_out_strides[last] * out_size;
    index[last]++;
    for (int32_t d = last; d > 0 && index[d] == l->kept_shape[d]; d--) {
      index[d] = 0;
      index[d - 1]++;
      unit.in += (l->kept_in_strides[d - 1] - l->kept_shape[d] * l->kept_in_strides[d]) * in_size;
      unit.out += (l->kept_out_strides[d - 1] - l->kept_shape[d] * l->kept_out_strides[d]) * out_size;
    }
  }
}

static void units_body(void *context, int64_t begin, int64_t end) {
  const reduce_cpu_context *c = (const reduce_cpu_context *)context;
  reduce_value result[REDUCE_CPU_CASCADE_MAX_LANES];
  if (c->lane_width == 0) {
    outputs_body(c, begin, end);
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    reduce_unit unit = unit_at(c, u);
    if (c->one_run) {
      lanes_one_run(c, &unit);
      continue;
    }
    reduce_unit_all(c, &unit, result);
    store_unit(c, &unit, result);
  }
}

/* (unit, chunk) items: item j is chunk j % chunks of unit j / chunks; its result(s) go to
 * partials[j * lanes], lanes being the block width (1 for single outputs). */
static void chunks_body(void *context, int64_t begin, int64_t end) {
  const reduce_cpu_context *c = (const reduce_cpu_context *)context;
  const int64_t lanes = c->lane_width > 0 ? c->lane_width : 1;
  lane_combiner scratch;
  for (int64_t j = begin; j < end; j++) {
    int64_t first, last;
    reduce_unit unit = unit_at(c, j / c->chunks);
    chunk_bounds(c, j % c->chunks, &first, &last);
    if (unit.w == 0)
      c->partials[j] = reduce_range(c, unit.in, first, last, 0, NULL, NULL);
    else
      reduce_range(c, unit.in, first, last, unit.w, &c->partials[j * lanes], &scratch);
  }
}

/* Combines the chunks' partials of every unit, in chunk order, exactly as reduce_unit_all. */
static void finish_chunks(const reduce_cpu_context *c) {
  const int64_t lanes = c->lane_width > 0 ? c->lane_width : 1;
  for (int64_t u = 0; u < c->units; u++) {
    reduce_unit unit = unit_at(c, u);
    reduce_value result[REDUCE_CPU_CASCADE_MAX_LANES];
    if (unit.w == 0) {
      combiner acc;
      combiner_init(&acc, c->cls, c->run_kind);
      for (int64_t k = 0; k < c->chunks; k++) combiner_push(&acc, c->partials[u * c->chunks + k]);
      result[0] = combiner_finish(&acc);
    } else {
      lane_combiner acc;
      uint64_t typed[REDUCE_CPU_CASCADE_MAX_LANES / 2];
      lane_combiner_init(&acc, c->cls, c->run_kind, unit.w);
      for (int64_t k = 0; k < c->chunks; k++) {
        lanes_pack(c->cls, &c->partials[(u * c->chunks + k) * lanes], unit.w, typed);
        lane_combiner_push(&acc, typed);
      }
      lane_combiner_finish(&acc, result);
    }
    store_unit(c, &unit, result);
  }
}

/* The lane path serves outputs that lie side by side in the input (unit stride along the
 * innermost kept dim, at least REDUCE_CPU_MIN_LANES of them) while the reduction steps over
 * other dims: sums and extremes over a leading or middle axis. */
static int64_t lane_width_for(const reduce_layout *l, acc_class cls, int one_run) {
  const int32_t last = l->kept_ndim - 1;
  if (l->kept_in_strides[last] != 1 || l->kept_shape[last] < REDUCE_CPU_MIN_LANES) return 0;
  if (l->reduced_strides[l->reduced_ndim - 1] == 1 || l->count <= 0) return 0;
  int64_t bytes = !one_run ? REDUCE_CPU_CASCADE_LANE_BYTES
                  : l->count <= REDUCE_CPU_WIDE_ROWS ? REDUCE_CPU_LANE_BYTES
                                                     : REDUCE_CPU_LONG_LANE_BYTES;
  return bytes / (cls == ACC_FLOAT ? 4 : 8);
}

int reduce_cpu_run(const reduce_op_info *info, dlop_dtype dtype, const reduce_layout *layout,
                   const void *input, void *output, char *error, size_t error_size) {
  const dlop_host_api *host = reduce_host();
  reduce_run_fn runs[3];
  reduce_lanes_fn lanes[3];
  reduce_cpu_context c;
  int status = DLOP_OK;
  int32_t threads = DLOP_HOST_HAS(host, cpu_threads) ? host->cpu_threads() : 1;
  int64_t per_unit, count = layout->count > 0 ? layout->count : 1;
  memset(&c, 0, sizeof c);
  if (!runs_for(dtype, runs, lanes, &c.cls)) {
    dlop_set_error(error, error_size, "%s: no CPU kernel for dtype %s", info->name,
                   dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  c.layout = layout;
  c.kind = info->kind;
  c.run_kind = info->kind == REDUCE_MAX ? RUN_MAX : info->kind == REDUCE_MIN ? RUN_MIN : RUN_SUM;
  c.run = runs[c.run_kind];
  c.lanes = lanes[c.run_kind];
  c.out_dtype = reduce_output_dtype(info->kind, dtype);
  c.in_size = dlop_dtype_size(dtype);
  c.out_size = dlop_dtype_size(c.out_dtype);
  c.input = (const char *)input;
  c.output = (char *)output;
  /* rounded up without count + REDUCE_CPU_CHUNK - 1, which a zero-stride view of 2^63-1
   * elements would take past int64 */
  c.chunks = layout->count > 0
                 ? layout->count / REDUCE_CPU_CHUNK + (layout->count % REDUCE_CPU_CHUNK != 0)
                 : 1;
  if (layout->outputs <= 0) return DLOP_OK;
  c.one_run = layout->reduced_ndim == 1 && layout->count > 0 && layout->count <= REDUCE_CPU_CHUNK;
  c.lane_width = lane_width_for(layout, c.cls, c.one_run);
  if (c.lane_width > 0) {
    const int64_t inner = layout->kept_shape[layout->kept_ndim - 1];
    c.blocks_per_row = (inner + c.lane_width - 1) / c.lane_width;
    c.units = layout->outputs / inner * c.blocks_per_row;
    per_unit = count * c.lane_width;
  } else {
    c.units = layout->outputs;
    per_unit = count;
  }
  /* Few units and long reductions: split the reductions too. The partials are combined in
   * chunk order, exactly as reduce_unit_all does, so both paths give the same bits. */
  if (threads > 1 && c.chunks > 1 && c.units < 4 * (int64_t)threads &&
      DLOP_HOST_HAS(host, parallel_for)) {
    int64_t items = c.units * c.chunks, lanes_per_item = c.lane_width > 0 ? c.lane_width : 1;
    c.partials = (reduce_value *)malloc(sizeof(reduce_value) * (size_t)(items * lanes_per_item));
    if (c.partials == NULL) {
      dlop_set_error(error, error_size, "%s: out of memory for %lld partial results", info->name,
                     (long long)(items * lanes_per_item));
      return DLOP_OUT_OF_MEMORY;
    }
    status = host->parallel_for(items, 1, chunks_body, &c);
    if (status == DLOP_OK) finish_chunks(&c);
    free(c.partials);
  } else if (threads > 1 && DLOP_HOST_HAS(host, parallel_for) &&
             c.units * per_unit > REDUCE_CPU_CHUNK) {
    int64_t grain = REDUCE_CPU_CHUNK / per_unit;
    if (grain < REDUCE_CPU_OUTPUT_GRAIN && c.lane_width == 0) grain = REDUCE_CPU_OUTPUT_GRAIN;
    if (grain < 1) grain = 1;
    status = host->parallel_for(c.units, grain, units_body, &c);
  } else {
    units_body(&c, 0, c.units);
  }
  if (status != DLOP_OK)
    dlop_set_error(error, error_size, "%s: the host's parallel_for failed with status %d",
                   info->name, status);
  return status;
}
