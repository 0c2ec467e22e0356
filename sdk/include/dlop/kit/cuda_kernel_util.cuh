/* dlop/kit/cuda_kernel_util.cuh — device-side helpers for plugins' .cu files: grid-stride loops,
 * 16-byte vectors, float16/bfloat16 to and from float, the N-d offset and rows structs
 * (dlop_nd_offsets, dlop_rows_layout: defined in strided_loop.h and rows_layout.h so host C
 * code fills the same layout), elementwise bodies (contiguous, 1-d and 2-d rows, general
 * strided) and the macros that make an elementwise op's kernels from its element functor. */
#ifndef DLOP_CUDA_KERNEL_UTIL_CUH
#define DLOP_CUDA_KERNEL_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernel_util.h"

/* ---- grid-stride loops ----------------------------------------------------------------- */

__device__ __forceinline__ int64_t dlop_cuda_thread_index() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t dlop_cuda_thread_count() {
  return (int64_t)gridDim.x * blockDim.x;
}

/* for (i = first index of this thread; i < n; i += all threads) */
#define DLOP_CUDA_GRID_STRIDE_LOOP(i, n)                                                   \
  for (int64_t i = dlop_cuda_thread_index(); i < (n); i += dlop_cuda_thread_count())

__device__ __forceinline__ bool dlop_cuda_aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* 16 bytes of T, loaded and stored as one vector instruction when the address is aligned. */
template <typename T>
struct alignas(16) dlop_cuda_vec16 {
  static constexpr int width = 16 / sizeof(T);
  T e[16 / sizeof(T)];
};

/* The 16 bytes of one int4 load as a vector of T. */
template <typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_vec16_from_bits(int4 raw) {
  dlop_cuda_vec16<T> v;
  memcpy(&v, &raw, sizeof v);
  return v;
}

/* The elementwise bodies' loads and stores: plain 16-byte vector instructions, default
 * caching. Measured on an H200 (binary add, one 16-byte vector per thread), the evict-first
 * hints below cost 2-4 % at 2^26 elements for float32 and float16 and 43 % for float64 at 2^20,
 * whose 24 MB stay in L2 from one call to the next only without them. */
template <typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_load16(const dlop_cuda_vec16<T> *p) {
  return dlop_cuda_vec16_from_bits<T>(*reinterpret_cast<const int4 *>(p));
}

template <typename T>
__device__ __forceinline__ void dlop_cuda_store16(dlop_cuda_vec16<T> *p, const dlop_cuda_vec16<T> &v) {
  int4 raw;
  memcpy(&raw, &v, sizeof raw);
  *reinterpret_cast<int4 *>(p) = raw;
}

/* Loads and stores of data touched once, evict-first (.cs), for a kernel that must not push
 * other data out of L2 (the elementwise bodies above do not use them; the reduce plugin's row
 * and block kernels and the dot kernel still do). */
template <typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_load_streaming(const dlop_cuda_vec16<T> *p) {
  return dlop_cuda_vec16_from_bits<T>(__ldcs(reinterpret_cast<const int4 *>(p)));
}

template <typename T>
__device__ __forceinline__ void dlop_cuda_store_streaming(dlop_cuda_vec16<T> *p, const dlop_cuda_vec16<T> &v) {
  int4 raw;
  memcpy(&raw, &v, sizeof raw);
  __stcs(reinterpret_cast<int4 *>(p), raw);
}

/* ---- float16 / bfloat16 ----------------------------------------------------------------- */

/* Arithmetic on 16-bit floats goes through float: the result is rounded once, to nearest. */
__device__ __forceinline__ float dlop_cuda_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float dlop_cuda_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float dlop_cuda_to_float(float x) { return x; }

template <typename T>
__device__ __forceinline__ T dlop_cuda_from_float(float x);
template <>
__device__ __forceinline__ __half dlop_cuda_from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 dlop_cuda_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ float dlop_cuda_from_float<float>(float x) { return x; }

/* ---- N-d offsets ------------------------------------------------------------------------ */

/* Element offsets (in elements, per operand) of linear index i of the loop's shape. Index is
 * uint32_t when the loop has fewer than 2^32 elements: 32-bit division is several times
 * cheaper than 64-bit division, and the strided path does one per dimension per element. */
template <typename Index>
__device__ __forceinline__ void dlop_cuda_offsets_at(const dlop_nd_offsets &o, Index i,
                                                     int64_t *offsets) {
#pragma unroll
  for (int k = 0; k < DLOP_KERNEL_MAX_OPERANDS; k++) offsets[k] = 0;
  if (o.ndim == 1) { /* the common case after collapsing: no division */
#pragma unroll
    for (int k = 0; k < DLOP_KERNEL_MAX_OPERANDS; k++) offsets[k] = (int64_t)i * o.strides[k][0];
    return;
  }
  for (int d = o.ndim - 1; d >= 0; d--) {
    Index size = (Index)o.shape[d];
    Index quotient = i / size;
    int64_t index = (int64_t)(i - quotient * size);
    i = quotient;
#pragma unroll
    for (int k = 0; k < DLOP_KERNEL_MAX_OPERANDS; k++) offsets[k] += index * o.strides[k][d];
  }
}

/* ---- elementwise bodies ----------------------------------------------------------------- */
/* Kernels call these from their extern "C" __global__ wrappers; f is a functor. Operand order
 * in dlop_nd_offsets and dlop_rows_layout: 0 = output, then inputs (as dlop_strided_loop_init
 * builds it). The launch (dlop_cuda_launch_elementwise) sizes the contiguous and rows grids to
 * one step per thread; the loops still stride over the grid, so any grid is correct. */

/* Loads of data that other threads read again (a broadcast row): cached, read-only path. */
template <typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_load_cached(const dlop_cuda_vec16<T> *p) {
  return dlop_cuda_vec16_from_bits<T>(__ldg(reinterpret_cast<const int4 *>(p)));
}

template <typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_splat(T x) {
  dlop_cuda_vec16<T> v;
#pragma unroll
  for (int k = 0; k < dlop_cuda_vec16<T>::width; k++) v.e[k] = x;
  return v;
}

/* U is the number of 16-byte vectors a thread loads before it computes on any of them (the
 * launch's contiguous_elements is U * vector width). 1 suits cheap functions, which are bound
 * by memory; a function with more arithmetic (exp) takes 2, so that its arithmetic on one
 * vector overlaps the other's load. The vectors of one step are a grid apart, so each load
 * instruction stays coalesced. */
template <int U = 1, typename T, typename F>
__device__ __forceinline__ void dlop_cuda_unary_contiguous(const T *__restrict__ x,
                                                           T *__restrict__ y, int64_t n, F f) {
  typedef dlop_cuda_vec16<T> V;
  if (dlop_cuda_aligned16(x) && dlop_cuda_aligned16(y)) {
    const int64_t vectors = n / V::width, step = dlop_cuda_thread_count();
    const V *xv = reinterpret_cast<const V *>(x);
    V *yv = reinterpret_cast<V *>(y);
    for (int64_t i = dlop_cuda_thread_index(); i < vectors; i += U * step) {
      V a[U];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (i + u * step < vectors) a[u] = dlop_cuda_load16(xv + i + u * step);
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (i + u * step >= vectors) break;
        V r;
#pragma unroll
        for (int k = 0; k < V::width; k++) r.e[k] = f(a[u].e[k]);
        dlop_cuda_store16(yv + i + u * step, r);
      }
    }
    const int64_t tail = vectors * V::width;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n - tail) y[tail + i] = f(x[tail + i]);
  } else {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) y[i] = f(x[i]);
  }
}

/* The chunk form of the contiguous kernel, for element functions that outweigh their loads
 * (log, tanh, sigmoid, exp): block b takes the chunk of blockDim.x * U vectors that starts at
 * vector b * blockDim.x * U, thread t its vectors t, t + blockDim.x, ... of it (each load
 * instruction of a warp coalesced, the blocks resident at a time on one compact window), all
 * U loads before any arithmetic; offsets inside the chunk are 32-bit and there is no
 * grid-stride loop, which leaves the registers to the element function. The launch gives one
 * block per chunk (the spec's cuda_chunk_dtypes: blocks of DLOP_CUDA_CHUNK_BLOCK threads, a
 * grid never capped); the last block also takes the elements after the last whole vector. On
 * an H200 at 2^26 float64 (bench/ops.py, the same run): exp 1.05 and tanh 1.04 of PyTorch's
 * speed against 0.97 and 1.01-1.02 in the grid form; float32 unchanged at 1.00
 * (bench/RESULTS.md has the rest). */
template <int U = 2, typename T, typename F>
__device__ __forceinline__ void dlop_cuda_unary_chunks(const T *__restrict__ x,
                                                       T *__restrict__ y, int64_t n, F f) {
  typedef dlop_cuda_vec16<T> V;
  if (!(dlop_cuda_aligned16(x) && dlop_cuda_aligned16(y))) {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) y[i] = f(x[i]);
    return;
  }
  const int64_t vectors = n / V::width;
  const int64_t start = (int64_t)blockIdx.x * blockDim.x * U;
  const uint32_t chunk = blockDim.x * U;
  if (start + chunk <= vectors) {
    const V *xv = reinterpret_cast<const V *>(x) + start;
    V *yv = reinterpret_cast<V *>(y) + start;
    V a[U];
#pragma unroll
    for (int u = 0; u < U; u++) a[u] = dlop_cuda_load16(xv + threadIdx.x + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < U; u++) {
      V r;
#pragma unroll
      for (int k = 0; k < V::width; k++) r.e[k] = f(a[u].e[k]);
      dlop_cuda_store16(yv + threadIdx.x + u * blockDim.x, r);
    }
  } else if (start < vectors) { /* the last, partial chunk */
    const V *xv = reinterpret_cast<const V *>(x) + start;
    V *yv = reinterpret_cast<V *>(y) + start;
    const uint32_t left = (uint32_t)(vectors - start);
    for (uint32_t j = threadIdx.x; j < left; j += blockDim.x) {
      const V v = dlop_cuda_load16(xv + j);
      V r;
#pragma unroll
      for (int k = 0; k < V::width; k++) r.e[k] = f(v.e[k]);
      dlop_cuda_store16(yv + j, r);
    }
  }
  if (blockIdx.x == gridDim.x - 1)
    for (int64_t i = vectors * V::width + threadIdx.x; i < n; i += blockDim.x) y[i] = f(x[i]);
}

template <int U = 1, typename T, typename F>
__device__ __forceinline__ void dlop_cuda_binary_contiguous(const T *__restrict__ a,
                                                            const T *__restrict__ b,
                                                            T *__restrict__ z, int64_t n, F f) {
  typedef dlop_cuda_vec16<T> V;
  if (dlop_cuda_aligned16(a) && dlop_cuda_aligned16(b) && dlop_cuda_aligned16(z)) {
    const int64_t vectors = n / V::width, step = dlop_cuda_thread_count();
    const V *av = reinterpret_cast<const V *>(a);
    const V *bv = reinterpret_cast<const V *>(b);
    V *zv = reinterpret_cast<V *>(z);
    for (int64_t i = dlop_cuda_thread_index(); i < vectors; i += U * step) {
      V x[U], y[U];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (i + u * step < vectors) {
          x[u] = dlop_cuda_load16(av + i + u * step);
          y[u] = dlop_cuda_load16(bv + i + u * step);
        }
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (i + u * step >= vectors) break;
        V r;
#pragma unroll
        for (int k = 0; k < V::width; k++) r.e[k] = f(x[u].e[k], y[u].e[k]);
        dlop_cuda_store16(zv + i + u * step, r);
      }
    }
    const int64_t tail = vectors * V::width;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n - tail) z[tail + i] = f(a[tail + i], b[tail + i]);
  } else {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) z[i] = f(a[i], b[i]);
  }
}

/* ---- rows (dlop_rows_layout: 2-d, inner dim contiguous or broadcast) -------------------- */

/* Row and element column of 16-byte vector v: a multiply-high below 2^32 vectors. */
template <int Width>
__device__ __forceinline__ void dlop_cuda_rows_position(const dlop_rows_layout &r, int64_t v,
                                                        int64_t *row, int64_t *col) {
  if (r.vectors <= (int64_t)UINT32_MAX) {
    const uint32_t x = (uint32_t)v;
    const uint32_t q = (uint32_t)(((uint64_t)__umulhi(x, r.magic) + x) >> r.shift);
    *row = (int64_t)q;
    *col = (int64_t)(x - q * (uint32_t)r.per_row) * Width;
  } else {
    const int64_t q = v / r.per_row;
    *row = q;
    *col = (v - q * r.per_row) * Width;
  }
}

/* Operand k's 16 bytes at (row, col): a vector load along the row (cached when every row
 * reads it), or its one element of the row, splatted. */
template <typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_rows_load(const T *p,
                                                                  const dlop_rows_layout &r,
                                                                  int k, int64_t row,
                                                                  int64_t col) {
  typedef dlop_cuda_vec16<T> V;
  const T *q = p + row * r.row_stride[k];
  if (!r.inner[k]) return dlop_cuda_splat(__ldg(q));
  const V *v = reinterpret_cast<const V *>(q + col);
  return r.reused[k] ? dlop_cuda_load_cached(v) : dlop_cuda_load16(v);
}

template <typename T, typename F>
__device__ __forceinline__ void dlop_cuda_unary_rows(const T *x, T *y, const dlop_rows_layout &r,
                                                     F f) {
  typedef dlop_cuda_vec16<T> V;
  DLOP_CUDA_GRID_STRIDE_LOOP(v, r.vectors) {
    int64_t row, col;
    dlop_cuda_rows_position<V::width>(r, v, &row, &col);
    const V a = dlop_cuda_rows_load(x, r, 1, row, col);
    V out;
#pragma unroll
    for (int k = 0; k < V::width; k++) out.e[k] = f(a.e[k]);
    dlop_cuda_store16(reinterpret_cast<V *>(y + row * r.row_stride[0] + col), out);
  }
}

template <typename T, typename F>
__device__ __forceinline__ void dlop_cuda_binary_rows(const T *a, const T *b, T *z,
                                                      const dlop_rows_layout &r, F f) {
  typedef dlop_cuda_vec16<T> V;
  DLOP_CUDA_GRID_STRIDE_LOOP(v, r.vectors) {
    int64_t row, col;
    dlop_cuda_rows_position<V::width>(r, v, &row, &col);
    const V x = dlop_cuda_rows_load(a, r, 1, row, col), y = dlop_cuda_rows_load(b, r, 2, row, col);
    V out;
#pragma unroll
    for (int k = 0; k < V::width; k++) out.e[k] = f(x.e[k], y.e[k]);
    dlop_cuda_store16(reinterpret_cast<V *>(z + row * r.row_stride[0] + col), out);
  }
}

/* ---- broadcast rows on a 2-d grid: the operand kinds known at compile time ------------- */
/* A rows loop (dlop_rows_layout) of a binary op on a 2-d grid: blockIdx.y walks rows,
 * blockIdx.x covers a row's 16-byte vectors, U vectors per thread one block apart (coalesced).
 * Each input is a DLOP_ROWS_FULL matrix, a DLOP_ROWS_ROW or a DLOP_ROWS_COLUMN (rows_layout.h).
 * Why beside the 1-d rows body: that one finds each vector's row with a multiply-high and tests
 * each operand's kind at run time; for float16 that extra work per 16 bytes held it at 90-93%
 * of a device copy on an H200, where kinds fixed at compile time and no division reach 96-99%
 * (measured at 2^28 elements, (2^14, 2^14) with a row or a column). */
template <int Kind, typename T>
__device__ __forceinline__ dlop_cuda_vec16<T> dlop_cuda_rows_load_kind(const T *p,
                                                                       int64_t row_stride,
                                                                       int64_t row, int64_t v) {
  typedef dlop_cuda_vec16<T> V;
  if (Kind == DLOP_ROWS_COLUMN) return dlop_cuda_splat(__ldg(p + row * row_stride));
  if (Kind == DLOP_ROWS_ROW) return dlop_cuda_load_cached(reinterpret_cast<const V *>(p) + v);
  return dlop_cuda_load16(reinterpret_cast<const V *>(p + row * row_stride) + v);
}

template <int KindA, int KindB, typename T, typename F>
__device__ __forceinline__ void dlop_cuda_binary_rows_2d_body(const T *a, const T *b, T *z,
                                                              const dlop_rows_layout &r, F f) {
  typedef dlop_cuda_vec16<T> V;
  constexpr int U = DLOP_ROWS_VECTORS_PER_THREAD(sizeof(T));
  const int64_t rows = r.vectors / r.per_row;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int64_t first = (int64_t)blockIdx.x * blockDim.x * U + threadIdx.x;
    V x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t v = first + u * (int64_t)blockDim.x;
      if (v < r.per_row) {
        x[u] = dlop_cuda_rows_load_kind<KindA>(a, r.row_stride[1], row, v);
        y[u] = dlop_cuda_rows_load_kind<KindB>(b, r.row_stride[2], row, v);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t v = first + u * (int64_t)blockDim.x;
      if (v >= r.per_row) break;
      V out;
#pragma unroll
      for (int k = 0; k < V::width; k++) out.e[k] = f(x[u].e[k], y[u].e[k]);
      dlop_cuda_store16(reinterpret_cast<V *>(z + row * r.row_stride[0]) + v, out);
    }
  }
}

/* The 2-d rows kernel's body: the pattern (a uniform argument, dlop_cuda_rows_2d_launch)
 * picks the specialized loop. */
template <typename T, typename F>
__device__ __forceinline__ void dlop_cuda_binary_rows_2d(const T *a, const T *b, T *z,
                                                         const dlop_rows_layout &r,
                                                         int32_t pattern, F f) {
  switch (pattern) {
#define DLOP__ROWS_CASE(ka, kb) \
  case DLOP_ROWS_PATTERN(ka, kb): dlop_cuda_binary_rows_2d_body<ka, kb>(a, b, z, r, f); break;
    DLOP__ROWS_CASE(DLOP_ROWS_FULL, DLOP_ROWS_FULL) DLOP__ROWS_CASE(DLOP_ROWS_FULL, DLOP_ROWS_ROW)
    DLOP__ROWS_CASE(DLOP_ROWS_ROW, DLOP_ROWS_FULL) DLOP__ROWS_CASE(DLOP_ROWS_FULL, DLOP_ROWS_COLUMN)
    DLOP__ROWS_CASE(DLOP_ROWS_COLUMN, DLOP_ROWS_FULL) DLOP__ROWS_CASE(DLOP_ROWS_ROW, DLOP_ROWS_COLUMN)
    DLOP__ROWS_CASE(DLOP_ROWS_COLUMN, DLOP_ROWS_ROW) DLOP__ROWS_CASE(DLOP_ROWS_ROW, DLOP_ROWS_ROW)
    DLOP__ROWS_CASE(DLOP_ROWS_COLUMN, DLOP_ROWS_COLUMN)
#undef DLOP__ROWS_CASE
    case DLOP_ROWS_SHORT: dlop_cuda_binary_rows(a, b, z, r, f); break;
    default: break; /* the launch never passes another pattern */
  }
}

/* ---- general strided -------------------------------------------------------------------- */

/* for each linear index i of the loop, with off[k] the element offset of operand k (0 is the
 * output): 32-bit indices below 2^32 elements (cheaper divisions in dlop_cuda_offsets_at),
 * and the 1-d case (every contiguous or 1-d strided loop after collapsing) has no division. */
#define DLOP_CUDA_STRIDED_LOOP(n, offsets, BODY)                                            \
  if ((n) <= (int64_t)UINT32_MAX) {                                                         \
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) {                                                      \
      int64_t off[DLOP_KERNEL_MAX_OPERANDS];                                                \
      dlop_cuda_offsets_at(offsets, (uint32_t)i, off);                                      \
      BODY;                                                                                 \
    }                                                                                       \
  } else {                                                                                  \
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) {                                                      \
      int64_t off[DLOP_KERNEL_MAX_OPERANDS];                                                \
      dlop_cuda_offsets_at(offsets, (uint64_t)i, off);                                      \
      BODY;                                                                                 \
    }                                                                                       \
  }

/* The output's type may differ from the inputs' (a comparison's bool, a cast). */
template <typename TI, typename TO, typename F>
__device__ __forceinline__ void dlop_cuda_unary_strided(const TI *x, TO *y, int64_t n,
                                                        const dlop_nd_offsets &o, F f) {
  DLOP_CUDA_STRIDED_LOOP(n, o, y[off[0]] = f(x[off[1]]))
}

template <typename TI, typename TO, typename F>
__device__ __forceinline__ void dlop_cuda_binary_strided(const TI *a, const TI *b, TO *z, int64_t n,
                                                         const dlop_nd_offsets &o, F f) {
  DLOP_CUDA_STRIDED_LOOP(n, o, z[off[0]] = f(a[off[1]], b[off[2]]))
}

/* ---- kernels of the elementwise naming contract ----------------------------------------- */
/* extern "C" kernels named PREFIX_<kind>_NAME (elementwise_thunk.h finds them by name) with
 * the signatures cuda_launch.h lists, for an element function F: a functor that is also the
 * op's parameter block, every kernel's last argument (an empty struct for an op without
 * parameters; its fields laid out as the spec's make_params writes them). T is the CUDA type
 * of dtype NAME; U the contiguous kernel's 16-byte vectors per thread, the spec's
 * cuda_contiguous_vectors. The _STRIDED ones take an output type TO and an input type TI. */
#define DLOP_CUDA_UNARY_CONTIGUOUS(PREFIX, NAME, T, F, U)                                   \
  extern "C" __global__ void PREFIX##_contiguous_##NAME(const T *x, T *y, int64_t n, F f) { \
    dlop_cuda_unary_contiguous<U>(x, y, n, f);                                              \
  }
/* the chunk form (dlop_cuda_unary_chunks): the spec's cuda_chunk_dtypes names NAME */
#define DLOP_CUDA_UNARY_CHUNKS(PREFIX, NAME, T, F, U)                                       \
  extern "C" __global__ void PREFIX##_contiguous_##NAME(const T *x, T *y, int64_t n, F f) { \
    dlop_cuda_unary_chunks<U>(x, y, n, f);                                                  \
  }
#define DLOP_CUDA_UNARY_ROWS(PREFIX, NAME, T, F)                                            \
  extern "C" __global__ void PREFIX##_rows_##NAME(const T *x, T *y, dlop_rows_layout rows,  \
                                                  F f) {                                    \
    dlop_cuda_unary_rows(x, y, rows, f);                                                    \
  }
#define DLOP_CUDA_UNARY_STRIDED(PREFIX, NAME, TO, TI, F)                                    \
  extern "C" __global__ void PREFIX##_strided_##NAME(const TI *x, TO *y, int64_t n,         \
                                                     dlop_nd_offsets offsets, F f) {        \
    dlop_cuda_unary_strided(x, y, n, offsets, f);                                           \
  }
#define DLOP_CUDA_BINARY_CONTIGUOUS(PREFIX, NAME, T, F, U)                                  \
  extern "C" __global__ void PREFIX##_contiguous_##NAME(const T *a, const T *b, T *z,       \
                                                        int64_t n, F f) {                   \
    dlop_cuda_binary_contiguous<U>(a, b, z, n, f);                                          \
  }
/* the 1-d rows kernel (the spec's DLOP_ELEMENTWISE_ROWS) */
#define DLOP_CUDA_BINARY_ROWS(PREFIX, NAME, T, F)                                           \
  extern "C" __global__ void PREFIX##_rows_##NAME(const T *a, const T *b, T *z,             \
                                                  dlop_rows_layout rows, F f) {             \
    dlop_cuda_binary_rows(a, b, z, rows, f);                                                \
  }
/* the 2-d rows kernel (the spec's DLOP_ELEMENTWISE_ROWS_2D) */
#define DLOP_CUDA_BINARY_ROWS_2D(PREFIX, NAME, T, F)                                        \
  extern "C" __global__ void PREFIX##_rows_##NAME(const T *a, const T *b, T *z,             \
                                                  dlop_rows_layout rows, int32_t pattern,   \
                                                  F f) {                                    \
    dlop_cuda_binary_rows_2d(a, b, z, rows, pattern, f);                                    \
  }
#define DLOP_CUDA_BINARY_STRIDED(PREFIX, NAME, TO, TI, F)                                   \
  extern "C" __global__ void PREFIX##_strided_##NAME(const TI *a, const TI *b, TO *z,       \
                                                     int64_t n, dlop_nd_offsets offsets,    \
                                                     F f) {                                 \
    dlop_cuda_binary_strided(a, b, z, n, offsets, f);                                       \
  }

/* All three kernels of a same-dtype op (the spec's DLOP_ELEMENTWISE_ROWS). */
#define DLOP_CUDA_UNARY_KERNELS(PREFIX, NAME, T, F, U)                                      \
  DLOP_CUDA_UNARY_CONTIGUOUS(PREFIX, NAME, T, F, U)                                         \
  DLOP_CUDA_UNARY_ROWS(PREFIX, NAME, T, F)                                                  \
  DLOP_CUDA_UNARY_STRIDED(PREFIX, NAME, T, T, F)
/* the same with the contiguous kernel in the chunk form */
#define DLOP_CUDA_UNARY_CHUNK_KERNELS(PREFIX, NAME, T, F, U)                                \
  DLOP_CUDA_UNARY_CHUNKS(PREFIX, NAME, T, F, U)                                             \
  DLOP_CUDA_UNARY_ROWS(PREFIX, NAME, T, F)                                                  \
  DLOP_CUDA_UNARY_STRIDED(PREFIX, NAME, T, T, F)
#define DLOP_CUDA_BINARY_KERNELS(PREFIX, NAME, T, F, U)                                     \
  DLOP_CUDA_BINARY_CONTIGUOUS(PREFIX, NAME, T, F, U)                                        \
  DLOP_CUDA_BINARY_ROWS(PREFIX, NAME, T, F)                                                 \
  DLOP_CUDA_BINARY_STRIDED(PREFIX, NAME, T, T, F)

/* The parameter block of a hand-written kernel of an op without parameters. */
struct dlop_cuda_no_params {};

/* The dtypes of the seed ops as (dlop name, CUDA type): for generating extern "C" wrappers. */
#define DLOP_CUDA_FLOAT_TYPES(X)                                                           \
  X(float16, __half) X(bfloat16, __nv_bfloat16) X(float32, float) X(float64, double)
#define DLOP_CUDA_INT_TYPES(X)                                                             \
  X(int8, int8_t) X(int16, int16_t) X(int32, int32_t) X(int64, int64_t) X(uint8, uint8_t)

#endif
