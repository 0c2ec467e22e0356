/* dlop/kit/rows_layout.h — the rows view of a strided loop (a matrix with a row, a column or a
 * scalar broadcast into it) that CUDA rows kernels take by value. Part of kernel_util.h. */
#ifndef DLOP_ROWS_LAYOUT_H
#define DLOP_ROWS_LAYOUT_H

#include <stdint.h>
#include <string.h>

#include "strided_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loop of at most 2 dims (after collapsing) whose inner dim is contiguous in the output and,
 * in each input, contiguous (stride 1) or constant (stride 0: a broadcast column or scalar),
 * with every contiguous operand's rows starting 16-byte aligned and rows a whole number of
 * 16-byte vectors: a matrix times a row, a column or a scalar, or a padded slice x[:, :k].
 * Rows kernels take it by value and handle one 16-byte vector of the output per thread: the
 * row of a vector is one multiply-high by a precomputed magic number, not a division per
 * element and dim as on the general strided path. */
typedef struct dlop_rows_layout {
  int64_t vectors;         /* rows * per_row */
  int64_t per_row;         /* 16-byte vectors in a row, >= 1 */
  uint32_t magic, shift;   /* q = (umulhi(v, magic) + v) >> shift is v / per_row, v < 2^32 */
  int32_t width;           /* elements in a vector */
  int32_t num_operands;
  int64_t row_stride[DLOP_KERNEL_MAX_OPERANDS]; /* elements */
  int32_t inner[DLOP_KERNEL_MAX_OPERANDS];      /* inner stride: 1 or 0 */
  int32_t reused[DLOP_KERNEL_MAX_OPERANDS];     /* row stride 0 over several rows: cache it */
} dlop_rows_layout;

/* True (1) when the loop has the rows shape above; fills r. */
static inline int dlop_rows_layout_init(dlop_rows_layout *r, const dlop_strided_loop *loop) {
  const dlop_nd_offsets *l = &loop->layout;
  int32_t inner = l->ndim - 1, k;
  int64_t size = loop->element_size[0], width, rows, cols;
  uint32_t shift = 0;
  memset(r, 0, sizeof *r);
  if (l->ndim < 1 || l->ndim > 2 || size <= 0 || size > 16 || 16 % size != 0) return 0;
  width = 16 / size;
  cols = l->shape[inner];
  rows = l->ndim == 2 ? l->shape[0] : 1;
  if (cols <= 0 || rows <= 0 || cols % width != 0) return 0;
  for (k = 0; k < l->num_operands; k++) {
    int64_t stride = l->strides[k][inner], row_stride = l->ndim == 2 ? l->strides[k][0] : 0;
    if (loop->element_size[k] != size) return 0;
    if (stride == 1) {
      if (((uintptr_t)loop->base[k] & 15u) != 0 || (row_stride * size) % 16 != 0) return 0;
    } else if (stride != 0 || k == 0) { /* the output must be written along the row */
      return 0;
    }
    r->row_stride[k] = row_stride;
    r->inner[k] = (int32_t)stride;
    r->reused[k] = row_stride == 0 && rows > 1;
  }
  r->num_operands = l->num_operands;
  r->width = (int32_t)width;
  r->per_row = cols / width;
  r->vectors = rows * r->per_row;
  /* the round-up magic number of per_row (Granlund and Montgomery): shift = ceil(log2(d)),
   * magic = 2^32 (2^shift - d) / d + 1 fits in 32 bits and (2^shift - d) < 2^31 keeps the
   * product below 2^63; only used when vectors < 2^32 (so per_row < 2^32) */
  if (r->vectors <= (int64_t)UINT32_MAX) {
    uint64_t d = (uint64_t)r->per_row;
    while (shift < 32 && ((uint64_t)1 << shift) < d) shift++;
    r->shift = shift;
    r->magic = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - d)) / d + 1);
  }
  return 1;
}

#ifdef __cplusplus
}
#endif

#endif
