/* elemwise_cpu.h — the dtype lists and kernel macros shared by the elemwise plugin's CPU kernel
 * files: each op and dtype gets a dlop_elementwise_cpu_kernel from the kit's macros around
 * elemwise_scalar.h's element function ew_<op>_<dtype>. */
#ifndef DLOP_ELEMWISE_CPU_H
#define DLOP_ELEMWISE_CPU_H

#include "elemwise_plugin.h"
#include "elemwise_scalar.h"

/* X(name, storage type, dlop dtype) */
#define EW_CPU_INT_DTYPES(X) \
  X(int8, int8_t, DLOP_INT8) X(int16, int16_t, DLOP_INT16) X(int32, int32_t, DLOP_INT32) \
  X(int64, int64_t, DLOP_INT64) X(uint8, uint8_t, DLOP_UINT8)
#define EW_CPU_FLOAT_DTYPES(X) \
  X(float16, uint16_t, DLOP_FLOAT16) X(bfloat16, uint16_t, DLOP_BFLOAT16) \
  X(float32, float, DLOP_FLOAT32) X(float64, double, DLOP_FLOAT64)
#define EW_CPU_NUMERIC_DTYPES(X) EW_CPU_INT_DTYPES(X) EW_CPU_FLOAT_DTYPES(X)
#define EW_CPU_ALL_DTYPES(X) X(bool, uint8_t, DLOP_BOOL) EW_CPU_NUMERIC_DTYPES(X)

/* No attribute: for loops around math-library calls, which gcc does not vectorize anyway
 * (building three copies of them would only cost compile time). */
#define EW_CPU_PLAIN

/* The kernel fn (z = ew_fn(x) or ew_fn(a, b)) with output type TO and input type TI. */
#define EW_CPU_UNARY(fn, TO, TI, ATTR) DLOP_CPU_UNARY_KERNEL(fn, TO, TI, ew_##fn, ATTR)
#define EW_CPU_BINARY(fn, TO, TI, ATTR) DLOP_CPU_BINARY_KERNEL(fn, TO, TI, ew_##fn, ATTR)

#endif
