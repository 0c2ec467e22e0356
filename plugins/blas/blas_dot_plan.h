/* blas_dot_plan.h — the grid of the CUDA dot of two vectors (blas_dot_cuda.cu), shared by the
 * host code that launches it (blas_cuda_dot.c) and the kernels: plain C, also compiled by nvcc.
 * The first pass gives each of `blocks` blocks a fixed share of the elements and writes one
 * partial sum per block; the second pass, one block, combines the partials in a fixed tree. The
 * grid depends only on the length and the device's SM count, so a rerun gives the same bits. */
#ifndef DLOP_BLAS_DOT_PLAN_H
#define DLOP_BLAS_DOT_PLAN_H

#include <stdint.h>

/* Threads per block of both passes (the block tree assumes a multiple of 32, at most 1024). */
#define BLAS_DOT_BLOCK 256
/* Blocks per SM of the first pass: 8 of 256 threads fill an SM's 2048. */
#define BLAS_DOT_BLOCKS_PER_SM 8
/* A first-pass thread sums at least this many 16-byte vectors of each input (so that short dots
 * take few blocks and the tree stays cheap against the loads). */
#define BLAS_DOT_MIN_VECTORS_PER_THREAD 4
/* Partials, one accumulator (float or double) each, in the thunk's workspace. */
#define BLAS_DOT_MAX_PARTIALS 2048
#define BLAS_DOT_WORKSPACE_BYTES (BLAS_DOT_MAX_PARTIALS * 8)

/* Blocks of the first pass for n elements of element_size bytes on sm_count SMs. */
static inline uint32_t blas_dot_blocks(int64_t n, int64_t element_size, uint32_t sm_count) {
  const int64_t vectors = n / (16 / element_size) + 1;
  const int64_t per_block = (int64_t)BLAS_DOT_BLOCK * BLAS_DOT_MIN_VECTORS_PER_THREAD;
  int64_t blocks = vectors / per_block + (vectors % per_block != 0);
  int64_t most = (int64_t)(sm_count > 0 ? sm_count : 1) * BLAS_DOT_BLOCKS_PER_SM;
  if (most > BLAS_DOT_MAX_PARTIALS) most = BLAS_DOT_MAX_PARTIALS;
  if (blocks > most) blocks = most;
  return blocks < 1 ? 1u : (uint32_t)blocks;
}

#endif
