/* elemwise_cpu_unary.c — the CPU kernels of the unary ops: neg and abs for every numeric dtype,
 * sqrt for the floats (vectorized, exact), and log, tanh and sigmoid for the floats through the
 * staged vector loops of elemwise_cpu.h (glibc's vector math). */
#include "elemwise_cpu.h"

#define UNARY_CHEAP(name, T, DT)                                   \
  EW_CPU_UNARY(neg_##name, T, T, DLOP_CPU_MULTIVERSION)            \
  EW_CPU_UNARY(abs_##name, T, T, DLOP_CPU_MULTIVERSION)
EW_CPU_NUMERIC_DTYPES(UNARY_CHEAP)

#define UNARY_SQRT(name, T, DT) EW_CPU_UNARY(sqrt_##name, T, T, DLOP_CPU_MULTIVERSION)
EW_CPU_FLOAT_DTYPES(UNARY_SQRT)

#define UNARY_MATH(name, T, C, F, DIRECT)                                                    \
  EW_CPU_MATH_UNARY(log_##name, T, C, ew_log##F, ew_load_##name, ew_store_##name, DIRECT)   \
  EW_CPU_MATH_UNARY(tanh_##name, T, C, ew_tanh##F, ew_load_##name, ew_store_##name, DIRECT) \
  EW_CPU_MATH_UNARY(sigmoid_##name, T, C, ew_sigmoid##F, ew_load_##name, ew_store_##name, DIRECT)
EW_CPU_MATH_DTYPES(UNARY_MATH)

#define UNARY_ENTRY_CHEAP(name, T, DT) \
  [EW_NEG - EW_NEG][DT] = neg_##name, [EW_ABS - EW_NEG][DT] = abs_##name,
#define UNARY_ENTRY_FLOAT(name, T, DT)                                                       \
  [EW_LOG - EW_NEG][DT] = log_##name, [EW_SQRT - EW_NEG][DT] = sqrt_##name,                  \
  [EW_TANH - EW_NEG][DT] = tanh_##name, [EW_SIGMOID - EW_NEG][DT] = sigmoid_##name,

const dlop_elementwise_cpu_kernel elemwise_cpu_unary_kernels[EW_SIGMOID - EW_NEG + 1][DLOP_DTYPE_COUNT] = {
    EW_CPU_NUMERIC_DTYPES(UNARY_ENTRY_CHEAP) EW_CPU_FLOAT_DTYPES(UNARY_ENTRY_FLOAT)};
