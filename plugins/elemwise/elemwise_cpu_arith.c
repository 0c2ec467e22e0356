/* elemwise_cpu_arith.c — the CPU kernels of the binary arithmetic ops: add, sub, mul, maximum,
 * minimum for every numeric dtype, div and pow for the floats (elemwise_scalar.h says what each
 * does to one element; elemwise_cpu.h gives the loops, pow's the staged vector-math one, whose
 * float and double loops are elemwise_cpu_powf.c's and elemwise_cpu_powd.c's on AVX-512 CPUs). */
#include "elemwise_cpu.h"
#include "elemwise_cpu_avx512.h"
#include "elemwise_cpu_powd.h"
#include "elemwise_cpu_powf.h"

#define ARITH_CHEAP(name, T, DT)                                   \
  EW_CPU_BINARY(add_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(sub_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(mul_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(maximum_##name, T, T, DLOP_CPU_MULTIVERSION)       \
  EW_CPU_BINARY(minimum_##name, T, T, DLOP_CPU_MULTIVERSION)
EW_CPU_NUMERIC_DTYPES(ARITH_CHEAP)

#define ARITH_DIV(name, T, DT) EW_CPU_BINARY(div_##name, T, T, DLOP_CPU_MULTIVERSION)
EW_CPU_FLOAT_DTYPES(ARITH_DIV)

/* pow's vector loops: the AVX-512 kernels of elemwise_cpu_powf.c (float: float32, and float16
 * and bfloat16 widened to it; 2.3x libmvec's powf on a Zen 4) and elemwise_cpu_powd.c (double;
 * 1.4x libmvec's pow) where the CPU has them, libmvec's powf and pow elsewhere. */
EW_CPU_MATH_BINARY_BLOCKS(pow_libmvec_f, float, ew_powf)
EW_CPU_MATH_BINARY_BLOCKS(pow_libmvec_d, double, ew_powd)
static void pow_f_blocks(float *z, const float *a, const float *b, int64_t n) {
  if (ew_cpu_avx512_kernels_available()) ew_cpu_powf_fast(z, a, b, n);
  else pow_libmvec_f_blocks(z, a, b, n);
}
static void pow_d_blocks(double *z, const double *a, const double *b, int64_t n) {
  if (ew_cpu_avx512_kernels_available()) ew_cpu_powd_fast(z, a, b, n);
  else pow_libmvec_d_blocks(z, a, b, n);
}
#define ARITH_POW(name, T, C, F, DIRECT) \
  EW_CPU_MATH_BINARY_RUN(pow_##name, T, C, pow_##F##_blocks, ew_load_##name, ew_store_##name, DIRECT)
EW_CPU_MATH_DTYPES(ARITH_POW)

#define ARITH_ENTRY_CHEAP(name, T, DT)                                                       \
  [EW_ADD][DT] = add_##name, [EW_SUB][DT] = sub_##name, [EW_MUL][DT] = mul_##name,           \
  [EW_MAXIMUM][DT] = maximum_##name, [EW_MINIMUM][DT] = minimum_##name,
#define ARITH_ENTRY_FLOAT(name, T, DT) [EW_DIV][DT] = div_##name, [EW_POW][DT] = pow_##name,

const dlop_elementwise_cpu_kernel elemwise_cpu_arith_kernels[EW_POW - EW_ADD + 1][DLOP_DTYPE_COUNT] = {
    EW_CPU_NUMERIC_DTYPES(ARITH_ENTRY_CHEAP) EW_CPU_FLOAT_DTYPES(ARITH_ENTRY_FLOAT)};
