/* elemwise_cpu_arith.c — the CPU kernels of the binary arithmetic ops: add, sub, mul, maximum,
 * minimum for every numeric dtype, div and pow for the floats (elemwise_scalar.h says what each
 * does to one element; elemwise_cpu.h gives the loops). */
#include "elemwise_cpu.h"

#define ARITH_CHEAP(name, T, DT)                                   \
  EW_CPU_BINARY(add_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(sub_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(mul_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(maximum_##name, T, T, DLOP_CPU_MULTIVERSION)       \
  EW_CPU_BINARY(minimum_##name, T, T, DLOP_CPU_MULTIVERSION)
EW_CPU_NUMERIC_DTYPES(ARITH_CHEAP)

#define ARITH_FLOAT(name, T, DT)                                   \
  EW_CPU_BINARY(div_##name, T, T, DLOP_CPU_MULTIVERSION)           \
  EW_CPU_BINARY(pow_##name, T, T, EW_CPU_PLAIN)
EW_CPU_FLOAT_DTYPES(ARITH_FLOAT)

#define ARITH_ENTRY_CHEAP(name, T, DT)                                                       \
  [EW_ADD][DT] = add_##name##_inner, [EW_SUB][DT] = sub_##name##_inner,                      \
  [EW_MUL][DT] = mul_##name##_inner, [EW_MAXIMUM][DT] = maximum_##name##_inner,              \
  [EW_MINIMUM][DT] = minimum_##name##_inner,
#define ARITH_ENTRY_FLOAT(name, T, DT) [EW_DIV][DT] = div_##name##_inner, [EW_POW][DT] = pow_##name##_inner,

static const elemwise_cpu_inner_fn arith_kernels[EW_POW + 1][DLOP_DTYPE_COUNT] = {
    EW_CPU_NUMERIC_DTYPES(ARITH_ENTRY_CHEAP) EW_CPU_FLOAT_DTYPES(ARITH_ENTRY_FLOAT)};

elemwise_cpu_inner_fn elemwise_cpu_arith(int32_t op, dlop_dtype dtype) {
  if (op < 0 || op > EW_POW || (int)dtype < 0 || (int)dtype >= DLOP_DTYPE_COUNT) return NULL;
  return arith_kernels[op][dtype];
}
