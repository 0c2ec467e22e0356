/* copy_kernels.cu — the strided-gather kernels behind dlop__tensor_copy on CUDA: one thread per
 * element in a grid-stride loop, any strides (negative and zero too) on either side. Built by
 * nvcc into a fatbin embedded in libdlop as dlop__copy_kernels_fatbin (see copy.c). */
#include <stdint.h>

#include "copy_layout.h"

template <typename T>
__device__ void strided_copy(const T *__restrict__ source, T *__restrict__ destination,
                             const dlop__copy_layout &layout) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t linear = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; linear < layout.numel;
       linear += step) {
    int64_t rest = linear, source_offset = 0, destination_offset = 0;
    /* Innermost dimension first: consecutive threads touch consecutive inner indices. */
    for (int d = layout.ndim - 1; d >= 0; d--) {
      const int64_t size = layout.shape[d];
      const int64_t index = rest % size;
      rest /= size;
      source_offset += index * layout.source_strides[d];
      destination_offset += index * layout.destination_strides[d];
    }
    destination[destination_offset] = source[source_offset];
  }
}

extern "C" __global__ void dlop_copy_strided_1(const uint8_t *source, uint8_t *destination,
                                               dlop__copy_layout layout) {
  strided_copy(source, destination, layout);
}
extern "C" __global__ void dlop_copy_strided_2(const uint16_t *source, uint16_t *destination,
                                               dlop__copy_layout layout) {
  strided_copy(source, destination, layout);
}
extern "C" __global__ void dlop_copy_strided_4(const uint32_t *source, uint32_t *destination,
                                               dlop__copy_layout layout) {
  strided_copy(source, destination, layout);
}
extern "C" __global__ void dlop_copy_strided_8(const uint64_t *source, uint64_t *destination,
                                               dlop__copy_layout layout) {
  strided_copy(source, destination, layout);
}
