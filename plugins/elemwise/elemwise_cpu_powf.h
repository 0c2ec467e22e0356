/* elemwise_cpu_powf.h — pow for float computed in double with AVX-512 (elemwise_cpu_powf.c):
 * what the CPU kernels of float32, float16 and bfloat16 pow call where the CPU has AVX-512 F,
 * DQ, BW and VL; libmvec's powf elsewhere. */
#ifndef DLOP_ELEMWISE_CPU_POWF_H
#define DLOP_ELEMWISE_CPU_POWF_H

#include <stdint.h>

/* z[i] = powf(x[i], y[i]) for i in [0, n), within 1 ulp (0.52 measured), every special case
 * (zeros, infinities, NaN, negative bases, subnormal inputs and results) as C's powf gives
 * it. z may be x or y. Only where ew_cpu_avx512_kernels_available(). */
void ew_cpu_powf_fast(float *z, const float *x, const float *y, int64_t n);

#endif
