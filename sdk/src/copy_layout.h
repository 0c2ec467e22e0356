/* copy_layout.h — the description of an elementwise strided copy, shared by copy.c (which builds
 * it, merging dimensions where it can) and the CUDA kernel in copy_kernels.cu (which gets it by
 * value). Plain C, also compiled by nvcc; keep the layout identical on both sides. */
#ifndef DLOP_COPY_LAYOUT_H
#define DLOP_COPY_LAYOUT_H

#include <stdint.h>

#define DLOP_COPY_MAX_NDIM 16 /* = DLOP_MAX_NDIM; copy_kernels.cu does not include dlop headers */

/* The tiled (transposing) copy: square tiles of DLOP_COPY_TILE elements a side, blocks of
 * DLOP_COPY_TILE x DLOP_COPY_TILE_ROWS threads; copy.c takes it when both dims of the tile
 * have at least DLOP_COPY_TILE_MIN elements (shorter ones would leave most of a tile idle). */
#define DLOP_COPY_TILE 32
#define DLOP_COPY_TILE_ROWS 8
#define DLOP_COPY_TILE_MIN 16

/* Elements at index (i0, i1, ...) move from src + sum(i_d * source_strides[d]) to
 * dst + sum(i_d * destination_strides[d]); strides in elements, any sign. */
typedef struct dlop__copy_layout {
  int32_t ndim; /* at least 1 */
  int32_t reserved;
  int64_t numel;
  int64_t shape[DLOP_COPY_MAX_NDIM];
  int64_t source_strides[DLOP_COPY_MAX_NDIM];
  int64_t destination_strides[DLOP_COPY_MAX_NDIM];
} dlop__copy_layout;

#endif
