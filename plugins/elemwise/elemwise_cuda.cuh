/* elemwise_cuda.cuh — what the elemwise plugin's .cu files share: the macros that wrap
 * elemwise_scalar.h's element functions into functors and, through the kit's kernel macros,
 * into extern "C" kernels named dlop_elemwise_<op>_{contiguous,rows,strided}_<dtype> (the
 * specs in plugin.c name them for the SDK's elementwise thunk).
 *
 * Kernel choice (the SDK's launch picks among an op's kernels by layout): every op has a
 * contiguous kernel of 16-byte vector loads and stores (plain, one step per thread on a grid that
 * covers the tensor; for log, tanh and sigmoid of float32 and float64 the kit's chunk form, a
 * chunk of the tensor per 128-thread block), the strided kernel for anything else, and the binary
 * arithmetic ops a 2-d rows kernel for a broadcast row, column or scalar. Ops whose element
 * function costs more than its loads (log, tanh, sigmoid, pow) load two vectors per step so one's
 * arithmetic overlaps the other's load (as the seed exp does: 97.6% of a copy on an H200 against
 * 92.6% with one). Ops whose operands differ in size (comparisons, where, cast) step by one
 * 16-byte vector of the output: where loads each input's matching elements in as few aligned
 * vector loads as they fill, comparisons and casts take the step in coalesced chunks of at least 4
 * elements (below). The element functions are the CPU's (elemwise_scalar.h): float16 and bfloat16
 * compute in float32, float32 in float32 with CUDA's full-precision functions (logf, tanhf, expf,
 * powf: no --use_fast_math, no __expf-style intrinsics), float64 in double. */
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

/* Unary ops of one dtype: also a contiguous kernel of U 16-byte vectors per thread and step
 * (plugin.c's contiguous-vectors column says the same U). */
#define EW_CUDA_UNARY_VECTOR(op, name, T, U)                                                 \
  EW_CUDA_STRIDED1(op, name, T, T)                                                           \
  DLOP_CUDA_UNARY_CONTIGUOUS(dlop_elemwise_##op, name, T, op##_##name##_f, U)

/* The same with the contiguous kernel in the chunk form (plugin.c's chunk dtypes column names
 * the dtype): float32 and float64 log, tanh and sigmoid. */
#define EW_CUDA_UNARY_CHUNKS(op, name, T, U)                                                 \
  EW_CUDA_STRIDED1(op, name, T, T)                                                           \
  DLOP_CUDA_UNARY_CHUNKS(dlop_elemwise_##op, name, T, op##_##name##_f, U)

/* ---- unary math of float16 and bfloat16, two elements per 32-bit word ------------------- */
/* The contiguous kernel of sqrt, log, tanh and sigmoid on 16-bit floats: U 16-byte vectors per
 * thread and step as the kit's dlop_cuda_unary_contiguous, each 32-bit word's two elements
 * widened (one instruction each), computed in float and narrowed together: one packed
 * conversion to nearest even, then the NaN lanes replaced by the canonical quiet NaN with the
 * float's sign, which is what ew_store_<dtype> gives element by element (so the bits are the
 * element function's, which the tail and the strided kernel call). Element by element, the
 * narrowing and its NaN test cost about as much as a cheap function. */
template <bool BF16>
__device__ __forceinline__ float2 ew_cuda_widen_word(uint32_t w) {
  if constexpr (BF16) return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
  __half2 h;
  memcpy(&h, &w, 4);
  return __half22float2(h);
}

template <bool BF16>
__device__ __forceinline__ uint32_t ew_cuda_narrow_word(float lo, float hi) {
  uint32_t r, nan;
  if constexpr (BF16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&r, &h, 4);
    nan = __hneu2_mask(h, h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&r, &h, 4);
    nan = __hneu2_mask(h, h);
  }
  /* each float's top 16 bits (its sign at bit 15 of its half), then the canonical NaN */
  const uint32_t signs = __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
  const uint32_t canonical = (signs & 0x80008000u) | (BF16 ? 0x7FC07FC0u : 0x7E007E00u);
  return (r & ~nan) | (canonical & nan);
}

/* f: a functor with the element function (operator(), on the 16-bit storage) and math (its
 * float function). */
template <int U, bool BF16, typename F>
__device__ __forceinline__ void ew_cuda_unary16_contiguous(const uint16_t *__restrict__ x,
                                                           uint16_t *__restrict__ y, int64_t n, F f) {
  if (dlop_cuda_aligned16(x) && dlop_cuda_aligned16(y)) {
    const int64_t vectors = n / 8, step = dlop_cuda_thread_count();
    const int4 *xv = reinterpret_cast<const int4 *>(x);
    int4 *yv = reinterpret_cast<int4 *>(y);
    for (int64_t i = dlop_cuda_thread_index(); i < vectors; i += U * step) {
      int4 a[U];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (i + u * step < vectors) a[u] = xv[i + u * step];
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (i + u * step >= vectors) break;
        uint32_t w[4] = {(uint32_t)a[u].x, (uint32_t)a[u].y, (uint32_t)a[u].z, (uint32_t)a[u].w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const float2 v = ew_cuda_widen_word<BF16>(w[k]);
          w[k] = ew_cuda_narrow_word<BF16>(f.math(v.x), f.math(v.y));
        }
        yv[i + u * step] = make_int4((int)w[0], (int)w[1], (int)w[2], (int)w[3]);
      }
    }
    const int64_t tail = vectors * 8;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n - tail) y[tail + i] = f(x[tail + i]);
  } else {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) y[i] = f(x[i]);
  }
}

#define EW_CUDA_IS_BF16_float16 false
#define EW_CUDA_IS_BF16_bfloat16 true

/* A math op of a 16-bit float: the strided kernel and the packed contiguous one; MATH is the
 * float function the element function ew_<op>_<name> applies. */
#define EW_CUDA_UNARY16(op, name, U, MATH)                                                   \
  struct op##_##name##_f {                                                                   \
    __device__ __forceinline__ uint16_t operator()(uint16_t x) const { return ew_##op##_##name(x); } \
    __device__ __forceinline__ float math(float x) const { return MATH(x); }                 \
  };                                                                                         \
  DLOP_CUDA_UNARY_STRIDED(dlop_elemwise_##op, name, uint16_t, uint16_t, op##_##name##_f)     \
  extern "C" __global__ void dlop_elemwise_##op##_contiguous_##name(                         \
      const uint16_t *x, uint16_t *y, int64_t n, op##_##name##_f f) {                        \
    ew_cuda_unary16_contiguous<U, EW_CUDA_IS_BF16_##name>(x, y, n, f);                       \
  }

/* Cheap binary ops: also the kit's contiguous kernel (plain 16-byte vectors, one per
 * thread: 99-100% of a device copy for multiply_them on an H200) and its 2-d rows kernel
 * (the operand kinds fixed at compile time: 96-99% of a copy for float16 on an H200, where the
 * 1-d rows kernel held 90-93%). */
#define EW_CUDA_BINARY_VECTOR(op, name, T, U)                                                \
  EW_CUDA_STRIDED2(op, name, T, T)                                                           \
  DLOP_CUDA_BINARY_CONTIGUOUS(dlop_elemwise_##op, name, T, op##_##name##_f, U)               \
  DLOP_CUDA_BINARY_ROWS_2D(dlop_elemwise_##op, name, T, op##_##name##_f)

/* ---- contiguous kernels of operands of different sizes --------------------------------- */
/* The launch gives each thread one step, one 16-byte vector's worth of the output (the spec's
 * contiguous vectors is 1: 16 / sizeof(TO) elements). A comparison or a cast does its step as
 * chunks of E consecutive elements, the chunks a grid apart (chunk i, i + threads, ...): E is
 * 16 bytes of the wider operand but at least 4 elements (at most the step), so every load and
 * store instruction of a warp covers consecutive memory, 16 or 32 bytes of the wider operand
 * per thread and at least 4 bytes of the narrower one. A float64 comparison loads 32 bytes of
 * each input and stores 4 bools per chunk, 4 chunks a step; a float32 one 16 bytes and 4
 * bools; a cast of float32 to float16 16 bytes and 8. (When a thread loaded its whole step at
 * once, 128 bytes of each input for a float64 comparison, each load instruction of a warp
 * touched 32 lines 128 bytes apart: the float64 comparisons ran at half of PyTorch's speed,
 * float32 ones at 0.73, on an H200.) Loads of a chunk above 16 bytes are split into 16-byte
 * vectors. When every pointer is 16-byte aligned so is each chunk of each operand (its offset
 * is a multiple of its size, up to 16); otherwise the kernel goes element by element. Loads
 * and stores carry no cache hint (as the kit's, cuda_kernel_util.cuh says why). */
template <typename TO, typename TI>
__host__ __device__ constexpr int ew_cuda_chunk_elements() {
  constexpr int wide = sizeof(TI) > sizeof(TO) ? (int)sizeof(TI) : (int)sizeof(TO);
  constexpr int step = 16 / (int)sizeof(TO);
  return 16 / wide >= 4 ? 16 / wide : (step < 4 ? step : 4);
}

template <typename T, int W>
struct ew_cuda_pack {
  T e[W];
};

template <typename T, int W>
__device__ __forceinline__ ew_cuda_pack<T, W> ew_cuda_load_pack(const T *p) {
  constexpr int bytes = W * (int)sizeof(T);
  ew_cuda_pack<T, W> v;
  if constexpr (bytes >= 16) {
#pragma unroll
    for (int k = 0; k < bytes / 16; k++) {
      const int4 raw = reinterpret_cast<const int4 *>(p)[k];
      memcpy(reinterpret_cast<char *>(v.e) + 16 * k, &raw, 16);
    }
  } else if constexpr (bytes == 8) {
    const unsigned long long raw = *reinterpret_cast<const unsigned long long *>(p);
    memcpy(v.e, &raw, 8);
  } else if constexpr (bytes == 4) {
    const unsigned int raw = *reinterpret_cast<const unsigned int *>(p);
    memcpy(v.e, &raw, 4);
  } else {
    static_assert(bytes == 2, "a pack is 2 bytes or more (W >= 2)");
    const unsigned short raw = *reinterpret_cast<const unsigned short *>(p);
    memcpy(v.e, &raw, 2);
  }
  return v;
}

/* An output chunk: 4, 8 or 16 bytes, one store. */
template <typename T, int W>
__device__ __forceinline__ void ew_cuda_store_pack(T *p, const ew_cuda_pack<T, W> &v) {
  constexpr int bytes = W * (int)sizeof(T);
  if constexpr (bytes == 16) {
    int4 raw;
    memcpy(&raw, v.e, 16);
    *reinterpret_cast<int4 *>(p) = raw;
  } else if constexpr (bytes == 8) {
    unsigned long long raw;
    memcpy(&raw, v.e, 8);
    *reinterpret_cast<unsigned long long *>(p) = raw;
  } else {
    static_assert(bytes == 4, "an output chunk is 4, 8 or 16 bytes");
    unsigned int raw;
    memcpy(&raw, v.e, 4);
    *reinterpret_cast<unsigned int *>(p) = raw;
  }
}

/* y = f(x), TI -> TO (a cast) */
template <typename TO, typename TI, typename F>
__device__ __forceinline__ void ew_cuda_mixed_unary_contiguous(const TI *__restrict__ x,
                                                               TO *__restrict__ y, int64_t n, F f) {
  constexpr int E = ew_cuda_chunk_elements<TO, TI>();
  if (dlop_cuda_aligned16(x) && dlop_cuda_aligned16(y)) {
    const int64_t chunks = n / E;
#pragma unroll 1
    DLOP_CUDA_GRID_STRIDE_LOOP(i, chunks) {
      const ew_cuda_pack<TI, E> a = ew_cuda_load_pack<TI, E>(x + i * E);
      ew_cuda_pack<TO, E> r;
#pragma unroll
      for (int k = 0; k < E; k++) r.e[k] = f(a.e[k]);
      ew_cuda_store_pack<TO, E>(y + i * E, r);
    }
    const int64_t tail = chunks * E;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n - tail) y[tail + i] = f(x[tail + i]);
  } else {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) y[i] = f(x[i]);
  }
}

/* z = f(a, b), TI, TI -> TO (a comparison) */
template <typename TO, typename TI, typename F>
__device__ __forceinline__ void ew_cuda_mixed_binary_contiguous(const TI *__restrict__ a,
                                                                const TI *__restrict__ b,
                                                                TO *__restrict__ z, int64_t n, F f) {
  constexpr int E = ew_cuda_chunk_elements<TO, TI>();
  if (dlop_cuda_aligned16(a) && dlop_cuda_aligned16(b) && dlop_cuda_aligned16(z)) {
    const int64_t chunks = n / E;
#pragma unroll 1
    DLOP_CUDA_GRID_STRIDE_LOOP(i, chunks) {
      const ew_cuda_pack<TI, E> x = ew_cuda_load_pack<TI, E>(a + i * E);
      const ew_cuda_pack<TI, E> y = ew_cuda_load_pack<TI, E>(b + i * E);
      ew_cuda_pack<TO, E> r;
#pragma unroll
      for (int k = 0; k < E; k++) r.e[k] = f(x.e[k], y.e[k]);
      ew_cuda_store_pack<TO, E>(z + i * E, r);
    }
    const int64_t tail = chunks * E;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n - tail) z[tail + i] = f(a[tail + i], b[tail + i]);
  } else {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) z[i] = f(a[i], b[i]);
  }
}

/* z = c ? x : y with a bool condition (where): both values are loaded, the chosen one's bits
 * are stored unchanged. */
template <typename T>
__device__ __forceinline__ void ew_cuda_where_contiguous(const uint8_t *__restrict__ c,
                                                         const T *__restrict__ x,
                                                         const T *__restrict__ y,
                                                         T *__restrict__ z, int64_t n) {
  constexpr int W = 16 / sizeof(T);
  if (dlop_cuda_aligned16(c) && dlop_cuda_aligned16(x) && dlop_cuda_aligned16(y) &&
      dlop_cuda_aligned16(z)) {
    const int64_t steps = n / W;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, steps) {
      const ew_cuda_pack<uint8_t, W> k = ew_cuda_load_pack<uint8_t, W>(c + i * W);
      const ew_cuda_pack<T, W> a = ew_cuda_load_pack<T, W>(x + i * W);
      const ew_cuda_pack<T, W> b = ew_cuda_load_pack<T, W>(y + i * W);
      ew_cuda_pack<T, W> r;
#pragma unroll
      for (int e = 0; e < W; e++) r.e[e] = k.e[e] ? a.e[e] : b.e[e];
      ew_cuda_store_pack<T, W>(z + i * W, r);
    }
    const int64_t tail = steps * W;
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n - tail) z[tail + i] = c[tail + i] ? x[tail + i] : y[tail + i];
  } else {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) z[i] = c[i] ? x[i] : y[i];
  }
}

/* A comparison's kernels: strided and contiguous (bool output). */
#define EW_CUDA_COMPARE(op, name, T)                                                         \
  EW_CUDA_STRIDED2(op, name, uint8_t, T)                                                     \
  extern "C" __global__ void dlop_elemwise_##op##_contiguous_##name(                         \
      const T *a, const T *b, uint8_t *z, int64_t n, op##_##name##_f f) {                    \
    ew_cuda_mixed_binary_contiguous<uint8_t, T>(a, b, z, n, f);                              \
  }

/* where: any nonzero condition byte takes x; the element's bits are copied unchanged. The
 * strided kernel reads only the element taken. */
#define EW_CUDA_WHERE(name, T)                                                               \
  extern "C" __global__ void dlop_elemwise_where_strided_##name(                             \
      const uint8_t *c, const T *x, const T *y, T *z, int64_t n, dlop_nd_offsets o,          \
      dlop_cuda_no_params) {                                                                 \
    DLOP_CUDA_STRIDED_LOOP(n, o, z[off[0]] = c[off[1]] ? x[off[2]] : y[off[3]])              \
  }                                                                                          \
  extern "C" __global__ void dlop_elemwise_where_contiguous_##name(                          \
      const uint8_t *c, const T *x, const T *y, T *z, int64_t n, dlop_cuda_no_params) {      \
    ew_cuda_where_contiguous<T>(c, x, y, z, n);                                              \
  }

#endif
