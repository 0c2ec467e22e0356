/* reduce_cuda_plan.h — which CUDA kernel reduces a layout and with what grid, shared by the
 * thunk (host C) and reduce_cuda.cu (the constants). The choice depends only on the layout,
 * never on timing, and each output's summation order depends only on the plan, so results
 * are bit-identical run to run. */
#ifndef DLOP_REDUCE_CUDA_PLAN_H
#define DLOP_REDUCE_CUDA_PLAN_H

#include <stdint.h>

#include "reduce_layout.h"

/* Threads per block of every reduce kernel (the block tree below assumes 256 = 8 warps). */
#define REDUCE_CUDA_BLOCK 256
/* Partials of a two-pass reduction: at most this many blocks write one accumulator each
 * (8 bytes covers float, double and int64) into the thunk's fixed workspace. */
#define REDUCE_CUDA_MAX_PARTIALS 1024
#define REDUCE_CUDA_WORKSPACE_BYTES (REDUCE_CUDA_MAX_PARTIALS * 8)
/* Reductions up to this long go to the rows kernel (a warp per output). */
#define REDUCE_CUDA_ROWS_MAX_COUNT 2048
/* Elements per block of the first pass at least (so a block's loads amortize its tree). */
#define REDUCE_CUDA_MIN_PART 16384
/* Outputs from which a strided reduction with a contiguous kept dim goes to the columns
 * kernel (a thread per output, coalesced along the kept dim). */
#define REDUCE_CUDA_COLUMNS_MIN_OUTPUTS 4096

enum {
  REDUCE_CUDA_ROWS_KERNEL = 0,
  REDUCE_CUDA_BLOCK_KERNEL = 1,
  REDUCE_CUDA_COLUMNS_KERNEL = 2,
  REDUCE_CUDA_FINISH_KERNEL = 3,
  REDUCE_CUDA_KERNEL_KINDS = 4
};

typedef struct reduce_cuda_plan {
  int kind;
  int64_t parts;          /* block kernel: blocks per output (partials when > 1) */
  uint32_t blocks;        /* grid of the first kernel (grid-stride loops cover the rest) */
  uint32_t finish_blocks; /* grid of the finish kernel when parts > 1 */
} reduce_cuda_plan;

static inline uint32_t reduce_cuda_blocks(int64_t items, uint32_t max_blocks) {
  if (items < 1) return 1;
  return items > (int64_t)max_blocks ? max_blocks : (uint32_t)items;
}

static inline void reduce_cuda_plan_make(reduce_cuda_plan *plan, const reduce_layout *l,
                                         uint32_t max_blocks) {
  /* counts up to 2^63-1 (a zero-stride view): rounded up by division, never by adding */
  const int64_t m = l->outputs, r = l->count;
  const int warps = REDUCE_CUDA_BLOCK / 32;
  plan->parts = 1;
  plan->finish_blocks = 1;
  if (l->kept_in_strides[l->kept_ndim - 1] == 1 && l->reduced_strides[l->reduced_ndim - 1] != 1 &&
      m >= REDUCE_CUDA_COLUMNS_MIN_OUTPUTS) {
    plan->kind = REDUCE_CUDA_COLUMNS_KERNEL;
    plan->blocks = reduce_cuda_blocks(m / REDUCE_CUDA_BLOCK + (m % REDUCE_CUDA_BLOCK != 0), max_blocks);
  } else if (r <= REDUCE_CUDA_ROWS_MAX_COUNT) {
    plan->kind = REDUCE_CUDA_ROWS_KERNEL;
    plan->blocks = reduce_cuda_blocks(m / warps + (m % warps != 0), max_blocks);
  } else {
    plan->kind = REDUCE_CUDA_BLOCK_KERNEL;
    if (m < REDUCE_CUDA_MAX_PARTIALS / 2) {
      int64_t parts = r / REDUCE_CUDA_MIN_PART + (r % REDUCE_CUDA_MIN_PART != 0);
      int64_t most = REDUCE_CUDA_MAX_PARTIALS / m;
      plan->parts = parts < most ? parts : most;
      if (plan->parts < 1) plan->parts = 1;
    }
    plan->blocks = reduce_cuda_blocks(m * plan->parts, max_blocks);
    plan->finish_blocks = reduce_cuda_blocks(m, max_blocks);
  }
}

#endif
