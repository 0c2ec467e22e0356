/* dlop/kit/rows_layout.h — the rows view of a strided loop (a matrix with a row, a column or a
 * scalar broadcast into it) that CUDA rows kernels take by value, and the operand kinds the 2-d
 * rows kernels are specialized for. Part of kernel_util.h. */
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

/* The 2-d rows kernels (dlop_cuda_binary_rows_2d, for binary ops) know each input's kind at
 * compile time: a full matrix (its own rows, possibly padded), a row read by every row (through
 * the cache), or one element per row (a broadcast column or a scalar, splatted). The launch
 * passes the pair as one pattern argument, DLOP_ROWS_PATTERN(kind of a, kind of b), or
 * DLOP_ROWS_SHORT for rows of under half a block of vectors, which take the 1-d rows body so
 * that a (10^6, 4) + (4,) loop does not leave most threads of each block idle. */
enum { DLOP_ROWS_FULL = 0, DLOP_ROWS_ROW = 1, DLOP_ROWS_COLUMN = 2 };
#define DLOP_ROWS_PATTERN(kind_a, kind_b) ((kind_a) * 3 + (kind_b))
#define DLOP_ROWS_SHORT 9
/* 16-byte vectors per thread of the 2-d rows kernels: two for 1- and 2-byte types (float16:
 * 98-99% of a device copy on an H200 with two, 96% with one), one otherwise (float32: 99-100%
 * with one, 97% with two). */
#define DLOP_ROWS_VECTORS_PER_THREAD(element_size) ((element_size) < 4 ? 2 : 1)

/* The kind of operand k (an input) of a rows layout, as above. */
static inline int32_t dlop_rows_layout_kind(const dlop_rows_layout *r, int32_t k) {
  if (!r->inner[k]) return DLOP_ROWS_COLUMN;
  return r->reused[k] ? DLOP_ROWS_ROW : DLOP_ROWS_FULL;
}

#ifdef __cplusplus
}
#endif

#endif
