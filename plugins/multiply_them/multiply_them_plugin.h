/* multiply_them_plugin.h — declarations shared by the files of the multiply_them plugin
 * (z = a * b with broadcasting). Hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_MULTIPLY_THEM_PLUGIN_H
#define DLOP_MULTIPLY_THEM_PLUGIN_H

#include <dlop/kit/elementwise.h>

#define MULTIPLY_THEM_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* The element functions: the CPU kernels' (multiply_them_cpu.c) and, as text, the scalar body's
 * (plugin.c). Integers multiply in the unsigned type of at least their width (so uint16 does not
 * promote to a signed int that overflows) and wrap like NumPy; 16-bit floats multiply exactly
 * in float and round once (the scalar body computes them in float32 and the host rounds). */
#define MUL_INT8(x, y) ((int8_t)(uint8_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT16(x, y) ((int16_t)(uint16_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT32(x, y) ((int32_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT64(x, y) ((int64_t)((uint64_t)(x) * (uint64_t)(y)))
#define MUL_UINT8(x, y) ((uint8_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_FLOAT16(x, y) dlop_float_to_half(dlop_half_to_float(x) * dlop_half_to_float(y))
#define MUL_BFLOAT16(x, y) \
  dlop_float_to_bfloat16(dlop_bfloat16_to_float(x) * dlop_bfloat16_to_float(y))
#define MUL_FLOAT(x, y) ((x) * (y))

/* z = a * b on one run of the loop, for each dtype of MULTIPLY_THEM_DTYPES (multiply_them_cpu.c). */
extern const dlop_elementwise_cpu_kernel multiply_them_cpu_kernels[DLOP_DTYPE_COUNT];

#endif
