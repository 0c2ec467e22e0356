/* copy_layout.h — the description of an elementwise strided copy, shared by copy.c (which builds
 * it, merging dimensions where it can) and the CUDA kernel in copy_kernels.cu (which gets it by
 * value). Plain C, also compiled by nvcc; keep the layout identical on both sides. */
#ifndef DLOP_COPY_LAYOUT_H
#define DLOP_COPY_LAYOUT_H

#include <stdint.h>

#define DLOP_COPY_MAX_NDIM 16 /* = DLOP_MAX_NDIM; copy_kernels.cu does not include dlop headers */

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
