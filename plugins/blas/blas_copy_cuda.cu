/* blas_copy_cuda.cu — the copy kernels of the blas plugin on CUDA: lay a strided operand out
 * contiguously for cuBLAS, broadcast gemm's c into the output, and copy a scratch output back.
 * Elements are moved as raw 2-, 4- or 8-byte words (dlop_blas_copy_{contiguous,rows,strided}_b<N>),
 * so one set serves every dtype. Embedded as dlop_blas_blas_copy_cuda_fatbin. */
#include <dlop/kit/cuda_kernel_util.cuh>

namespace {

struct identity_op {
  template <typename T>
  __device__ __forceinline__ T operator()(T x) const { return x; }
};

}  // namespace

#define BLAS_COPY_KERNELS(bytes, T)                                                         \
  extern "C" __global__ void dlop_blas_copy_contiguous_b##bytes(const T *x, T *y, int64_t n) { \
    dlop_cuda_unary_contiguous<1>(x, y, n, identity_op());                                  \
  }                                                                                         \
  extern "C" __global__ void dlop_blas_copy_rows_b##bytes(const T *x, T *y,                 \
                                                          dlop_rows_layout rows) {          \
    dlop_cuda_unary_rows(x, y, rows, identity_op());                                        \
  }                                                                                         \
  extern "C" __global__ void dlop_blas_copy_strided_b##bytes(const T *x, T *y, int64_t n,   \
                                                             dlop_nd_offsets offsets) {     \
    dlop_cuda_unary_strided(x, y, n, offsets, identity_op());                               \
  }

BLAS_COPY_KERNELS(2, uint16_t)
BLAS_COPY_KERNELS(4, uint32_t)
BLAS_COPY_KERNELS(8, uint64_t)
