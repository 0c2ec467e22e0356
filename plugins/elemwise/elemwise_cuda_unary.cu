/* elemwise_cuda_unary.cu — the CUDA kernels of the unary ops: neg and abs (every numeric dtype)
 * and sqrt (floats) with contiguous and strided kernels; log, tanh and sigmoid (floats) with the
 * strided one only. Embedded as dlop_elemwise_elemwise_cuda_unary_fatbin. */
#include "elemwise_cuda.cuh"


#define UNARY_CHEAP(name, T)                                       \
  EW_CUDA_UNARY_VECTOR(neg, name, T)                               \
  EW_CUDA_UNARY_VECTOR(abs, name, T)
EW_CUDA_NUMERIC_DTYPES(UNARY_CHEAP)

#define UNARY_FLOAT(name, T)                                       \
  EW_CUDA_UNARY_VECTOR(sqrt, name, T)                              \
  EW_CUDA_STRIDED1(log, name, T, T)                                \
  EW_CUDA_STRIDED1(tanh, name, T, T)                               \
  EW_CUDA_STRIDED1(sigmoid, name, T, T)
EW_CUDA_FLOAT_DTYPES(UNARY_FLOAT)

