/* double_plugin.h — declarations shared by the files of the double plugin (y = 2x).
 * Everything here has hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_DOUBLE_PLUGIN_H
#define DLOP_DOUBLE_PLUGIN_H

#include <dlop/kit/elementwise.h>

#define DOUBLE_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* The element functions: the CPU kernels' (double_cpu.c) and, as text, the scalar body's
 * (plugin.c). Integers double in the unsigned type of their width so overflow wraps like NumPy
 * instead of being undefined; floats double exactly; 16-bit floats go through float (the scalar
 * body computes them in float32 and the host rounds, as these do). */
#define DOUBLE_INT8(v) ((int8_t)(uint32_t)((uint32_t)(v) * 2u))
#define DOUBLE_INT16(v) ((int16_t)(uint32_t)((uint32_t)(v) * 2u))
#define DOUBLE_INT32(v) ((int32_t)((uint32_t)(v) * 2u))
#define DOUBLE_INT64(v) ((int64_t)((uint64_t)(v) * 2u))
#define DOUBLE_UINT8(v) ((uint8_t)((uint32_t)(v) * 2u))
#define DOUBLE_FLOAT16(v) dlop_float_to_half(dlop_half_to_float(v) * 2.0f)
#define DOUBLE_BFLOAT16(v) dlop_float_to_bfloat16(dlop_bfloat16_to_float(v) * 2.0f)
#define DOUBLE_FLOAT32(v) ((v) * 2.0f)
#define DOUBLE_FLOAT64(v) ((v) * 2.0)

/* y = 2x on one run of the loop, for each dtype of DOUBLE_DTYPES (double_cpu.c). */
extern const dlop_elementwise_cpu_kernel double_cpu_kernels[DLOP_DTYPE_COUNT];

#endif
