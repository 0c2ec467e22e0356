/* elemwise_cpu_avx512.h — what the plugin's own AVX-512 kernels (elemwise_cpu_powf.c and
 * elemwise_cpu_powd.c) share: whether this build can have them (x86-64 with gcc or clang), the
 * target they are compiled for, and whether the CPU runs them. */
#ifndef DLOP_ELEMWISE_CPU_AVX512_H
#define DLOP_ELEMWISE_CPU_AVX512_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define EW_AVX512_HAVE_KERNELS 1
#include <immintrin.h>
#define EW_AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
#else
#define EW_AVX512_HAVE_KERNELS 0
#endif

/* 1 when this build has the kernels and the CPU runs them (AVX-512 F, DQ, BW and VL). */
static inline int ew_cpu_avx512_kernels_available(void) {
#if EW_AVX512_HAVE_KERNELS
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
  return 0;
#endif
}

#endif
