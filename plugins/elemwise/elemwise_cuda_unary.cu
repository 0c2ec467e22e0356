/* elemwise_cuda_unary.cu — the CUDA kernels of the unary ops: neg and abs (every numeric dtype)
 * and sqrt, log, tanh and sigmoid (floats), each with a contiguous and a strided kernel. The
 * contiguous kernels load one 16-byte vector per step for the cheap ops (neg, abs, sqrt) and
 * two for log, tanh and sigmoid, whose arithmetic then overlaps the next load (plugin.c's
 * contiguous-vectors column matches). Embedded as dlop_elemwise_elemwise_cuda_unary_fatbin. */
#include "elemwise_cuda.cuh"


#define UNARY_CHEAP(name, T)                                       \
  EW_CUDA_UNARY_VECTOR(neg, name, T, 1)                            \
  EW_CUDA_UNARY_VECTOR(abs, name, T, 1)
EW_CUDA_NUMERIC_DTYPES(UNARY_CHEAP)

#define UNARY_FLOAT(name, T)                                       \
  EW_CUDA_UNARY_VECTOR(sqrt, name, T, 1)                           \
  EW_CUDA_UNARY_VECTOR(log, name, T, 2)                            \
  EW_CUDA_UNARY_VECTOR(tanh, name, T, 2)                           \
  EW_CUDA_UNARY_VECTOR(sigmoid, name, T, 2)
EW_CUDA_FLOAT_DTYPES(UNARY_FLOAT)
