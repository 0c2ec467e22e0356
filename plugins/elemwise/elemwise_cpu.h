/* elemwise_cpu.h — the dtype lists and loop shapes shared by the elemwise plugin's CPU kernel
 * files: each op and dtype gets an inner function (elemwise_cpu_inner_fn) that takes the
 * contiguous loop gcc vectorizes when every stride is 1 and a plain strided loop otherwise. */
#ifndef DLOP_ELEMWISE_CPU_H
#define DLOP_ELEMWISE_CPU_H

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

/* No attribute: for loops around math-library calls, which gcc does not vectorize anyway
 * (building three copies of them would only cost compile time). */
#define EW_CPU_PLAIN

/* The output may be input 0 itself (the ops declare inplace_map), so nothing is restrict;
 * ivdep tells gcc the loop carries no dependence, which holds for same-index aliasing too. */

/* z = f(x) with output type TO and input type TI. */
#define EW_CPU_UNARY(fn, TO, TI, ATTR)                                                       \
  ATTR static void fn##_contiguous(TO *z, const TI *x, int64_t n) {                          \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = ew_##fn(x[i]);               \
  }                                                                                          \
  static void fn##_inner(char *const *p, const int64_t *s, int64_t n) {                      \
    TO *z = (TO *)p[0];                                                                      \
    const TI *x = (const TI *)p[1];                                                          \
    if (s[0] == 1 && s[1] == 1) {                                                            \
      fn##_contiguous(z, x, n);                                                              \
      return;                                                                                \
    }                                                                                        \
    for (int64_t i = 0; i < n; i++) z[i * s[0]] = ew_##fn(x[i * s[1]]);                      \
  }

/* z = f(a, b): contiguous, one side held fixed (a broadcast column or scalar: stride 0), or
 * anything else. */
#define EW_CPU_BINARY(fn, TO, TI, ATTR)                                                      \
  ATTR static void fn##_vv(TO *z, const TI *a, const TI *b, int64_t n) {                     \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = ew_##fn(a[i], b[i]);         \
  }                                                                                          \
  ATTR static void fn##_vs(TO *z, const TI *a, TI b, int64_t n) {                            \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = ew_##fn(a[i], b);            \
  }                                                                                          \
  ATTR static void fn##_sv(TO *z, TI a, const TI *b, int64_t n) {                            \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = ew_##fn(a, b[i]);            \
  }                                                                                          \
  static void fn##_inner(char *const *p, const int64_t *s, int64_t n) {                      \
    TO *z = (TO *)p[0];                                                                      \
    const TI *a = (const TI *)p[1], *b = (const TI *)p[2];                                   \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) fn##_vv(z, a, b, n);                            \
    else if (s[0] == 1 && s[1] == 1 && s[2] == 0) fn##_vs(z, a, b[0], n);                    \
    else if (s[0] == 1 && s[1] == 0 && s[2] == 1) fn##_sv(z, a[0], b, n);                    \
    else                                                                                     \
      for (int64_t i = 0; i < n; i++) z[i * s[0]] = ew_##fn(a[i * s[1]], b[i * s[2]]);       \
  }

#endif
