/* blas_dot_cuda.cu — the CUDA kernels of a dot of two vectors, out = alpha * (a . b) + beta * out,
 * in two passes (blas_dot_plan.h sizes the grid): dlop_blas_dot_partials_<dtype> streams both
 * vectors once (16-byte vector loads when both are contiguous and aligned, two vectors of each
 * in flight per thread; element by element otherwise), each thread summing its share in the
 * accumulator (float for float16, bfloat16 and float32, double for float64) with fused
 * multiply-adds, each block's threads meeting in a fixed tree into one partial; then
 * dlop_blas_dot_finish_<dtype>, one block, sums the partials in a fixed tree and writes the
 * output. No atomics: the same inputs give the same bits. Why not cuBLAS: its dot of 16-bit
 * vectors (cublasDotEx, what PyTorch calls) ran at about 3.0 TB/s on an H200 where a copy moves
 * 4.3, and a GEMM of 1 x k by k x 1 slower still; one read of each input at the copy's rate is
 * the least any dot can do. Embedded as dlop_blas_blas_dot_cuda_fatbin. */
#include <dlop/kit/cuda_kernel_util.cuh>

#include "blas_dot_plan.h"

namespace {

template <typename T> struct acc_of { typedef float type; };
template <> struct acc_of<double> { typedef double type; };

__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }

template <typename T, typename A> __device__ __forceinline__ T narrow(A x);
template <> __device__ __forceinline__ __half narrow<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16, float>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ float narrow<float, float>(float x) { return x; }
template <> __device__ __forceinline__ double narrow<double, double>(double x) { return x; }

__device__ __forceinline__ float mac(float a, float b, float acc) { return fmaf(a, b, acc); }
__device__ __forceinline__ double mac(double a, double b, double acc) { return fma(a, b, acc); }

/* acc plus the products of two 16-byte vectors of T, in element order. 16-bit floats widen a
 * 32-bit word (two elements) at a time: a bfloat16 is the high half of its float. */
template <typename T, typename A>
__device__ __forceinline__ A mac16(int4 x, int4 y, A acc) {
  const dlop_cuda_vec16<T> a = dlop_cuda_vec16_from_bits<T>(x), b = dlop_cuda_vec16_from_bits<T>(y);
#pragma unroll
  for (int k = 0; k < dlop_cuda_vec16<T>::width; k++) acc = mac(widen(a.e[k]), widen(b.e[k]), acc);
  return acc;
}
template <>
__device__ __forceinline__ float mac16<__nv_bfloat16, float>(int4 x, int4 y, float acc) {
  const unsigned a[4] = {(unsigned)x.x, (unsigned)x.y, (unsigned)x.z, (unsigned)x.w};
  const unsigned b[4] = {(unsigned)y.x, (unsigned)y.y, (unsigned)y.z, (unsigned)y.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    acc = mac(__uint_as_float(a[k] << 16), __uint_as_float(b[k] << 16), acc);
    acc = mac(__uint_as_float(a[k] & 0xFFFF0000u), __uint_as_float(b[k] & 0xFFFF0000u), acc);
  }
  return acc;
}
template <>
__device__ __forceinline__ float mac16<__half, float>(int4 x, int4 y, float acc) {
  const unsigned a[4] = {(unsigned)x.x, (unsigned)x.y, (unsigned)x.z, (unsigned)x.w};
  const unsigned b[4] = {(unsigned)y.x, (unsigned)y.y, (unsigned)y.z, (unsigned)y.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    __half2 ha, hb;
    memcpy(&ha, &a[k], 4);
    memcpy(&hb, &b[k], 4);
    const float2 fa = __half22float2(ha), fb = __half22float2(hb);
    acc = mac(fa.x, fb.x, acc);
    acc = mac(fa.y, fb.y, acc);
  }
  return acc;
}

/* Thread 0 ends with the block's values summed: each warp by shuffles (offsets 16..1), then
 * the warps' sums in warp 0 the same way. */
template <typename A>
__device__ __forceinline__ A block_sum(A v) {
  __shared__ A warps[BLAS_DOT_BLOCK / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < BLAS_DOT_BLOCK / 32 ? warps[lane] : (A)0;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

/* Block b's partial: the grid's threads take 16-byte vectors v, v + threads, ... (two per
 * step, a grid apart, so both loads of a warp are coalesced and four are in flight), the
 * elements past the last whole vector, or every element of strided or misaligned vectors,
 * one by one. Steps are in elements (at least 1: the run copies negative strides first). */
template <typename T>
__device__ void dot_partials(const T *a, int64_t a_step, const T *b, int64_t b_step, int64_t n,
                             typename acc_of<T>::type *partials) {
  typedef typename acc_of<T>::type A;
  const int64_t thread = dlop_cuda_thread_index(), threads = dlop_cuda_thread_count();
  A acc = (A)0;
  int64_t done = 0;
  if (a_step == 1 && b_step == 1 && dlop_cuda_aligned16(a) && dlop_cuda_aligned16(b)) {
    const int4 *av = reinterpret_cast<const int4 *>(a), *bv = reinterpret_cast<const int4 *>(b);
    const int64_t vectors = n / dlop_cuda_vec16<T>::width;
    for (int64_t v = thread; v < vectors; v += 2 * threads) {
      const bool second = v + threads < vectors;
      const int4 x0 = __ldcs(av + v), y0 = __ldcs(bv + v);
      int4 x1 = x0, y1 = y0;
      if (second) {
        x1 = __ldcs(av + v + threads);
        y1 = __ldcs(bv + v + threads);
      }
      acc = mac16<T, A>(x0, y0, acc);
      if (second) acc = mac16<T, A>(x1, y1, acc);
    }
    done = vectors * dlop_cuda_vec16<T>::width;
  }
  for (int64_t i = done + thread; i < n; i += threads)
    acc = mac(widen(a[i * a_step]), widen(b[i * b_step]), acc);
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

/* One block: the partials in a fixed tree, then alpha * sum + beta * out (out not read when
 * read_out is 0: beta 0), in the accumulator's type, rounded once to T. */
template <typename T>
__device__ void dot_finish(const typename acc_of<T>::type *partials, int32_t count, T *out,
                           double alpha, double beta, int32_t read_out) {
  typedef typename acc_of<T>::type A;
  A acc = (A)0;
  for (int32_t i = threadIdx.x; i < count; i += BLAS_DOT_BLOCK) acc += partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) {
    A r = (A)alpha * acc;
    if (read_out) r += (A)beta * widen(*out);
    *out = narrow<T, A>(r);
  }
}

}  // namespace

/* The first pass's blocks all fit at once (8 of 256 threads per SM: at most 32 registers), so
 * the grid runs in one wave. */
#define BLAS_DOT_KERNELS(name, T)                                                            \
  extern "C" __global__ void __launch_bounds__(BLAS_DOT_BLOCK, BLAS_DOT_BLOCKS_PER_SM)       \
      dlop_blas_dot_partials_##name(                                                         \
      const T *a, int64_t a_step, const T *b, int64_t b_step, int64_t n,                     \
      acc_of<T>::type *partials) {                                                           \
    dot_partials<T>(a, a_step, b, b_step, n, partials);                                      \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(BLAS_DOT_BLOCK) dlop_blas_dot_finish_##name(   \
      const acc_of<T>::type *partials, int32_t count, T *out, double alpha, double beta,     \
      int32_t read_out) {                                                                    \
    dot_finish<T>(partials, count, out, alpha, beta, read_out);                              \
  }

DLOP_CUDA_FLOAT_TYPES(BLAS_DOT_KERNELS)
