/* elemwise_cuda_arith.cu — the CUDA kernels of the binary arithmetic ops: add, sub, mul,
 * maximum, minimum (every numeric dtype) and div (floats) with contiguous, rows and strided
 * kernels; pow (floats) with the strided one only. Embedded as
 * dlop_elemwise_elemwise_cuda_arith_fatbin. */
#include "elemwise_cuda.cuh"


#define ARITH_CHEAP(name, T)                                       \
  EW_CUDA_BINARY_VECTOR(add, name, T)                              \
  EW_CUDA_BINARY_VECTOR(sub, name, T)                              \
  EW_CUDA_BINARY_VECTOR(mul, name, T)                              \
  EW_CUDA_BINARY_VECTOR(maximum, name, T)                          \
  EW_CUDA_BINARY_VECTOR(minimum, name, T)
EW_CUDA_NUMERIC_DTYPES(ARITH_CHEAP)

#define ARITH_FLOAT(name, T)                                       \
  EW_CUDA_BINARY_VECTOR(div, name, T)                              \
  EW_CUDA_STRIDED2(pow, name, T, T)
EW_CUDA_FLOAT_DTYPES(ARITH_FLOAT)

