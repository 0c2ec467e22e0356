/* exp_cuda.cu — the CUDA kernels of exp (y = e^x), a contiguous, a rows and a strided kernel
 * per float dtype, named dlop_exp_{contiguous,rows,strided}_<dtype>. nvcc compiles this into
 * the fatbin embedded in the plugin as dlop_exp_exp_cuda_fatbin (see cmake/DlopCuda.cmake).
 * The element functions are exp_math.h's CUDA ones (the scalar body's prelude too). */
#include <dlop/kit/cuda_kernel_util.cuh>

#include "exp_math.h"

namespace {

/* exp_math.h's exp_of_float and exp_of_double (CUDA's full-precision expf and exp); 16-bit
 * floats go through float and round once. */
struct exp_op {
  __device__ __forceinline__ __half operator()(__half x) const {
    return dlop_cuda_from_float<__half>(exp_of_float(dlop_cuda_to_float(x)));
  }
  __device__ __forceinline__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
    return dlop_cuda_from_float<__nv_bfloat16>(exp_of_float(dlop_cuda_to_float(x)));
  }
  __device__ __forceinline__ float operator()(float x) const { return exp_of_float(x); }
  __device__ __forceinline__ double operator()(double x) const { return exp_of_double(x); }
};

}  // namespace

/* Vectors per thread and step of the contiguous kernels (the spec's cuda_contiguous_vectors in
 * plugin.c is the same number): two, so that exp's arithmetic on one overlaps the other's
 * load. Measured on an H200 at 2^28 float32: 97.6% of a copy with two, 92.6% with one. */
#define EXP_CUDA_UNROLL 2

/* float32 and float64 in the kit's chunk form (a chunk per 128-thread block: plugin.c's
 * cuda_chunk_dtypes), float16 and bfloat16 in the grid form. */
DLOP_CUDA_UNARY_KERNELS(dlop_exp, float16, __half, exp_op, EXP_CUDA_UNROLL)
DLOP_CUDA_UNARY_KERNELS(dlop_exp, bfloat16, __nv_bfloat16, exp_op, EXP_CUDA_UNROLL)
DLOP_CUDA_UNARY_CHUNK_KERNELS(dlop_exp, float32, float, exp_op, EXP_CUDA_UNROLL)
DLOP_CUDA_UNARY_CHUNK_KERNELS(dlop_exp, float64, double, exp_op, EXP_CUDA_UNROLL)
