/* elemwise_cuda.cuh — what the elemwise plugin's .cu files share: the macros that wrap
 * elemwise_scalar.h's element functions into functors and, through the kit's kernel macros,
 * into extern "C" kernels named dlop_elemwise_<op>_{contiguous,rows,strided}_<dtype> (the
 * specs in plugin.c name them for the SDK's elementwise thunk). */
#ifndef DLOP_ELEMWISE_CUDA_CUH
#define DLOP_ELEMWISE_CUDA_CUH

#include <dlop/kit/cuda_kernel_util.cuh>

#include "elemwise_scalar.h"

/* X(name, storage type): the same storage types as the CPU kernels (16-bit floats as their
 * bits), so elemwise_scalar.h's functions serve both. */
#define EW_CUDA_INT_DTYPES(X) X(int8, int8_t) X(int16, int16_t) X(int32, int32_t) X(int64, int64_t) X(uint8, uint8_t)
#define EW_CUDA_FLOAT_DTYPES(X) X(float16, uint16_t) X(bfloat16, uint16_t) X(float32, float) X(float64, double)
#define EW_CUDA_NUMERIC_DTYPES(X) EW_CUDA_INT_DTYPES(X) EW_CUDA_FLOAT_DTYPES(X)
#define EW_CUDA_ALL_DTYPES(X) X(bool, uint8_t) EW_CUDA_NUMERIC_DTYPES(X)

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
  DLOP_CUDA_UNARY_STRIDED(dlop_elemwise_##op, name, TO, TI, op##_##name##_f)
#define EW_CUDA_STRIDED2(op, name, TO, TI)                                                   \
  EW_CUDA_FUNCTOR2(op##_##name, TO, TI)                                                      \
  DLOP_CUDA_BINARY_STRIDED(dlop_elemwise_##op, name, TO, TI, op##_##name##_f)

/* Cheap unary ops: also a contiguous kernel of one 16-byte vector per thread. */
#define EW_CUDA_UNARY_VECTOR(op, name, T)                                                    \
  EW_CUDA_STRIDED1(op, name, T, T)                                                           \
  DLOP_CUDA_UNARY_CONTIGUOUS(dlop_elemwise_##op, name, T, op##_##name##_f, 1)

/* Cheap binary ops: also the kit's contiguous kernel (streaming 16-byte vectors, one per
 * thread: 99-100% of a device copy for multiply_them on an H200) and its 2-d rows kernel
 * (the operand kinds fixed at compile time: 96-99% of a copy for float16 on an H200, where the
 * 1-d rows kernel held 90-93%). */
#define EW_CUDA_BINARY_VECTOR(op, name, T)                                                   \
  EW_CUDA_STRIDED2(op, name, T, T)                                                           \
  DLOP_CUDA_BINARY_CONTIGUOUS(dlop_elemwise_##op, name, T, op##_##name##_f, 1)               \
  DLOP_CUDA_BINARY_ROWS_2D(dlop_elemwise_##op, name, T, op##_##name##_f)

/* where: any nonzero condition byte takes x; the element's bits are copied unchanged, and only
 * the element taken is read. */
#define EW_CUDA_WHERE(name, T)                                                               \
  extern "C" __global__ void dlop_elemwise_where_strided_##name(                             \
      const uint8_t *c, const T *x, const T *y, T *z, int64_t n, dlop_nd_offsets o,          \
      dlop_cuda_no_params) {                                                                 \
    DLOP_CUDA_STRIDED_LOOP(n, o, z[off[0]] = c[off[1]] ? x[off[2]] : y[off[3]])              \
  }

#endif
