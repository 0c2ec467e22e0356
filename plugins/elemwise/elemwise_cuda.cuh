/* elemwise_cuda.cuh — what the elemwise plugin's .cu files share: elementwise bodies over
 * operands of different dtypes (the SDK's bodies take one dtype), and the macros that wrap
 * elemwise_scalar.h's element functions into functors and extern "C" kernels named
 * dlop_elemwise_<op>_{contiguous,rows,strided}_<dtype> (elemwise_thunk.c looks them up). */
#ifndef DLOP_ELEMWISE_CUDA_CUH
#define DLOP_ELEMWISE_CUDA_CUH

#include <dlop/cuda_kernel_util.cuh>

#include "elemwise_scalar.h"

/* X(name, storage type): the same storage types as the CPU kernels (16-bit floats as their
 * bits), so elemwise_scalar.h's functions serve both. */
#define EW_CUDA_INT_DTYPES(X) X(int8, int8_t) X(int16, int16_t) X(int32, int32_t) X(int64, int64_t) X(uint8, uint8_t)
#define EW_CUDA_FLOAT_DTYPES(X) X(float16, uint16_t) X(bfloat16, uint16_t) X(float32, float) X(float64, double)
#define EW_CUDA_NUMERIC_DTYPES(X) EW_CUDA_INT_DTYPES(X) EW_CUDA_FLOAT_DTYPES(X)
#define EW_CUDA_ALL_DTYPES(X) X(bool, uint8_t) EW_CUDA_NUMERIC_DTYPES(X)

/* Linear index i of the loop to each operand's offset, then f. 32-bit indices below 2^32
 * elements (cheaper divisions); the 1-d case (every contiguous or 1-d strided loop after
 * collapsing) has no division at all. Operand 0 is the output. */
#define EW_CUDA_STRIDED_LOOP(n, o, BODY)                                                     \
  if ((n) <= (int64_t)UINT32_MAX) {                                                          \
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) {                                                       \
      int64_t off[DLOP_KERNEL_MAX_OPERANDS];                                                 \
      dlop_cuda_offsets_at(o, (uint32_t)i, off);                                             \
      BODY;                                                                                  \
    }                                                                                        \
  } else {                                                                                   \
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) {                                                       \
      int64_t off[DLOP_KERNEL_MAX_OPERANDS];                                                 \
      dlop_cuda_offsets_at(o, (uint64_t)i, off);                                             \
      BODY;                                                                                  \
    }                                                                                        \
  }

template <typename TO, typename TA, typename F>
__device__ __forceinline__ void ew_cuda_strided1(const TA *a, TO *z, int64_t n,
                                                 const dlop_nd_offsets &o, F f) {
  EW_CUDA_STRIDED_LOOP(n, o, z[off[0]] = f(a[off[1]]))
}

template <typename TO, typename TA, typename F>
__device__ __forceinline__ void ew_cuda_strided2(const TA *a, const TA *b, TO *z, int64_t n,
                                                 const dlop_nd_offsets &o, F f) {
  EW_CUDA_STRIDED_LOOP(n, o, z[off[0]] = f(a[off[1]], b[off[2]]))
}

/* where: any nonzero condition byte takes x; the element's bits are copied unchanged */
template <typename T>
__device__ __forceinline__ void ew_cuda_where_strided(const uint8_t *c, const T *x, const T *y,
                                                      T *z, int64_t n, const dlop_nd_offsets &o) {
  EW_CUDA_STRIDED_LOOP(n, o, z[off[0]] = c[off[1]] ? x[off[2]] : y[off[3]])
}

/* ---- kernels from element functions ---------------------------------------------------- */

#define EW_CUDA_FUNCTOR1(fn, TO, TI)                                                         \
  struct fn##_f {                                                                            \
    __device__ __forceinline__ TO operator()(TI x) const { return ew_##fn(x); }              \
  };
#define EW_CUDA_FUNCTOR2(fn, TO, TI)                                                         \
  struct fn##_f {                                                                            \
    __device__ __forceinline__ TO operator()(TI a, TI b) const { return ew_##fn(a, b); }     \
  };

/* The general kernel every op has. */
#define EW_CUDA_STRIDED1(op, name, TO, TI)                                                   \
  EW_CUDA_FUNCTOR1(op##_##name, TO, TI)                                                      \
  extern "C" __global__ void dlop_elemwise_##op##_strided_##name(const TI *x, TO *z, int64_t n, \
                                                                 dlop_nd_offsets o) {        \
    ew_cuda_strided1(x, z, n, o, op##_##name##_f());                                         \
  }
#define EW_CUDA_STRIDED2(op, name, TO, TI)                                                   \
  EW_CUDA_FUNCTOR2(op##_##name, TO, TI)                                                      \
  extern "C" __global__ void dlop_elemwise_##op##_strided_##name(                            \
      const TI *a, const TI *b, TO *z, int64_t n, dlop_nd_offsets o) {                       \
    ew_cuda_strided2(a, b, z, n, o, op##_##name##_f());                                      \
  }

/* Cheap unary ops: also a contiguous kernel of one 16-byte vector per thread. */
#define EW_CUDA_UNARY_VECTOR(op, name, T)                                                    \
  EW_CUDA_STRIDED1(op, name, T, T)                                                           \
  extern "C" __global__ void dlop_elemwise_##op##_contiguous_##name(const T *x, T *z, int64_t n) { \
    dlop_cuda_unary_contiguous<1>(x, z, n, op##_##name##_f());                               \
  }

/* Cheap binary ops: also the contiguous and rows kernels of the SDK (streaming 16-byte vectors,
 * one per thread: 99-100% of a device copy for multiply_them on an H200). */
#define EW_CUDA_BINARY_VECTOR(op, name, T)                                                   \
  EW_CUDA_STRIDED2(op, name, T, T)                                                           \
  extern "C" __global__ void dlop_elemwise_##op##_contiguous_##name(const T *a, const T *b,  \
                                                                    T *z, int64_t n) {       \
    dlop_cuda_binary_contiguous<1>(a, b, z, n, op##_##name##_f());                           \
  }                                                                                          \
  extern "C" __global__ void dlop_elemwise_##op##_rows_##name(const T *a, const T *b, T *z,  \
                                                              dlop_rows_layout rows) {       \
    dlop_cuda_binary_rows(a, b, z, rows, op##_##name##_f());                                 \
  }

#endif
