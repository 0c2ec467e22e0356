/* copy_kernels.cu — the strided kernels behind dlop__tensor_copy on CUDA, per element size
 * (1, 2, 4, 8 bytes). Built by nvcc into a fatbin embedded in libdlop as
 * dlop__copy_kernels_fatbin (see copy.c).
 *   dlop_copy_strided_<size>    a gather: one thread per element in a grid-stride loop, any
 *                               strides (negative and zero too) on either side;
 *   dlop_copy_transpose_<size>  a layout whose source is contiguous along one dim and whose
 *                               destination is contiguous along another (a transposed or
 *                               permuted input made contiguous): 32 x 32 tiles through shared
 *                               memory, so both the loads and the stores of a warp are
 *                               consecutive (the gather's loads stepped through memory a whole
 *                               row apart per thread). */
#include <stdint.h>

#include "copy_layout.h"

/* Offsets of element `linear` (C order over the layout's shape), innermost dim first, so that
 * consecutive threads touch consecutive inner indices. Index is uint32_t below 2^32 elements:
 * 32-bit divisions are several times cheaper, and there is one per dim per element. */
template <typename Index>
__device__ __forceinline__ void gather_offsets(const dlop__copy_layout &layout, Index linear,
                                               int64_t *source_offset, int64_t *destination_offset) {
  int64_t s = 0, d = 0;
  for (int dim = layout.ndim - 1; dim >= 0; dim--) {
    const Index size = (Index)layout.shape[dim];
    const Index rest = linear / size;
    const int64_t index = (int64_t)(linear - rest * size);
    linear = rest;
    s += index * layout.source_strides[dim];
    d += index * layout.destination_strides[dim];
  }
  *source_offset = s;
  *destination_offset = d;
}

template <typename T, typename Index>
__device__ void strided_copy(const T *__restrict__ source, T *__restrict__ destination,
                             const dlop__copy_layout &layout) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t linear = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; linear < layout.numel;
       linear += step) {
    int64_t source_offset, destination_offset;
    gather_offsets<Index>(layout, (Index)linear, &source_offset, &destination_offset);
    destination[destination_offset] = source[source_offset];
  }
}

template <typename T>
__device__ void gather_copy(const T *__restrict__ source, T *__restrict__ destination,
                            const dlop__copy_layout &layout) {
  if (layout.numel <= (int64_t)UINT32_MAX) strided_copy<T, uint32_t>(source, destination, layout);
  else strided_copy<T, uint64_t>(source, destination, layout);
}

/* The tiled copy: dim s of the layout has source stride 1, dim d destination stride 1 (s != d;
 * copy.c picks them). Block (x, y, z) takes tile (x, y) of the (s, d) plane of batch z (an
 * index over the other dims), striding over the rest. It reads the tile along s (threadIdx.x
 * walks consecutive source elements) into shared memory, then writes it along d (threadIdx.x
 * walks consecutive destination elements); 33 columns so that the column reads of the second
 * half hit 32 different banks. Blocks are DLOP_COPY_TILE x DLOP_COPY_TILE_ROWS threads, each
 * moving DLOP_COPY_TILE / DLOP_COPY_TILE_ROWS elements of a tile. */
template <typename T>
__device__ void transpose_copy(const T *__restrict__ source, T *__restrict__ destination,
                               const dlop__copy_layout &layout, int32_t s, int32_t d) {
  __shared__ T tile[DLOP_COPY_TILE][DLOP_COPY_TILE + 1];
  const int64_t ns = layout.shape[s], nd = layout.shape[d];
  const int64_t tiles_s = (ns + DLOP_COPY_TILE - 1) / DLOP_COPY_TILE;
  const int64_t tiles_d = (nd + DLOP_COPY_TILE - 1) / DLOP_COPY_TILE;
  const int64_t batches = layout.numel / (ns * nd);
  const int64_t source_step = layout.source_strides[d], destination_step = layout.destination_strides[s];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t batch = blockIdx.z; batch < batches; batch += gridDim.z) {
    /* the batch's offsets over the dims other than s and d, innermost first */
    int64_t rest = batch, source_base = 0, destination_base = 0;
    for (int dim = layout.ndim - 1; dim >= 0 && rest > 0; dim--) {
      if (dim == s || dim == d) continue;
      const int64_t index = rest % layout.shape[dim];
      rest /= layout.shape[dim];
      source_base += index * layout.source_strides[dim];
      destination_base += index * layout.destination_strides[dim];
    }
    for (int64_t tile_d = blockIdx.y; tile_d < tiles_d; tile_d += gridDim.y)
      for (int64_t tile_s = blockIdx.x; tile_s < tiles_s; tile_s += gridDim.x) {
        const int64_t first_s = tile_s * DLOP_COPY_TILE, first_d = tile_d * DLOP_COPY_TILE;
        /* element (first_s + tx, first_d + row) into tile[row][tx] */
#pragma unroll
        for (int row = ty; row < DLOP_COPY_TILE; row += DLOP_COPY_TILE_ROWS)
          if (first_s + tx < ns && first_d + row < nd)
            tile[row][tx] = source[source_base + (first_s + tx) + (first_d + row) * source_step];
        __syncthreads();
        /* element (first_s + row, first_d + tx) from tile[tx][row] */
#pragma unroll
        for (int row = ty; row < DLOP_COPY_TILE; row += DLOP_COPY_TILE_ROWS)
          if (first_s + row < ns && first_d + tx < nd)
            destination[destination_base + (first_s + row) * destination_step + (first_d + tx)] =
                tile[tx][row];
        __syncthreads(); /* the next tile reuses the shared memory */
      }
  }
}

#define DLOP_COPY_KERNELS(size, T)                                                           \
  extern "C" __global__ void dlop_copy_strided_##size(const T *source, T *destination,        \
                                                      dlop__copy_layout layout) {             \
    gather_copy(source, destination, layout);                                                \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(DLOP_COPY_TILE * DLOP_COPY_TILE_ROWS)          \
      dlop_copy_transpose_##size(const T *source, T *destination, dlop__copy_layout layout,  \
                                 int32_t source_dim, int32_t destination_dim) {              \
    transpose_copy(source, destination, layout, source_dim, destination_dim);                \
  }

DLOP_COPY_KERNELS(1, uint8_t)
DLOP_COPY_KERNELS(2, uint16_t)
DLOP_COPY_KERNELS(4, uint32_t)
DLOP_COPY_KERNELS(8, uint64_t)
