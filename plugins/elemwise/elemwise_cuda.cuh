/* elemwise_cuda.cuh — what the elemwise plugin's .cu files share: elementwise bodies over
 * operands of different dtypes (the SDK's bodies take one dtype), and the macros that wrap
 * elemwise_scalar.h's element functions into functors and extern "C" kernels named
 * dlop_elemwise_<op>_{contiguous,rows,strided}_<dtype> (elemwise_thunk.c looks them up). */
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

/* ---- broadcast rows: a 2-d grid, the operand kinds known at compile time ---------------- */
/* A rows loop (dlop_rows_layout: 2 dims, inner dim contiguous or broadcast) on a 2-d grid:
 * blockIdx.y walks rows, blockIdx.x covers a row's 16-byte vectors, U vectors per thread one
 * block apart (coalesced). Each input is a full matrix (EW_FULL: its own rows, possibly
 * padded), a broadcast row (EW_ROW: the same row for every row, read through the cache) or a
 * broadcast column or scalar (EW_COLUMN: one element per row, splatted). Why not the SDK's
 * 1-d rows kernel: it finds each vector's row with a multiply-high and tests each operand's
 * kind at run time; for float16 that extra work per 16 bytes held it at 90-93% of a device
 * copy on an H200, where kinds fixed at compile time and no division reach 96-99% (measured at
 * 2^28 elements, (2^14, 2^14) with a row or a column). */
enum { EW_FULL = 0, EW_ROW = 1, EW_COLUMN = 2 };
/* The kind pairs the launch picks (elemwise_thunk.c computes the same code). */
#define EW_ROWS_PATTERN(kind_a, kind_b) ((kind_a) * 3 + (kind_b))
#define EW_ROWS_SHORT 9
/* 16-byte vectors per thread: two for 1- and 2-byte types (float16: 98-99% of a copy with two,
 * 96% with one), one otherwise (float32: 99-100% with one, 97% with two). */
#define EW_ROWS_VECTORS_PER_THREAD(size) ((size) < 4 ? 2 : 1)

template <int Kind, typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> ew_rows_load(const T *p, int64_t row_stride,
                                                           int64_t row, int64_t v) {
  typedef dlop_cuda_vec16<T> V;
  if (Kind == EW_COLUMN) return dlop_cuda_splat(__ldg(p + row * row_stride));
  if (Kind == EW_ROW) return dlop_cuda_load_cached(reinterpret_cast<const V *>(p) + v);
  return dlop_cuda_load_streaming(reinterpret_cast<const V *>(p + row * row_stride) + v);
}

template <int KindA, int KindB, typename T, typename F>
__device__ __forceinline__ void ew_binary_rows_2d(const T *a, const T *b, T *z,
                                                  const dlop_rows_layout &r, F f) {
  typedef dlop_cuda_vec16<T> V;
  constexpr int U = EW_ROWS_VECTORS_PER_THREAD(sizeof(T));
  const int64_t rows = r.vectors / r.per_row;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int64_t first = (int64_t)blockIdx.x * blockDim.x * U + threadIdx.x;
    V x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t v = first + u * (int64_t)blockDim.x;
      if (v < r.per_row) {
        x[u] = ew_rows_load<KindA>(a, r.row_stride[1], row, v);
        y[u] = ew_rows_load<KindB>(b, r.row_stride[2], row, v);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t v = first + u * (int64_t)blockDim.x;
      if (v >= r.per_row) break;
      V out;
#pragma unroll
      for (int k = 0; k < V::width; k++) out.e[k] = f(x[u].e[k], y[u].e[k]);
      dlop_cuda_store_streaming(reinterpret_cast<V *>(z + row * r.row_stride[0]) + v, out);
    }
  }
}

/* One kernel per op and dtype; the pattern (a uniform argument) picks the specialized loop. */
template <typename T, typename F>
__device__ __forceinline__ void ew_binary_rows(const T *a, const T *b, T *z,
                                               const dlop_rows_layout &r, int32_t pattern, F f) {
  switch (pattern) {
#define EW_ROWS_CASE(ka, kb) \
  case EW_ROWS_PATTERN(ka, kb): ew_binary_rows_2d<ka, kb>(a, b, z, r, f); break;
    EW_ROWS_CASE(EW_FULL, EW_FULL) EW_ROWS_CASE(EW_FULL, EW_ROW) EW_ROWS_CASE(EW_ROW, EW_FULL)
    EW_ROWS_CASE(EW_FULL, EW_COLUMN) EW_ROWS_CASE(EW_COLUMN, EW_FULL)
    EW_ROWS_CASE(EW_ROW, EW_COLUMN) EW_ROWS_CASE(EW_COLUMN, EW_ROW)
    EW_ROWS_CASE(EW_ROW, EW_ROW) EW_ROWS_CASE(EW_COLUMN, EW_COLUMN)
#undef EW_ROWS_CASE
    /* short rows (under half a block of vectors): the SDK's 1-d rows body on a 1-d grid, so
     * that a (10^6, 4) + (4,) loop does not leave most threads of each block idle */
    case EW_ROWS_SHORT: dlop_cuda_binary_rows(a, b, z, r, f); break;
    default: break; /* the launch never passes another pattern */
  }
}

/* Cheap binary ops: also the SDK's contiguous kernel (streaming 16-byte vectors, one per thread:
 * 99-100% of a device copy for multiply_them on an H200) and the broadcast rows kernel above. */
#define EW_CUDA_BINARY_VECTOR(op, name, T)                                                   \
  EW_CUDA_STRIDED2(op, name, T, T)                                                           \
  extern "C" __global__ void dlop_elemwise_##op##_contiguous_##name(const T *a, const T *b,  \
                                                                    T *z, int64_t n) {       \
    dlop_cuda_binary_contiguous<1>(a, b, z, n, op##_##name##_f());                           \
  }                                                                                          \
  extern "C" __global__ void dlop_elemwise_##op##_rows_##name(const T *a, const T *b, T *z,  \
                                                              dlop_rows_layout rows,         \
                                                              int32_t pattern) {             \
    ew_binary_rows(a, b, z, rows, pattern, op##_##name##_f());                               \
  }

#endif
