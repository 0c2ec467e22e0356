/* dlop/kit/elementwise_cpu.h — the CPU kernels of an elementwise op (dlop_elementwise_cpu_kernel,
 * one run of the loop) from its element function: the contiguous loop gcc vectorizes, the
 * broadcast cases of a binary op (one side held fixed) and a strided loop for anything else. */
#ifndef DLOP_ELEMENTWISE_CPU_H
#define DLOP_ELEMENTWISE_CPU_H

#include <stdint.h>

#include "strided_loop.h" /* DLOP_CPU_MULTIVERSION */

/* NAME is the kernel (for the spec's cpu_kernels), F the element function or function-like
 * macro, TO the output's and TI the inputs' C type. ATTR is DLOP_CPU_MULTIVERSION for the loops
 * gcc vectorizes (an AVX-512, an AVX2 and a baseline copy, picked at load time) or nothing (a
 * loop around math-library calls gains nothing from three copies). The output may be an input
 * (an op with an inplace_map), so nothing is restrict; ivdep tells gcc the loop carries no
 * dependence, which holds for same-index aliasing too. Ops with parameters write their kernel
 * by hand: it reads its parameter block once, before the loop. */

/* z = F(x) */
#define DLOP_CPU_UNARY_KERNEL(NAME, TO, TI, F, ATTR)                                         \
  ATTR static void NAME##_contiguous(TO *z, const TI *x, int64_t n) {                        \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = F(x[i]);                     \
  }                                                                                          \
  static void NAME(char *const *p, const int64_t *s, int64_t n, const void *params) {        \
    TO *z = (TO *)p[0];                                                                      \
    const TI *x = (const TI *)p[1];                                                          \
    (void)params;                                                                            \
    if (s[0] == 1 && s[1] == 1) {                                                            \
      NAME##_contiguous(z, x, n);                                                            \
      return;                                                                                \
    }                                                                                        \
    for (int64_t i = 0; i < n; i++) z[i * s[0]] = F(x[i * s[1]]);                            \
  }

/* z = F(a, b): contiguous, one side held fixed (a broadcast column or scalar: stride 0), or
 * anything else */
#define DLOP_CPU_BINARY_KERNEL(NAME, TO, TI, F, ATTR)                                        \
  ATTR static void NAME##_vv(TO *z, const TI *a, const TI *b, int64_t n) {                   \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = F(a[i], b[i]);               \
  }                                                                                          \
  ATTR static void NAME##_vs(TO *z, const TI *a, TI b, int64_t n) {                          \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = F(a[i], b);                  \
  }                                                                                          \
  ATTR static void NAME##_sv(TO *z, TI a, const TI *b, int64_t n) {                          \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = F(a, b[i]);                  \
  }                                                                                          \
  static void NAME(char *const *p, const int64_t *s, int64_t n, const void *params) {        \
    TO *z = (TO *)p[0];                                                                      \
    const TI *a = (const TI *)p[1], *b = (const TI *)p[2];                                   \
    (void)params;                                                                            \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) NAME##_vv(z, a, b, n);                          \
    else if (s[0] == 1 && s[1] == 1 && s[2] == 0) NAME##_vs(z, a, b[0], n);                  \
    else if (s[0] == 1 && s[1] == 0 && s[2] == 1) NAME##_sv(z, a[0], b, n);                  \
    else                                                                                     \
      for (int64_t i = 0; i < n; i++) z[i * s[0]] = F(a[i * s[1]], b[i * s[2]]);             \
  }

#endif
