/* multiply_them_cuda.cu — the CUDA kernels of multiply_them (z = a * b), a contiguous, a rows
 * (matrix times row/column/scalar) and a strided (any broadcast) kernel per dtype, named
 * dlop_multiply_them_{contiguous,rows,strided}_<dtype>.
 * nvcc compiles this into the fatbin embedded as dlop_multiply_them_multiply_them_cuda_fatbin. */
#include <dlop/kit/cuda_kernel_util.cuh>

namespace {

/* Integers wrap like NumPy (unsigned arithmetic of at least their width); 16-bit floats
 * multiply exactly in float and round once, as on the CPU. */
struct multiply_op {
  __device__ __forceinline__ int8_t operator()(int8_t a, int8_t b) const {
    return (int8_t)(uint8_t)((uint32_t)a * (uint32_t)b);
  }
  __device__ __forceinline__ int16_t operator()(int16_t a, int16_t b) const {
    return (int16_t)(uint16_t)((uint32_t)a * (uint32_t)b);
  }
  __device__ __forceinline__ int32_t operator()(int32_t a, int32_t b) const {
    return (int32_t)((uint32_t)a * (uint32_t)b);
  }
  __device__ __forceinline__ int64_t operator()(int64_t a, int64_t b) const {
    return (int64_t)((uint64_t)a * (uint64_t)b);
  }
  __device__ __forceinline__ uint8_t operator()(uint8_t a, uint8_t b) const {
    return (uint8_t)((uint32_t)a * (uint32_t)b);
  }
  __device__ __forceinline__ __half operator()(__half a, __half b) const {
    return dlop_cuda_from_float<__half>(dlop_cuda_to_float(a) * dlop_cuda_to_float(b));
  }
  __device__ __forceinline__ __nv_bfloat16 operator()(__nv_bfloat16 a, __nv_bfloat16 b) const {
    return dlop_cuda_from_float<__nv_bfloat16>(dlop_cuda_to_float(a) * dlop_cuda_to_float(b));
  }
  __device__ __forceinline__ float operator()(float a, float b) const { return __fmul_rn(a, b); }
  __device__ __forceinline__ double operator()(double a, double b) const { return __dmul_rn(a, b); }
};

}  // namespace

/* one 16-byte vector per thread in the contiguous kernel: the spec's cuda_contiguous_vectors */
#define MULTIPLY_THEM_CUDA_KERNELS(name, T) \
  DLOP_CUDA_BINARY_KERNELS(dlop_multiply_them, name, T, multiply_op, 1)

DLOP_CUDA_FLOAT_TYPES(MULTIPLY_THEM_CUDA_KERNELS)
DLOP_CUDA_INT_TYPES(MULTIPLY_THEM_CUDA_KERNELS)
