/* elemwise_cpu_compare.c — the CPU kernels of the comparisons (bool results, every dtype) and of
 * where(condition, x, y): three copies (AVX-512, AVX2, baseline) for float32 and float64, the
 * baseline (still vectorized by gcc -O3) for the rest (EW_CPU_HOT_<dtype>). */
#include "elemwise_cpu.h"

#define COMPARE(name, T, DT)                                                \
  EW_CPU_BINARY(equal_##name, uint8_t, T, EW_CPU_HOT_##name)                 \
  EW_CPU_BINARY(not_equal_##name, uint8_t, T, EW_CPU_HOT_##name)             \
  EW_CPU_BINARY(less_##name, uint8_t, T, EW_CPU_HOT_##name)                  \
  EW_CPU_BINARY(less_equal_##name, uint8_t, T, EW_CPU_HOT_##name)            \
  EW_CPU_BINARY(greater_##name, uint8_t, T, EW_CPU_HOT_##name)               \
  EW_CPU_BINARY(greater_equal_##name, uint8_t, T, EW_CPU_HOT_##name)
EW_CPU_ALL_DTYPES(COMPARE)

/* where copies x's or y's element bits unchanged; any nonzero condition byte is true. */
#define WHERE(name, T, DT)                                                                   \
  EW_CPU_HOT_##name static void where_##name##_contiguous(T *z, const uint8_t *c, const T *x, \
                                                          const T *y, int64_t n) {          \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = c[i] ? x[i] : y[i];          \
  }                                                                                          \
  static void where_##name(char *const *p, const int64_t *s, int64_t n, const void *params) { \
    T *z = (T *)p[0];                                                                        \
    const uint8_t *c = (const uint8_t *)p[1];                                                \
    const T *x = (const T *)p[2], *y = (const T *)p[3];                                      \
    (void)params;                                                                            \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                                  \
      where_##name##_contiguous(z, c, x, y, n);                                              \
      return;                                                                                \
    }                                                                                        \
    for (int64_t i = 0; i < n; i++) z[i * s[0]] = c[i * s[1]] ? x[i * s[2]] : y[i * s[3]];   \
  }
EW_CPU_ALL_DTYPES(WHERE)

#define COMPARE_ENTRY(name, T, DT)                                                           \
  [EW_EQUAL - EW_EQUAL][DT] = equal_##name, [EW_NOT_EQUAL - EW_EQUAL][DT] = not_equal_##name, \
  [EW_LESS - EW_EQUAL][DT] = less_##name, [EW_LESS_EQUAL - EW_EQUAL][DT] = less_equal_##name, \
  [EW_GREATER - EW_EQUAL][DT] = greater_##name,                                              \
  [EW_GREATER_EQUAL - EW_EQUAL][DT] = greater_equal_##name,                                  \
  [EW_WHERE - EW_EQUAL][DT] = where_##name,

/* op - EW_EQUAL, then the compared dtype, or where's x and y dtype */
const dlop_elementwise_cpu_kernel elemwise_cpu_compare_kernels[EW_WHERE - EW_EQUAL + 1][DLOP_DTYPE_COUNT] = {
    EW_CPU_ALL_DTYPES(COMPARE_ENTRY)};
