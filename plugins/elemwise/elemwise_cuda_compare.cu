/* elemwise_cuda_compare.cu — the CUDA kernels of the comparisons (every dtype, bool results)
 * and of where (every dtype): a strided kernel and a contiguous one whose step is one 16-byte
 * vector of the output (16 bools; where: 16 bytes of values), with the matching elements of
 * each input in aligned vector loads (elemwise_cuda.cuh). Broadcasts go to the strided kernel.
 * Embedded as dlop_elemwise_elemwise_cuda_compare_fatbin. */
#include "elemwise_cuda.cuh"


#define COMPARE(name, T)                                           \
  EW_CUDA_COMPARE(equal, name, T)                                  \
  EW_CUDA_COMPARE(not_equal, name, T)                              \
  EW_CUDA_COMPARE(less, name, T)                                   \
  EW_CUDA_COMPARE(less_equal, name, T)                             \
  EW_CUDA_COMPARE(greater, name, T)                                \
  EW_CUDA_COMPARE(greater_equal, name, T)                          \
  EW_CUDA_WHERE(name, T)
EW_CUDA_ALL_DTYPES(COMPARE)
