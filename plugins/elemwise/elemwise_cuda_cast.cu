/* elemwise_cuda_cast.cu — the CUDA kernels of cast, one strided kernel per (from, to) pair,
 * dlop_elemwise_cast_strided_<from>_<to>, around elemwise_scalar.h's ew_cast_<from>_<to>: the
 * code the CPU kernels run, so both devices agree bit for bit. Embedded as
 * dlop_elemwise_elemwise_cuda_cast_fatbin. */
#include "elemwise_cuda.cuh"


#define CAST_KERNEL(from, TF, to, TT)                                                        \
  EW_CAST_ONE(from, TF, to, TT)                                                              \
  EW_CUDA_STRIDED1(cast, from##_##to, TT, TF)

#define CAST_ROW(X, from, TF)                                                                \
  X(from, TF, bool, uint8_t) X(from, TF, int8, int8_t) X(from, TF, int16, int16_t)           \
  X(from, TF, int32, int32_t) X(from, TF, int64, int64_t) X(from, TF, uint8, uint8_t)        \
  X(from, TF, float16, uint16_t) X(from, TF, bfloat16, uint16_t) X(from, TF, float32, float) \
  X(from, TF, float64, double)
#define CAST_ALL(X)                                                                          \
  CAST_ROW(X, bool, uint8_t) CAST_ROW(X, int8, int8_t) CAST_ROW(X, int16, int16_t)           \
  CAST_ROW(X, int32, int32_t) CAST_ROW(X, int64, int64_t) CAST_ROW(X, uint8, uint8_t)        \
  CAST_ROW(X, float16, uint16_t) CAST_ROW(X, bfloat16, uint16_t) CAST_ROW(X, float32, float) \
  CAST_ROW(X, float64, double)

CAST_ALL(CAST_KERNEL)

