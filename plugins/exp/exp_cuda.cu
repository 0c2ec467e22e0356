/* exp_cuda.cu — the CUDA kernels of exp (y = e^x), one contiguous and one strided kernel per
 * float dtype, named dlop_exp_{contiguous,strided}_<dtype>. nvcc compiles this into the fatbin
 * embedded in the plugin as dlop_exp_exp_cuda_fatbin (see cmake/DlopCuda.cmake). */
#include <dlop/cuda_kernel_util.cuh>

namespace {

/* expf and exp are CUDA's full-precision versions (nvcc runs without --use_fast_math):
 * within 2 ulp and correct at 0, +-inf and NaN, unlike __expf. 16-bit floats go through
 * float and round once. */
struct exp_op {
  __device__ __forceinline__ __half operator()(__half x) const {
    return dlop_cuda_from_float<__half>(expf(dlop_cuda_to_float(x)));
  }
  __device__ __forceinline__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
    return dlop_cuda_from_float<__nv_bfloat16>(expf(dlop_cuda_to_float(x)));
  }
  __device__ __forceinline__ float operator()(float x) const { return expf(x); }
  __device__ __forceinline__ double operator()(double x) const { return exp(x); }
};

}  // namespace

#define EXP_CUDA_KERNELS(name, T)                                                           \
  extern "C" __global__ void dlop_exp_contiguous_##name(const T *x, T *y, int64_t n) {      \
    dlop_cuda_unary_contiguous(x, y, n, exp_op());                                         \
  }                                                                                         \
  extern "C" __global__ void dlop_exp_strided_##name(const T *x, T *y, int64_t n,          \
                                                     dlop_nd_offsets offsets) {             \
    dlop_cuda_unary_strided(x, y, n, offsets, exp_op());                                   \
  }

DLOP_CUDA_FLOAT_TYPES(EXP_CUDA_KERNELS)
