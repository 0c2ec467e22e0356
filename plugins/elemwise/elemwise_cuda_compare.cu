/* elemwise_cuda_compare.cu — the CUDA kernels of the comparisons (every dtype, bool results)
 * and of where (every dtype), strided kernels only: their operands differ in size, which the
 * SDK's vector bodies do not handle, and the 1-d case needs no division. Embedded as
 * dlop_elemwise_elemwise_cuda_compare_fatbin. */
#include "elemwise_cuda.cuh"


#define COMPARE(name, T)                                           \
  EW_CUDA_STRIDED2(equal, name, uint8_t, T)                        \
  EW_CUDA_STRIDED2(not_equal, name, uint8_t, T)                    \
  EW_CUDA_STRIDED2(less, name, uint8_t, T)                         \
  EW_CUDA_STRIDED2(less_equal, name, uint8_t, T)                   \
  EW_CUDA_STRIDED2(greater, name, uint8_t, T)                      \
  EW_CUDA_STRIDED2(greater_equal, name, uint8_t, T)                \
  EW_CUDA_WHERE(name, T)
EW_CUDA_ALL_DTYPES(COMPARE)

