/* elemwise_cpu_cast.c — the CPU kernels of cast, one per (from, to) pair of dtypes, around
 * elemwise_scalar.h's ew_cast_<from>_<to> (the same code the CUDA kernels run, so both devices
 * agree bit for bit). A cast to the same dtype copies bits (elemwise_kernel_dtypes picks the
 * same-size integer kernel). Casts from float32 and float64 get three copies (AVX-512, AVX2,
 * baseline; EW_CPU_HOT_<dtype>), the others the baseline. */
#include "elemwise_cpu.h"

#define CAST_KERNEL(from, TF, DTF, to, TT, DTT)                                              \
  EW_CAST_ONE(from, TF, to, TT)                                                              \
  EW_CPU_UNARY(cast_##from##_##to, TT, TF, EW_CPU_HOT_##from)
#define CAST_ENTRY(from, TF, DTF, to, TT, DTT) [DTF][DTT] = cast_##from##_##to,

/* Expand the pairs by hand-listed sources: the preprocessor cannot nest an X-macro in itself. */
#define CAST_ROW(X, from, TF, DTF)                                                           \
  X(from, TF, DTF, bool, uint8_t, DLOP_BOOL) X(from, TF, DTF, int8, int8_t, DLOP_INT8)       \
  X(from, TF, DTF, int16, int16_t, DLOP_INT16) X(from, TF, DTF, int32, int32_t, DLOP_INT32)  \
  X(from, TF, DTF, int64, int64_t, DLOP_INT64) X(from, TF, DTF, uint8, uint8_t, DLOP_UINT8)  \
  X(from, TF, DTF, float16, uint16_t, DLOP_FLOAT16)                                          \
  X(from, TF, DTF, bfloat16, uint16_t, DLOP_BFLOAT16)                                        \
  X(from, TF, DTF, float32, float, DLOP_FLOAT32) X(from, TF, DTF, float64, double, DLOP_FLOAT64)
#define CAST_ALL(X)                                                                          \
  CAST_ROW(X, bool, uint8_t, DLOP_BOOL) CAST_ROW(X, int8, int8_t, DLOP_INT8)                 \
  CAST_ROW(X, int16, int16_t, DLOP_INT16) CAST_ROW(X, int32, int32_t, DLOP_INT32)            \
  CAST_ROW(X, int64, int64_t, DLOP_INT64) CAST_ROW(X, uint8, uint8_t, DLOP_UINT8)            \
  CAST_ROW(X, float16, uint16_t, DLOP_FLOAT16) CAST_ROW(X, bfloat16, uint16_t, DLOP_BFLOAT16) \
  CAST_ROW(X, float32, float, DLOP_FLOAT32) CAST_ROW(X, float64, double, DLOP_FLOAT64)

CAST_ALL(CAST_KERNEL)

const dlop_elementwise_cpu_kernel elemwise_cpu_cast_kernels[DLOP_DTYPE_COUNT][DLOP_DTYPE_COUNT] = {
    CAST_ALL(CAST_ENTRY)};
