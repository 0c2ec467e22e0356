/* elemwise_cuda_unary.cu — the CUDA kernels of the unary ops: neg and abs (every numeric dtype)
 * and sqrt, log, tanh and sigmoid (floats), each with a contiguous and a strided kernel. The
 * contiguous kernels load one 16-byte vector per step for the cheap ops (neg, abs) and
 * two for sqrt, log, tanh and sigmoid, whose arithmetic then overlaps the next load (plugin.c's
 * contiguous-vectors column matches); log, tanh and sigmoid of float32 and float64 in the
 * kit's chunk form (plugin.c's chunk dtypes column matches); float16 and bfloat16 widen and
 * narrow two elements at a time. Embedded as dlop_elemwise_elemwise_cuda_unary_fatbin. */
#include "elemwise_cuda.cuh"


#define UNARY_CHEAP(name, T)                                       \
  EW_CUDA_UNARY_VECTOR(neg, name, T, 1)                            \
  EW_CUDA_UNARY_VECTOR(abs, name, T, 1)
EW_CUDA_NUMERIC_DTYPES(UNARY_CHEAP)

#define UNARY_FLOAT(name, T)                                       \
  EW_CUDA_UNARY_VECTOR(sqrt, name, T, 2)                           \
  EW_CUDA_UNARY_CHUNKS(log, name, T, 2)                            \
  EW_CUDA_UNARY_CHUNKS(tanh, name, T, 2)                           \
  EW_CUDA_UNARY_CHUNKS(sigmoid, name, T, 2)
UNARY_FLOAT(float32, float)
UNARY_FLOAT(float64, double)

/* float16 and bfloat16: two elements per 32-bit word (elemwise_cuda.cuh) */
#define UNARY_HALF(name, S)                                        \
  EW_CUDA_UNARY16(sqrt, name, 2, ew_sqrt##S)                       \
  EW_CUDA_UNARY16(log, name, 2, ew_logf)                           \
  EW_CUDA_UNARY16(tanh, name, 2, ew_tanhf)                         \
  EW_CUDA_UNARY16(sigmoid, name, 2, ew_sigmoid##S)
UNARY_HALF(float16, 16f)
UNARY_HALF(bfloat16, b16f)
