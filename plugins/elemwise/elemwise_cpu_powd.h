/* elemwise_cpu_powd.h — pow for double with AVX-512 (elemwise_cpu_powd.c): what the CPU kernel
 * of float64 pow calls where the CPU has AVX-512 F, DQ, BW and VL; libmvec's pow elsewhere. */
#ifndef DLOP_ELEMWISE_CPU_POWD_H
#define DLOP_ELEMWISE_CPU_POWD_H

#include <stdint.h>

/* z[i] = pow(x[i], y[i]) for i in [0, n), within 1 ulp, every special case (zeros, infinities,
 * NaN, negative bases, subnormal inputs, results near overflow or subnormal) as C's pow gives
 * it. z may be x or y. Only where ew_cpu_avx512_kernels_available(). */
void ew_cpu_powd_fast(double *z, const double *x, const double *y, int64_t n);

#endif
