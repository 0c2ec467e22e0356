/* multiply_them_cpu.c — the CPU kernels of multiply_them (z = a * b) for every dtype, made by the
 * kit's DLOP_CPU_BINARY_KERNEL: contiguous loops gcc vectorizes (built for AVX-512, AVX2 and
 * baseline), including the broadcast cases of one operand held fixed (stride 0), and a strided
 * loop for anything else. */
#include "multiply_them_plugin.h"

/* Integers multiply in the unsigned type of at least their width (so uint16 does not promote
 * to a signed int that overflows) and wrap like NumPy; 16-bit floats multiply exactly in float
 * and round once. */
#define MUL_INT8(x, y) ((int8_t)(uint8_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT16(x, y) ((int16_t)(uint16_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT32(x, y) ((int32_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT64(x, y) ((int64_t)((uint64_t)(x) * (uint64_t)(y)))
#define MUL_UINT8(x, y) ((uint8_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_FLOAT16(x, y) dlop_float_to_half(dlop_half_to_float(x) * dlop_half_to_float(y))
#define MUL_BFLOAT16(x, y) \
  dlop_float_to_bfloat16(dlop_bfloat16_to_float(x) * dlop_bfloat16_to_float(y))
#define MUL_FLOAT(x, y) ((x) * (y))

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
