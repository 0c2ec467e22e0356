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
  extern "C" __global__ void dlop_elemwise_where_strided_##name(   \
      const uint8_t *c, const T *x, const T *y, T *z, int64_t n, dlop_nd_offsets o) { \
    ew_cuda_where_strided(c, x, y, z, n, o);                       \
  }
EW_CUDA_ALL_DTYPES(COMPARE)

