/* elemwise_cuda_arith.cu — the CUDA kernels of the binary arithmetic ops: add, sub, mul,
 * maximum, minimum (every numeric dtype), div and pow (floats), each with contiguous, 2-d rows
 * and strided kernels. The contiguous kernels load one 16-byte vector of each input per step,
 * pow two (its arithmetic then overlaps the next loads; plugin.c's contiguous-vectors column
 * matches). Embedded as dlop_elemwise_elemwise_cuda_arith_fatbin. */
#include "elemwise_cuda.cuh"


#define ARITH_CHEAP(name, T)                                       \
  EW_CUDA_BINARY_VECTOR(add, name, T, 1)                           \
  EW_CUDA_BINARY_VECTOR(sub, name, T, 1)                           \
  EW_CUDA_BINARY_VECTOR(mul, name, T, 1)                           \
  EW_CUDA_BINARY_VECTOR(maximum, name, T, 1)                       \
  EW_CUDA_BINARY_VECTOR(minimum, name, T, 1)
EW_CUDA_NUMERIC_DTYPES(ARITH_CHEAP)

#define ARITH_FLOAT(name, T)                                       \
  EW_CUDA_BINARY_VECTOR(div, name, T, 1)                           \
  EW_CUDA_BINARY_VECTOR(pow, name, T, 2)
EW_CUDA_FLOAT_DTYPES(ARITH_FLOAT)
