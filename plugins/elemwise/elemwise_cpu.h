/* elemwise_cpu.h — the dtype lists and kernel macros shared by the elemwise plugin's CPU kernel
 * files: each op and dtype gets a dlop_elementwise_cpu_kernel from the kit's macros around
 * elemwise_scalar.h's element function ew_<op>_<dtype>, or, for the math-library functions,
 * from the staged vector loops below. */
#ifndef DLOP_ELEMWISE_CPU_H
#define DLOP_ELEMWISE_CPU_H

#include <math.h>

#include "elemwise_cpu_vector_math.h" /* before the element functions call expf, logf, ... */
#include "elemwise_plugin.h"
#include "elemwise_scalar.h"

/* X(name, storage type, dlop dtype) */
#define EW_CPU_INT_DTYPES(X) \
  X(int8, int8_t, DLOP_INT8) X(int16, int16_t, DLOP_INT16) X(int32, int32_t, DLOP_INT32) \
  X(int64, int64_t, DLOP_INT64) X(uint8, uint8_t, DLOP_UINT8)
#define EW_CPU_FLOAT_DTYPES(X) \
  X(float16, uint16_t, DLOP_FLOAT16) X(bfloat16, uint16_t, DLOP_BFLOAT16) \
  X(float32, float, DLOP_FLOAT32) X(float64, double, DLOP_FLOAT64)
#define EW_CPU_NUMERIC_DTYPES(X) EW_CPU_INT_DTYPES(X) EW_CPU_FLOAT_DTYPES(X)
#define EW_CPU_ALL_DTYPES(X) X(bool, uint8_t, DLOP_BOOL) EW_CPU_NUMERIC_DTYPES(X)

/* No attribute: for loops not worth three copies (cold or not vectorizable). */
#define EW_CPU_PLAIN
/* EW_CPU_HOT_<dtype>: three copies (AVX-512, AVX2, baseline) for float32 and float64, the
 * dtypes whose throughput is measured against NumPy (bench/ops.py), one for the others: the
 * comparison and cast files hold 60 and 100 kernels, and three copies of each would cost
 * build time for little use. */
#define EW_CPU_HOT_bool EW_CPU_PLAIN
#define EW_CPU_HOT_int8 EW_CPU_PLAIN
#define EW_CPU_HOT_int16 EW_CPU_PLAIN
#define EW_CPU_HOT_int32 EW_CPU_PLAIN
#define EW_CPU_HOT_int64 EW_CPU_PLAIN
#define EW_CPU_HOT_uint8 EW_CPU_PLAIN
#define EW_CPU_HOT_float16 EW_CPU_PLAIN
#define EW_CPU_HOT_bfloat16 EW_CPU_PLAIN
#define EW_CPU_HOT_float32 DLOP_CPU_MULTIVERSION
#define EW_CPU_HOT_float64 DLOP_CPU_MULTIVERSION

/* The kernel fn (z = ew_fn(x) or ew_fn(a, b)) with output type TO and input type TI. */
#define EW_CPU_UNARY(fn, TO, TI, ATTR) DLOP_CPU_UNARY_KERNEL(fn, TO, TI, ew_##fn, ATTR)
#define EW_CPU_BINARY(fn, TO, TI, ATTR) DLOP_CPU_BINARY_KERNEL(fn, TO, TI, ew_##fn, ATTR)

/* ---- the math-library ops: staged vector loops ------------------------------------------ */

/* The vector loops run over a multiple of EW_CPU_MATH_BLOCK elements (16: a whole number of
 * vectors at every width, 16 floats being one AVX-512 register), which gcc is told, so they
 * have no scalar remainder loop: every element goes through the same vector function, and a
 * result never depends on where its element falls (the contiguous body, a strided run, the
 * last few elements of a parallel chunk) — libmvec and libm may differ in the last ulp. What
 * does not fill a block, and every strided or 16-bit-float run, is staged: copied (and widened
 * to float) into a local buffer of EW_CPU_MATH_STAGE elements, padded to a whole block with
 * copies of its last element, computed there, and copied (and rounded) back. */
#define EW_CPU_MATH_BLOCK 16
#define EW_CPU_MATH_STAGE 256
#define EW_CPU_MATH_ASSUME_BLOCKS(n) \
  do {                                \
    if ((n) % EW_CPU_MATH_BLOCK) __builtin_unreachable(); \
  } while (0)

/* The rounded-up length of a staged run and its padding. */
static inline int64_t ew_cpu_math_pad(int64_t m) {
  return (m + EW_CPU_MATH_BLOCK - 1) / EW_CPU_MATH_BLOCK * EW_CPU_MATH_BLOCK;
}

/* z = F(x): T the storage type, C the compute type (float or double), LOAD and STORE the
 * conversions between them, DIRECT 1 when T is C (contiguous runs then skip the staging). */
#define EW_CPU_MATH_UNARY(NAME, T, C, F, LOAD, STORE, DIRECT)                                \
  DLOP_CPU_MULTIVERSION static void NAME##_blocks(C *z, const C *x, int64_t n) {             \
    EW_CPU_MATH_ASSUME_BLOCKS(n);                                                            \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = F(x[i]);                     \
  }                                                                                          \
  static void NAME(char *const *p, const int64_t *s, int64_t n, const void *params) {        \
    T *z = (T *)p[0];                                                                        \
    const T *x = (const T *)p[1];                                                            \
    int64_t done = 0;                                                                        \
    C stage[EW_CPU_MATH_STAGE];                                                              \
    (void)params;                                                                            \
    if (DIRECT && s[0] == 1 && s[1] == 1) {                                                  \
      done = n - n % EW_CPU_MATH_BLOCK;                                                      \
      NAME##_blocks((C *)(void *)z, (const C *)(const void *)x, done);                       \
    }                                                                                        \
    while (done < n) {                                                                       \
      int64_t m = n - done < EW_CPU_MATH_STAGE ? n - done : EW_CPU_MATH_STAGE, k;            \
      int64_t padded = ew_cpu_math_pad(m);                                                   \
      for (k = 0; k < m; k++) stage[k] = LOAD(x[(done + k) * s[1]]);                         \
      for (; k < padded; k++) stage[k] = stage[m - 1];                                       \
      NAME##_blocks(stage, stage, padded);                                                   \
      for (k = 0; k < m; k++) z[(done + k) * s[0]] = STORE(stage[k]);                        \
      done += m;                                                                             \
    }                                                                                        \
  }

/* z = F(a, b), likewise (a broadcast operand has stride 0 and is staged like any other):
 * EW_CPU_MATH_BINARY_BLOCKS makes the vector loop NAME##_blocks over whole blocks,
 * EW_CPU_MATH_BINARY_RUN the kernel that feeds BLOCKS (that loop, or another function of
 * the same signature), EW_CPU_MATH_BINARY both. */
#define EW_CPU_MATH_BINARY_BLOCKS(NAME, C, F)                                                \
  DLOP_CPU_MULTIVERSION static void NAME##_blocks(C *z, const C *a, const C *b, int64_t n) { \
    EW_CPU_MATH_ASSUME_BLOCKS(n);                                                            \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = F(a[i], b[i]);               \
  }
#define EW_CPU_MATH_BINARY(NAME, T, C, F, LOAD, STORE, DIRECT) \
  EW_CPU_MATH_BINARY_BLOCKS(NAME, C, F)                        \
  EW_CPU_MATH_BINARY_RUN(NAME, T, C, NAME##_blocks, LOAD, STORE, DIRECT)
#define EW_CPU_MATH_BINARY_RUN(NAME, T, C, BLOCKS, LOAD, STORE, DIRECT)                      \
  static void NAME(char *const *p, const int64_t *s, int64_t n, const void *params) {        \
    T *z = (T *)p[0];                                                                        \
    const T *a = (const T *)p[1], *b = (const T *)p[2];                                      \
    int64_t done = 0;                                                                        \
    C stage_a[EW_CPU_MATH_STAGE], stage_b[EW_CPU_MATH_STAGE];                                \
    (void)params;                                                                            \
    if (DIRECT && s[0] == 1 && s[1] == 1 && s[2] == 1) {                                     \
      done = n - n % EW_CPU_MATH_BLOCK;                                                      \
      BLOCKS((C *)(void *)z, (const C *)(const void *)a, (const C *)(const void *)b, done);   \
    }                                                                                        \
    while (done < n) {                                                                       \
      int64_t m = n - done < EW_CPU_MATH_STAGE ? n - done : EW_CPU_MATH_STAGE, k;            \
      int64_t padded = ew_cpu_math_pad(m);                                                   \
      for (k = 0; k < m; k++) {                                                              \
        stage_a[k] = LOAD(a[(done + k) * s[1]]);                                             \
        stage_b[k] = LOAD(b[(done + k) * s[2]]);                                             \
      }                                                                                      \
      for (; k < padded; k++) {                                                              \
        stage_a[k] = stage_a[m - 1];                                                         \
        stage_b[k] = stage_b[m - 1];                                                         \
      }                                                                                      \
      BLOCKS(stage_a, stage_a, stage_b, padded);                                             \
      for (k = 0; k < m; k++) z[(done + k) * s[0]] = STORE(stage_a[k]);                      \
      done += m;                                                                             \
    }                                                                                        \
  }

/* The math ops of one float dtype over the compute-type element functions ew_<op>f / ew_<op>d
 * of elemwise_scalar.h: X(name, storage type, compute type, function suffix, direct). */
#define EW_CPU_MATH_DTYPES(X)                                                                \
  X(float16, uint16_t, float, f, 0) X(bfloat16, uint16_t, float, f, 0)                       \
  X(float32, float, float, f, 1) X(float64, double, double, d, 1)

#endif
