/* double_cpu.c — the CPU kernels of double (y = 2x), one per dtype, made by the kit's
 * DLOP_CPU_UNARY_KERNEL: a contiguous loop gcc vectorizes (built for AVX-512, AVX2 and
 * baseline) and a strided loop for any other layout. */
#include "double_plugin.h"

/* X(name, C type, dlop dtype, element function) */
#define DOUBLE_KERNELS(X)                                                                   \
  X(int8, int8_t, DLOP_INT8, DOUBLE_INT8) X(int16, int16_t, DLOP_INT16, DOUBLE_INT16)       \
  X(int32, int32_t, DLOP_INT32, DOUBLE_INT32) X(int64, int64_t, DLOP_INT64, DOUBLE_INT64)   \
  X(uint8, uint8_t, DLOP_UINT8, DOUBLE_UINT8)                                               \
  X(float16, uint16_t, DLOP_FLOAT16, DOUBLE_FLOAT16)                                        \
  X(bfloat16, uint16_t, DLOP_BFLOAT16, DOUBLE_BFLOAT16)                                     \
  X(float32, float, DLOP_FLOAT32, DOUBLE_FLOAT32) X(float64, double, DLOP_FLOAT64, DOUBLE_FLOAT64)

#define DOUBLE_KERNEL(name, T, DT, F) DLOP_CPU_UNARY_KERNEL(double_##name, T, T, F, DLOP_CPU_MULTIVERSION)
#define DOUBLE_ENTRY(name, T, DT, F) [DT] = double_##name,
DOUBLE_KERNELS(DOUBLE_KERNEL)

const dlop_elementwise_cpu_kernel double_cpu_kernels[DLOP_DTYPE_COUNT] = {DOUBLE_KERNELS(DOUBLE_ENTRY)};
