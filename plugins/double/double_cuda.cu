/* double_cuda.cu — the CUDA kernels of double (y = 2x), a contiguous, a rows and a strided
 * kernel per dtype, named dlop_double_{contiguous,rows,strided}_<dtype>. nvcc compiles this
 * into the fatbin embedded in the plugin as dlop_double_double_cuda_fatbin (see
 * cmake/DlopCuda.cmake). */
#include <dlop/kit/cuda_kernel_util.cuh>

namespace {

/* Integers wrap like NumPy: double in the unsigned type of the same width. */
struct double_op {
  __device__ __forceinline__ int8_t operator()(int8_t x) const { return (int8_t)(uint8_t)((uint32_t)x * 2u); }
  __device__ __forceinline__ int16_t operator()(int16_t x) const { return (int16_t)(uint16_t)((uint32_t)x * 2u); }
  __device__ __forceinline__ int32_t operator()(int32_t x) const { return (int32_t)((uint32_t)x * 2u); }
  __device__ __forceinline__ int64_t operator()(int64_t x) const { return (int64_t)((uint64_t)x * 2u); }
  __device__ __forceinline__ uint8_t operator()(uint8_t x) const { return (uint8_t)((uint32_t)x * 2u); }
  __device__ __forceinline__ __half operator()(__half x) const {
    return dlop_cuda_from_float<__half>(dlop_cuda_to_float(x) * 2.0f);
  }
  __device__ __forceinline__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
    return dlop_cuda_from_float<__nv_bfloat16>(dlop_cuda_to_float(x) * 2.0f);
  }
  __device__ __forceinline__ float operator()(float x) const { return x * 2.0f; }
  __device__ __forceinline__ double operator()(double x) const { return x * 2.0; }
};

}  // namespace

/* one 16-byte vector per thread in the contiguous kernel: the spec's cuda_contiguous_vectors */
#define DOUBLE_CUDA_KERNELS(name, T) DLOP_CUDA_UNARY_KERNELS(dlop_double, name, T, double_op, 1)

DLOP_CUDA_FLOAT_TYPES(DOUBLE_CUDA_KERNELS)
DLOP_CUDA_INT_TYPES(DOUBLE_CUDA_KERNELS)
