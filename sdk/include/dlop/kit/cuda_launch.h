/* dlop/kit/cuda_launch.h — host-side launch of elementwise CUDA kernels through the host's table:
 * grid sizes, the strided kernels' block cap, and the choice of contiguous, rows (1-d or 2-d)
 * or strided kernel for a loop. Part of kernel_util.h; plain C, no CUDA headers needed. */
#ifndef DLOP_CUDA_LAUNCH_H
#define DLOP_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "../host_api.h"
#include "kernel_error.h"
#include "rows_layout.h"
#include "../status.h"
#include "strided_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of the elementwise kernels, and the cap on blocks per SM of the general
 * strided kernels (grid-stride loops do the rest). The contiguous and rows kernels take one
 * step per thread on a grid that covers the whole tensor: blocks start in order, so the blocks
 * resident at any time touch one compact window of memory (bench/RESULTS.md has the figures
 * behind this choice). DLOP_CUDA_MAX_GRID only bounds those grids (2^30 blocks of 256
 * threads: far beyond any tensor one GPU holds). */
#define DLOP_CUDA_ELEMENTWISE_BLOCK 256
/* Threads per block of a contiguous kernel in the chunk form (dlop_cuda_unary_chunks: a chunk
 * per block, no grid-stride loop), which the spec's cuda_chunk_dtypes selects. */
#define DLOP_CUDA_CHUNK_BLOCK 128
#define DLOP_CUDA_BLOCKS_PER_SM 128
#define DLOP_CUDA_MAX_GRID (1u << 30)

/* Blocks for work_items threads' worth of work, at most max_blocks (grid-stride loops do the
 * rest), at least 1. */
static inline uint32_t dlop_cuda_grid_size(int64_t work_items, uint32_t block, uint32_t max_blocks) {
  /* rounded up without work_items + block - 1, which could leave int64 */
  int64_t blocks = work_items / block + (work_items % block != 0);
  if (blocks > (int64_t)max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return (uint32_t)blocks;
}

/* The block cap of the general strided kernels on a device: SM count (attribute 16) times
 * DLOP_CUDA_BLOCKS_PER_SM. */
static inline int dlop_cuda_max_blocks(const dlop_host_api *host, int32_t device_id,
                                       uint32_t *max_blocks, const char *op_name, char *error,
                                       size_t error_size) {
  int32_t sm_count = 0;
  int status;
  if (!DLOP_HOST_HAS(host, cuda_device_attribute)) {
    dlop_set_error(error, error_size, "%s: the host offers no cuda_device_attribute", op_name);
    return DLOP_UNSUPPORTED;
  }
  status = host->cuda_device_attribute(device_id, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */,
                                       &sm_count);
  if (status != DLOP_OK || sm_count <= 0) {
    dlop_set_error(error, error_size,
                   "%s: could not read the multiprocessor count of CUDA device %d (status %d)",
                   op_name, (int)device_id, status);
    return status != DLOP_OK ? status : DLOP_CUDA_ERROR;
  }
  *max_blocks = (uint32_t)sm_count * DLOP_CUDA_BLOCKS_PER_SM;
  return DLOP_OK;
}

/* An elementwise op's kernels for one dtype (CUfunctions). Kernels take the inputs first, then
 * the output (operand 0 of the loop):
 *   contiguous(const T *in0, ..., T *out, int64_t n)                      every stride is 1
 *   rows(const T *in0, ..., T *out, dlop_rows_layout rows)                 dlop_rows_layout_init
 *   strided(const T *in0, ..., T *out, int64_t n, dlop_nd_offsets offsets) anything else
 * (T may differ per operand), and when params is set, then that block as their last argument.
 * contiguous may be NULL (contiguous loops then go to strided, whose 1-d case needs no
 * division), rows too (such loops then go to strided). contiguous_elements is the elements one
 * thread of the contiguous kernel handles (its 16-byte vectors times how many it loads at
 * once); max_blocks caps the strided kernel's grid (dlop_cuda_max_blocks). rows_2d says rows is
 * a 2-d rows kernel (dlop_cuda_binary_rows_2d: binary ops), which takes an int32_t pattern
 * after the layout and runs on the 2-d grid dlop_cuda_rows_2d_launch sizes. chunk_block,
 * when above 0, says contiguous is in the chunk form (dlop_cuda_unary_chunks): launched in
 * blocks of chunk_block threads, one block per chunk of chunk_block * contiguous_elements
 * elements, a grid that is never capped (the launch fails rather than cover part of a loop). */
typedef struct dlop_cuda_elementwise {
  void *contiguous, *rows, *strided;
  int32_t contiguous_elements;
  uint32_t max_blocks;
  int32_t rows_2d;
  const void *params; /* the op's parameter block (its kernels' last argument), or NULL */
  int32_t chunk_block;
} dlop_cuda_elementwise;

/* The pattern and grid of a 2-d rows kernel: y walks the rows (at most 65535 blocks, the
 * kernel strides over the rest), x covers a row's vectors, DLOP_ROWS_VECTORS_PER_THREAD per
 * thread; short rows go to the 1-d body, one vector per thread (rows_layout.h). */
static inline int32_t dlop_cuda_rows_2d_launch(const dlop_rows_layout *rows, int64_t element_size,
                                               uint32_t block, uint32_t grid[3]) {
  int64_t per_thread = DLOP_ROWS_VECTORS_PER_THREAD(element_size);
  int64_t row_count = rows->vectors / rows->per_row;
  if (rows->per_row * 2 < (int64_t)block * per_thread) {
    grid[0] = dlop_cuda_grid_size(rows->vectors, block, DLOP_CUDA_MAX_GRID);
    return DLOP_ROWS_SHORT;
  }
  grid[0] = dlop_cuda_grid_size((rows->per_row + per_thread - 1) / per_thread, block,
                                DLOP_CUDA_MAX_GRID);
  grid[1] = (uint32_t)(row_count < 65535 ? row_count : 65535);
  return DLOP_ROWS_PATTERN(dlop_rows_layout_kind(rows, 1), dlop_rows_layout_kind(rows, 2));
}

/* Launch the kernel that fits a loop set up by dlop_strided_loop_init on stream. Nothing is
 * launched when the loop is empty. */
static inline int dlop_cuda_launch_elementwise(const dlop_host_api *host,
                                               const dlop_strided_loop *loop,
                                               const dlop_cuda_elementwise *kernels,
                                               void *stream, const char *op_name, char *error,
                                               size_t error_size) {
  void *args[DLOP_KERNEL_MAX_OPERANDS + 3];
  void *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_nd_offsets offsets = loop->layout;
  dlop_rows_layout rows;
  int64_t n = loop->numel, work;
  int32_t k, operands = loop->layout.num_operands, count = 0, pattern = 0;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {DLOP_CUDA_ELEMENTWISE_BLOCK, 1, 1};
  void *function;
  int status;
  if (n <= 0) return DLOP_OK;
  if (!DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(error, error_size, "%s: the host offers no cuda_launch", op_name);
    return DLOP_UNSUPPORTED;
  }
  if (stream == NULL) {
    dlop_set_error(error, error_size, "%s: no CUDA stream given (thunks never use the default stream)",
                   op_name);
    return DLOP_INVALID_ARGUMENT;
  }
  for (k = 1; k < operands; k++) pointers[k - 1] = loop->base[k];
  pointers[operands - 1] = loop->base[0];
  for (k = 0; k < operands; k++) args[count++] = &pointers[k];
  if (kernels->contiguous != NULL && dlop_strided_loop_is_contiguous(loop)) {
    int32_t per_thread = kernels->contiguous_elements > 1 ? kernels->contiguous_elements : 1;
    function = kernels->contiguous;
    args[count++] = &n;
    work = n / per_thread + (n % per_thread != 0); /* n + per_thread - 1 could leave int64 */
    if (kernels->chunk_block > 0) {
      /* one block per chunk: a kernel without a grid-stride loop needs every block */
      block[0] = (uint32_t)kernels->chunk_block;
      if (work / block[0] + (work % block[0] != 0) > (int64_t)DLOP_CUDA_MAX_GRID) {
        dlop_set_error(error, error_size,
                       "%s: %lld elements need more than %u blocks of %u threads in one launch",
                       op_name, (long long)n, DLOP_CUDA_MAX_GRID, block[0]);
        return DLOP_INVALID_ARGUMENT;
      }
    }
    grid[0] = dlop_cuda_grid_size(work, block[0], DLOP_CUDA_MAX_GRID);
  } else if (kernels->rows != NULL && (!kernels->rows_2d || operands == 3) &&
             dlop_rows_layout_init(&rows, loop)) {
    function = kernels->rows;
    args[count++] = &rows;
    if (kernels->rows_2d) {
      pattern = dlop_cuda_rows_2d_launch(&rows, loop->element_size[0], block[0], grid);
      args[count++] = &pattern;
    } else {
      grid[0] = dlop_cuda_grid_size(rows.vectors, block[0], DLOP_CUDA_MAX_GRID);
    }
  } else {
    function = kernels->strided;
    args[count++] = &n;
    args[count++] = &offsets;
    grid[0] = dlop_cuda_grid_size(n, block[0], kernels->max_blocks);
  }
  if (kernels->params != NULL) args[count++] = (void *)kernels->params;
  status = host->cuda_launch(function, grid, block, 0, stream, args, error, error_size);
  if (status != DLOP_OK && error != NULL && error_size > 0 && error[0] == '\0')
    dlop_set_error(error, error_size, "%s: kernel launch failed with status %d", op_name, status);
  return status;
}

#ifdef __cplusplus
}
#endif

#endif
