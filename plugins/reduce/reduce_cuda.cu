/* reduce_cuda.cu — the CUDA kernels of sum (and mean), max and min, named
 * dlop_reduce_{rows,block,columns,finish,columns_finish}_{sum,max,min}_<dtype>. Deterministic:
 * no atomics; each output's elements go to fixed threads in a fixed order and meet in a fixed
 * tree. reduce_cuda_plan.h picks the kernel and splits the work; nvcc embeds this file as
 * dlop_reduce_reduce_cuda_fatbin.
 *   rows     a warp per output; contiguous reductions in 16-byte vectors (the last axis);
 *   block    a block per (output, part) in 16-byte vectors, finish combining the parts (every
 *            axis, a long last axis);
 *   columns  a block per strip of consecutive outputs: a warp reads 32 adjacent outputs (or
 *            packs of 2 to 8 adjacent outputs, one vector load of up to 16 bytes each) of one
 *            row (coalesced), the block's thread groups take every 8th row (up to every 32nd
 *            for wide packs, more groups when outputs are few), 32 bytes of loads in flight
 *            per thread and output (64 per pack), float32 and float64 sums Kahan-compensated
 *            per thread (16-bit inputs' float32 sums plain), the groups meet in a tree;
 *            columns_finish combines the parts of a reduction split further (a first or
 *            middle axis: sum over axis 0 of 8192 x 8192 takes 256 strips in 4 parts). */
#include <dlop/kit/cuda_kernel_util.cuh>

#include <math.h>
#include <type_traits>

#include "reduce_cuda_plan.h"
#include "reduce_layout.h"

namespace {

enum { OP_SUM = 0, OP_MAX = 1, OP_MIN = 2 };

/* float16 and bfloat16 accumulate in float, integers in 64 bits (sums wrap). */
template <typename T> struct acc_of { typedef long long type; };
template <> struct acc_of<__half> { typedef float type; };
template <> struct acc_of<__nv_bfloat16> { typedef float type; };
template <> struct acc_of<float> { typedef float type; };
template <> struct acc_of<double> { typedef double type; };

/* Blocks of the columns kernel of T each SM must hold at once; ptxas fits its registers to
 * that. Float dtypes: 5 (48 registers a thread, no spills; the bare kernel takes 64, so an SM
 * held 4 blocks): the fifth block's loads in flight made float32 column sums 2-4 % faster on
 * an H100 (the first axis of 8192 x 8192, middle axes of 512 x 512 x 256 and 16384 x 16 x 256,
 * the first of 256 x 512 x 512: 89.6-97.7 us against 92.7-100.9, bench/reduce_columns.cu) and
 * 16-bit ones no slower; 6 and 8 spill and run slower. Integer dtypes (their 64-bit
 * accumulators would spill at 48): 4. */
template <typename T> struct columns_blocks_per_sm {
  enum { value = std::is_floating_point<typename acc_of<T>::type>::value ? 5 : 4 };
};

template <typename A, typename T>
__device__ __forceinline__ A load_acc(T x) {
  if constexpr (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value)
    return dlop_cuda_to_float(x);
  else
    return (A)x;
}

template <int Op, typename A>
__device__ __forceinline__ A identity() {
  if constexpr (Op == OP_SUM) return (A)0;
  else if constexpr (std::is_floating_point<A>::value) return Op == OP_MAX ? (A)-INFINITY : (A)INFINITY;
  else return Op == OP_MAX ? (A)LLONG_MIN : (A)LLONG_MAX;
}

/* a is the running value, b the new one; NaN propagates (a NaN a stays, a NaN b wins), and of
 * equal values (-0.0, 0.0) the later wins, as NumPy. Floats take b when a is not NaN and b is
 * not below a (max; not above it for min), which is false for any NaN b comparison and so
 * takes a NaN b: two compares and a select per element, no branch (the branches of testing
 * each operand for NaN first held max at 0.78-0.89x of PyTorch's time on an H200). */
template <int Op, typename A>
__device__ __forceinline__ A combine(A a, A b) {
  if constexpr (Op == OP_SUM) {
    if constexpr (std::is_floating_point<A>::value) return a + b;
    else return (A)((unsigned long long)a + (unsigned long long)b);
  } else if constexpr (std::is_floating_point<A>::value) {
    const bool take = (a == a) & !(Op == OP_MAX ? b < a : b > a);
    return take ? b : a;
  } else {
    return (Op == OP_MAX ? b > a : b < a) ? b : a;
  }
}

template <typename T, typename A>
__device__ __forceinline__ T from_acc(A v) {
  if constexpr (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value)
    return dlop_cuda_from_float<T>(v);
  else
    return (T)v;
}

/* Writes output element at offset (elements): integer sums as int64, the rest as T; mean
 * divides by the count in the accumulator type (0 / 0 gives NaN for an empty mean). */
template <int Op, typename T, typename A>
__device__ __forceinline__ void store(void *out, int64_t offset, A v, int mean, int64_t count) {
  if constexpr (std::is_floating_point<A>::value) {
    if (mean) v = v / (A)count;
  }
  if constexpr (Op == OP_SUM && !std::is_floating_point<A>::value)
    ((long long *)out)[offset] = v;
  else
    ((T *)out)[offset] = from_acc<T, A>(v);
}

/* The offsets of reduction element r and of output m: one division per dim but the outermost
 * (whose index is what remains), 32-bit when the count fits (several times cheaper than a
 * 64-bit one, and the columns kernel does this once per thread and strip). */
template <typename Index>
__device__ __forceinline__ int64_t reduced_offset_as(const reduce_layout &l, Index r) {
  int64_t offset = 0;
  for (int d = l.reduced_ndim - 1; d > 0; d--) {
    const Index size = (Index)l.reduced_shape[d], q = r / size;
    offset += (int64_t)(r - q * size) * l.reduced_strides[d];
    r = q;
  }
  return offset + (int64_t)r * l.reduced_strides[0];
}

__device__ __forceinline__ int64_t reduced_offset(const reduce_layout &l, int64_t r) {
  if (l.reduced_ndim == 1) return r * l.reduced_strides[0];
  if (l.count <= (int64_t)UINT32_MAX) return reduced_offset_as<uint32_t>(l, (uint32_t)r);
  return reduced_offset_as<uint64_t>(l, (uint64_t)r);
}

template <typename Index>
__device__ __forceinline__ void kept_offsets_as(const reduce_layout &l, Index m, int64_t *in,
                                                int64_t *out) {
  int64_t a = 0, b = 0;
  for (int d = l.kept_ndim - 1; d > 0; d--) {
    const Index size = (Index)l.kept_shape[d], q = m / size;
    const int64_t i = (int64_t)(m - q * size);
    a += i * l.kept_in_strides[d];
    b += i * l.kept_out_strides[d];
    m = q;
  }
  *in = a + (int64_t)m * l.kept_in_strides[0];
  *out = b + (int64_t)m * l.kept_out_strides[0];
}

__device__ __forceinline__ void kept_offsets(const reduce_layout &l, int64_t m, int64_t *in,
                                             int64_t *out) {
  if (l.outputs <= (int64_t)UINT32_MAX) kept_offsets_as<uint32_t>(l, (uint32_t)m, in, out);
  else kept_offsets_as<uint64_t>(l, (uint64_t)m, in, out);
}

__device__ __forceinline__ bool reduced_contiguous(const reduce_layout &l) {
  return l.reduced_ndim == 1 && l.reduced_strides[0] == 1;
}

/* Lane 0 ends with the warp's values combined in a fixed butterfly-free tree (offsets 16..1). */
template <int Op, typename A>
__device__ __forceinline__ A warp_reduce(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine<Op, A>(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

/* Thread 0 ends with the block's values combined: warps first, then the 8 warp results. The
 * trailing barrier lets the caller's next iteration reuse the shared slots. */
template <int Op, typename A>
__device__ __forceinline__ A block_reduce(A v) {
  __shared__ A slots[REDUCE_CUDA_BLOCK / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce<Op, A>(v);
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < REDUCE_CUDA_BLOCK / 32 ? slots[lane] : identity<Op, A>();
    v = warp_reduce<Op, A>(v);
  }
  __syncthreads();
  return v;
}

/* Thread `thread` of `threads`' share of n contiguous elements: groups of one 16-byte vector's
 * worth, group g to thread g % threads, in order. Vector loads when x is 16-byte aligned,
 * scalar ones otherwise, in the same order, so alignment never changes the result. */
template <int Op, typename T, typename A>
__device__ __forceinline__ A contiguous_share(const T *x, int64_t n, A acc, int thread, int threads) {
  typedef dlop_cuda_vec16<T> V;
  const int64_t groups = n / V::width;
  /* evict-first loads here, unlike the elementwise kernels: not measured without them yet */
  if (dlop_cuda_aligned16(x)) {
    const V *xv = reinterpret_cast<const V *>(x);
    if constexpr (sizeof(T) < 4) {
      /* 1- and 2-byte types one load at a time: batched as below, float16/bfloat16 measured
       * slower on an H100 (sums over the last axis of [256,1024,256]: 0.92/0.73 of PyTorch's,
       * not 1.13) */
#pragma unroll 4
      for (int64_t g = thread; g < groups; g += threads) {
        const V v = dlop_cuda_load_streaming(xv + g);
#pragma unroll
        for (int k = 0; k < V::width; k++) acc = combine<Op, A>(acc, load_acc<A>(v.e[k]));
      }
    } else {
      /* up to `batch` loads in flight before the first is combined, the last batch predicated:
       * a short row (a warp's 2 vectors a lane) would otherwise wait for each load in turn */
      enum { batch = 4 };
      for (int64_t g = thread; g < groups; g += batch * (int64_t)threads) {
        V v[batch];
#pragma unroll
        for (int u = 0; u < batch; u++)
          if (g + u * threads < groups) v[u] = dlop_cuda_load_streaming(xv + g + u * threads);
#pragma unroll
        for (int u = 0; u < batch; u++)
          if (g + u * threads < groups)
#pragma unroll
            for (int k = 0; k < V::width; k++) acc = combine<Op, A>(acc, load_acc<A>(v[u].e[k]));
      }
    }
  } else {
    for (int64_t g = thread; g < groups; g += threads)
#pragma unroll
      for (int k = 0; k < V::width; k++) acc = combine<Op, A>(acc, load_acc<A>(x[g * V::width + k]));
  }
  if (thread == groups % threads)
    for (int64_t i = groups * V::width; i < n; i++) acc = combine<Op, A>(acc, load_acc<A>(x[i]));
  return acc;
}

/* A warp per output (short reductions): contiguous ones in 16-byte vectors (vector v to lane
 * v % 32), strided ones element by element (lane l takes elements l, l + 32, ...). */
template <int Op, typename T>
__device__ void rows_body(const T *in, void *out, const reduce_layout &l, int mean) {
  typedef typename acc_of<T>::type A;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (REDUCE_CUDA_BLOCK / 32);
  const bool contiguous = reduced_contiguous(l);
  for (int64_t m = (int64_t)blockIdx.x * (REDUCE_CUDA_BLOCK / 32) + (threadIdx.x >> 5); m < l.outputs;
       m += warps) {
    int64_t in_offset, out_offset;
    kept_offsets(l, m, &in_offset, &out_offset);
    const T *x = in + in_offset;
    A acc = identity<Op, A>();
    if (contiguous)
      acc = contiguous_share<Op, T, A>(x, l.count, acc, lane, 32);
    else
      for (int64_t r = lane; r < l.count; r += 32)
        acc = combine<Op, A>(acc, load_acc<A>(x[reduced_offset(l, r)]));
    acc = warp_reduce<Op, A>(acc);
    if (lane == 0) store<Op, T, A>(out, out_offset, acc, mean, l.count);
  }
}

/* A block per (output, part): part p of parts covers a fixed slice of the reduction; with one
 * part the block writes the output, otherwise its partial (finish_body combines them). */
template <int Op, typename T>
__device__ void block_body(const T *in, void *out, void *partials, const reduce_layout &l,
                           int64_t parts, int mean) {
  typedef typename acc_of<T>::type A;
  const int64_t items = l.outputs * parts;
  /* slices a multiple of 8 elements long, so a slice starts aligned when the tensor does */
  /* without count + parts - 1, which a count near 2^63 would take past int64; one part
   * needs no alignment, and with more each slice is at most half the count plus 7 */
  int64_t slice = l.count / parts + (l.count % parts != 0);
  if (parts > 1) slice = (slice + 7) / 8 * 8;
  const bool contiguous = reduced_contiguous(l);
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t m = item / parts, p = item - m * parts;
    const int64_t begin = p * slice < l.count ? p * slice : l.count;
    const int64_t end = slice < l.count - begin ? begin + slice : l.count;
    int64_t in_offset, out_offset;
    kept_offsets(l, m, &in_offset, &out_offset);
    const T *x = in + in_offset;
    A acc = identity<Op, A>();
    if (contiguous) {
      acc = contiguous_share<Op, T, A>(x + begin, end - begin, acc, threadIdx.x, REDUCE_CUDA_BLOCK);
    } else {
      for (int64_t r = begin + threadIdx.x; r < end; r += REDUCE_CUDA_BLOCK)
        acc = combine<Op, A>(acc, load_acc<A>(x[reduced_offset(l, r)]));
    }
    acc = block_reduce<Op, A>(acc);
    if (threadIdx.x == 0) {
      if (parts == 1) store<Op, T, A>(out, out_offset, acc, mean, l.count);
      else ((A *)partials)[item] = acc;
    }
  }
}

/* Whether a thread's running sum of T elements (accumulated in A) is Kahan-compensated:
 * float32 and float64 sums are; 16-bit inputs' float32 sums are not, as PyTorch's are not:
 * the float32 error of a thread's R rows (at most R x 2^-24 of their magnitudes; R is the
 * reduced length over groups and parts: 256 for axis 0 of 8192 x 8192) stays below the
 * 16-bit result's own rounding (2^-11 of the sum in float16, 2^-8 in bfloat16) unless the
 * sum cancels, and the compensation cost 5-8 % of the time on an H100 (512 x 512 x 256
 * float16 along the middle axis: 52.5 us with it, 48.6 without). */
template <int Op, typename T, typename A>
__device__ __forceinline__ constexpr bool compensates() {
  return Op == OP_SUM && std::is_floating_point<A>::value && sizeof(T) >= 4;
}

/* Kahan's compensated addition of part into a thread's running float sum (so a long column
 * keeps float accuracy without a tree; the result is acc - *compensation), combine otherwise.
 * A compensation that is not finite (an infinite or NaN total, inf - inf) is dropped, so
 * infinities and NaN come out as a plain sum gives them. */
template <int Op, typename T, typename A>
__device__ __forceinline__ A accumulate(A acc, A part, A *compensation) {
  if constexpr (compensates<Op, T, A>()) {
    const A y = part - *compensation, t = acc + y, lost = (t - acc) - y;
    *compensation = isfinite(lost) ? lost : (A)0;
    return t;
  } else {
    return combine<Op, A>(acc, part);
  }
}

template <int Op, typename T, typename A>
__device__ __forceinline__ A compensated(A acc, A compensation) {
  if constexpr (compensates<Op, T, A>()) return acc - compensation;
  else return acc;
}

/* P adjacent elements of a row, in order: one vector load of P * sizeof(T) bytes (4, 8 or 16)
 * when Vector (the caller checked the alignment), else element by element. Read-only path
 * (__ldg). */
template <typename T, int P>
struct pack_of {
  T e[P];
};

template <typename T, int P, bool Vector>
__device__ __forceinline__ pack_of<T, P> load_pack(const T *p) {
  pack_of<T, P> v;
  constexpr size_t bytes = P * sizeof(T);
  if constexpr (P >= 2 && Vector) {
    static_assert(bytes == 4 || bytes == 8 || bytes == 16, "packs of 4, 8 or 16 bytes");
    if constexpr (bytes == 4) {
      const unsigned int raw = __ldg(reinterpret_cast<const unsigned int *>(p));
      memcpy(v.e, &raw, sizeof raw);
    } else if constexpr (bytes == 8) {
      const uint2 raw = __ldg(reinterpret_cast<const uint2 *>(p));
      memcpy(v.e, &raw, sizeof raw);
    } else {
      const uint4 raw = __ldg(reinterpret_cast<const uint4 *>(p));
      memcpy(v.e, &raw, sizeof raw);
    }
  } else {
#pragma unroll
    for (int j = 0; j < P; j++) v.e[j] = __ldg(p + j);
  }
  return v;
}

/* One thread's rows of its P adjacent outputs of the columns kernel (result[j]: output j):
 * rows first, first + step, ... below end of the outputs' elements at x (element j of a row at
 * x + row offset + j). U loads in flight per thread, 32 bytes' worth for one output (at most
 * 16), 64 bytes' worth for a pack (4 to 16 loads of 4 to 16 bytes): an SM holds 5 blocks of
 * the float dtypes' kernels (columns_blocks_per_sm), and an H200 needs about 30 KB in flight
 * per SM to stream at full bandwidth; wider packs give the same bytes in fewer load
 * instructions. Each group of U is combined, then accumulated, per output. One reduced dim
 * (the usual case) walks a pointer; more take reduced_offset's divisions, element by element. */
template <int Op, typename T, typename A, int P, bool Vector>
__device__ __forceinline__ void column_share(const T *x, const reduce_layout &l, int64_t first,
                                             int64_t end, int64_t step, A *result) {
  constexpr int U = P == 1 ? (sizeof(T) >= 8 ? 4 : sizeof(T) == 4 ? 8 : 16) : 64 / (P * sizeof(T));
  A acc[P], compensation[P];
#pragma unroll
  for (int j = 0; j < P; j++) acc[j] = identity<Op, A>(), compensation[j] = (A)0;
  int64_t r = first;
  if (l.reduced_ndim == 1) {
    const int64_t stride = l.reduced_strides[0] * step;
    const T *p = x + first * l.reduced_strides[0];
    for (; r + (U - 1) * step < end; r += U * step) {
      pack_of<T, P> v[U];
#pragma unroll
      for (int u = 0; u < U; u++, p += stride) v[u] = load_pack<T, P, Vector>(p);
#pragma unroll
      for (int j = 0; j < P; j++) {
        A part = load_acc<A>(v[0].e[j]);
#pragma unroll
        for (int u = 1; u < U; u++) part = combine<Op, A>(part, load_acc<A>(v[u].e[j]));
        acc[j] = accumulate<Op, T, A>(acc[j], part, &compensation[j]);
      }
    }
    for (; r < end; r += step, p += stride) {
      const pack_of<T, P> v = load_pack<T, P, Vector>(p);
#pragma unroll
      for (int j = 0; j < P; j++) acc[j] = accumulate<Op, T, A>(acc[j], load_acc<A>(v.e[j]), &compensation[j]);
    }
  } else { /* reduced dims that do not merge: rare, kept compact (no unrolled divisions) */
    for (; r < end; r += step) {
      const pack_of<T, P> v = load_pack<T, P, Vector>(x + reduced_offset(l, r));
#pragma unroll
      for (int j = 0; j < P; j++) acc[j] = accumulate<Op, T, A>(acc[j], load_acc<A>(v.e[j]), &compensation[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < P; j++) result[j] = compensated<Op, T, A>(acc[j], compensation[j]);
}

/* A block per (strip of tile_columns consecutive packs of P outputs, part):
 * reduce_cuda_column_work_of gives each thread its outputs and rows; the strip's thread groups
 * meet in a fixed tree (group g takes in group g + half), per output; with one part group 0
 * writes the outputs, otherwise partials[part * outputs + output] (columns_finish_body
 * combines them). Adjacent threads have adjacent packs, so every load of a warp reads
 * consecutive elements of a row. A pack's P outputs are neighbours in the input
 * (reduce_cuda_columns_packs) and outputs o .. o + P - 1 in the output's innermost kept dim;
 * its loads are vectors when the tensor's first element is aligned to the pack (every pack
 * then is), element by element in the same order otherwise, so alignment never changes a
 * result. */
template <int Op, typename T, int P>
__device__ void columns_body(const T *in, void *out, void *partials, const reduce_layout &l,
                             int64_t parts, int32_t tile_columns, int mean) {
  typedef typename acc_of<T>::type A;
  __shared__ A slots[P][REDUCE_CUDA_BLOCK];
  const int64_t packs = l.outputs / P;
  const int64_t items = (packs + tile_columns - 1) / tile_columns * parts;
  const bool vector = P == 1 || ((uintptr_t)in & (P * sizeof(T) - 1)) == 0;
  const int64_t out_step = l.kept_out_strides[l.kept_ndim - 1];
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    reduce_cuda_column_work w;
    reduce_cuda_column_work_of(&l, parts, tile_columns, P, item, (int32_t)threadIdx.x, &w);
    const bool active = w.output < l.outputs;
    int64_t in_offset = 0, out_offset = 0;
    A acc[P];
#pragma unroll
    for (int j = 0; j < P; j++) acc[j] = identity<Op, A>();
    if (active) {
      kept_offsets(l, w.output, &in_offset, &out_offset);
      if (vector) column_share<Op, T, A, P, true>(in + in_offset, l, w.first, w.end, w.step, acc);
      else column_share<Op, T, A, P, false>(in + in_offset, l, w.first, w.end, w.step, acc);
    }
#pragma unroll
    for (int j = 0; j < P; j++) slots[j][threadIdx.x] = acc[j];
    __syncthreads();
    for (int64_t half = w.step / 2; half > 0; half /= 2) {
      if (w.group < half)
#pragma unroll
        for (int j = 0; j < P; j++)
          slots[j][threadIdx.x] = combine<Op, A>(slots[j][threadIdx.x], slots[j][threadIdx.x + half * tile_columns]);
      __syncthreads();
    }
    if (w.group == 0 && active) {
#pragma unroll
      for (int j = 0; j < P; j++) {
        if (parts == 1) store<Op, T, A>(out, out_offset + j * out_step, slots[j][threadIdx.x], mean, l.count);
        else ((A *)partials)[w.part * l.outputs + w.output + j] = slots[j][threadIdx.x];
      }
    }
    __syncthreads(); /* the next strip reuses the slots */
  }
}

/* The columns kernel: packs of outputs per thread where the plan says so, up to 16 bytes (float
 * dtypes only: the thunk never asks for them otherwise). */
template <int Op, typename T>
__device__ void columns_kernel_body(const T *in, void *out, void *partials, const reduce_layout &l,
                                    int64_t parts, int32_t pack, int32_t tile_columns, int mean) {
  if constexpr (std::is_floating_point<typename acc_of<T>::type>::value) {
    if constexpr (sizeof(T) == 2) {
      if (pack == 8) return columns_body<Op, T, 8>(in, out, partials, l, parts, tile_columns, mean);
    }
    if constexpr (sizeof(T) <= 4) {
      if (pack == 4) return columns_body<Op, T, 4>(in, out, partials, l, parts, tile_columns, mean);
    }
    if (pack == 2) return columns_body<Op, T, 2>(in, out, partials, l, parts, tile_columns, mean);
  }
  columns_body<Op, T, 1>(in, out, partials, l, parts, tile_columns, mean);
}

/* The columns kernel's second pass: a thread per output combines its parts' partials in part
 * order (float32 and float64 sums compensated, as within a thread). */
template <int Op, typename T>
__device__ void columns_finish_body(const void *partials, void *out, const reduce_layout &l,
                                    int64_t parts, int mean) {
  typedef typename acc_of<T>::type A;
  const A *p = (const A *)partials;
  for (int64_t m = dlop_cuda_thread_index(); m < l.outputs; m += dlop_cuda_thread_count()) {
    int64_t in_offset, out_offset;
    kept_offsets(l, m, &in_offset, &out_offset);
    A acc = identity<Op, A>(), compensation = (A)0;
    for (int64_t j = 0; j < parts; j++) acc = accumulate<Op, T, A>(acc, p[j * l.outputs + m], &compensation);
    store<Op, T, A>(out, out_offset, compensated<Op, T, A>(acc, compensation), mean, l.count);
  }
}

/* The second pass: a block per output combines its parts' partials in order. */
template <int Op, typename T>
__device__ void finish_body(const void *partials, void *out, const reduce_layout &l, int64_t parts,
                            int mean) {
  typedef typename acc_of<T>::type A;
  const A *p = (const A *)partials;
  for (int64_t m = blockIdx.x; m < l.outputs; m += gridDim.x) {
    int64_t in_offset, out_offset;
    kept_offsets(l, m, &in_offset, &out_offset);
    A acc = identity<Op, A>();
    for (int64_t j = threadIdx.x; j < parts; j += REDUCE_CUDA_BLOCK)
      acc = combine<Op, A>(acc, p[m * parts + j]);
    acc = block_reduce<Op, A>(acc);
    if (threadIdx.x == 0) store<Op, T, A>(out, out_offset, acc, mean, l.count);
  }
}

}  // namespace

#define REDUCE_CUDA_KERNELS(op, OP, name, T)                                                  \
  extern "C" __global__ void __launch_bounds__(REDUCE_CUDA_BLOCK)                            \
      dlop_reduce_rows_##op##_##name(const T *in, void *out, reduce_layout l, int mean) {   \
    rows_body<OP, T>(in, out, l, mean);                                                      \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(REDUCE_CUDA_BLOCK)                            \
      dlop_reduce_block_##op##_##name(const T *in, void *out, void *partials, reduce_layout l, \
                                      int64_t parts, int mean) {                             \
    block_body<OP, T>(in, out, partials, l, parts, mean);                                    \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(REDUCE_CUDA_BLOCK, columns_blocks_per_sm<T>::value) \
      dlop_reduce_columns_##op##_##name(const T *in, void *out, void *partials, reduce_layout l, \
                                        int64_t parts, int32_t pack, int32_t tile_columns,   \
                                        int mean) {                                          \
    columns_kernel_body<OP, T>(in, out, partials, l, parts, pack, tile_columns, mean);       \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(REDUCE_CUDA_BLOCK)                            \
      dlop_reduce_columns_finish_##op##_##name(const void *partials, void *out, reduce_layout l, \
                                               int64_t parts, int mean) {                    \
    columns_finish_body<OP, T>(partials, out, l, parts, mean);                               \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(REDUCE_CUDA_BLOCK)                            \
      dlop_reduce_finish_##op##_##name(const void *partials, void *out, reduce_layout l,     \
                                       int64_t parts, int mean) {                            \
    finish_body<OP, T>(partials, out, l, parts, mean);                                       \
  }

#define REDUCE_CUDA_DTYPE(name, T)                                                            \
  REDUCE_CUDA_KERNELS(sum, OP_SUM, name, T)                                                  \
  REDUCE_CUDA_KERNELS(max, OP_MAX, name, T)                                                  \
  REDUCE_CUDA_KERNELS(min, OP_MIN, name, T)

REDUCE_CUDA_DTYPE(float16, __half)
REDUCE_CUDA_DTYPE(bfloat16, __nv_bfloat16)
REDUCE_CUDA_DTYPE(float32, float)
REDUCE_CUDA_DTYPE(float64, double)
REDUCE_CUDA_DTYPE(int8, int8_t)
REDUCE_CUDA_DTYPE(int16, int16_t)
REDUCE_CUDA_DTYPE(int32, int32_t)
REDUCE_CUDA_DTYPE(int64, int64_t)
REDUCE_CUDA_DTYPE(uint8, uint8_t)
