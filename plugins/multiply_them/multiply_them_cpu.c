/* multiply_them_cpu.c — the CPU kernels of multiply_them (z = a * b) for every dtype, made by the
 * kit's DLOP_CPU_BINARY_KERNEL: contiguous loops gcc vectorizes (built for AVX-512, AVX2 and
 * baseline), including the broadcast cases of one operand held fixed (stride 0), and a strided
 * loop for anything else. */
#include "multiply_them_plugin.h"

/* X(name, C type, dlop dtype, element function) */
#define MULTIPLY_THEM_KERNELS(X)                                                            \
  X(int8, int8_t, DLOP_INT8, MUL_INT8) X(int16, int16_t, DLOP_INT16, MUL_INT16)             \
  X(int32, int32_t, DLOP_INT32, MUL_INT32) X(int64, int64_t, DLOP_INT64, MUL_INT64)         \
  X(uint8, uint8_t, DLOP_UINT8, MUL_UINT8) X(float16, uint16_t, DLOP_FLOAT16, MUL_FLOAT16)  \
  X(bfloat16, uint16_t, DLOP_BFLOAT16, MUL_BFLOAT16) X(float32, float, DLOP_FLOAT32, MUL_FLOAT) \
  X(float64, double, DLOP_FLOAT64, MUL_FLOAT)

#define MULTIPLY_THEM_KERNEL(name, T, DT, F) \
  DLOP_CPU_BINARY_KERNEL(multiply_them_##name, T, T, F, DLOP_CPU_MULTIVERSION)
#define MULTIPLY_THEM_ENTRY(name, T, DT, F) [DT] = multiply_them_##name,
MULTIPLY_THEM_KERNELS(MULTIPLY_THEM_KERNEL)

const dlop_elementwise_cpu_kernel multiply_them_cpu_kernels[DLOP_DTYPE_COUNT] = {
    MULTIPLY_THEM_KERNELS(MULTIPLY_THEM_ENTRY)};
