/* reduce_cuda_plan.h — which CUDA kernel reduces a layout and with what grid, shared by the
 * thunk (host C), reduce_cuda.cu (the constants and the columns kernel's work split) and the
 * unit test that checks the split covers every element once. The choice depends only on the
 * layout and the device's SM count, never on timing, and each output's summation order
 * depends only on the plan, so results are bit-identical run to run.
 *
 * The kernels, by layout (reduce_layout.h):
 *   rows     a warp per output: reductions along a contiguous (or the finest) dim of at most
 *            REDUCE_CUDA_ROWS_MAX_COUNT elements (the last axis);
 *   block    a block per (output, part), two passes with finish when few outputs share long
 *            reductions (every axis, a long last axis);
 *   columns  a strip of consecutive outputs per block, looping over the rows with coalesced
 *            loads, the rows split over the block's thread groups and, when the strips alone
 *            do not fill the GPU, over parts whose partials columns_finish combines (a first
 *            or middle axis: the kept dims step through memory more finely than the reduced
 *            ones); where the layout allows and the thunk asks for it, each thread takes a pack
 *            of 2, 4 or 8 adjacent outputs, one vector load of up to 16 bytes per row. */
#ifndef DLOP_REDUCE_CUDA_PLAN_H
#define DLOP_REDUCE_CUDA_PLAN_H

#include <stdint.h>

#include "reduce_layout.h"

#ifdef __CUDACC__
#define REDUCE_CUDA_PLAN_FN static __host__ __device__ __forceinline__
#else
#define REDUCE_CUDA_PLAN_FN static inline
#endif

/* Threads per block of every reduce kernel (the block tree assumes 256 = 8 warps). */
#define REDUCE_CUDA_BLOCK 256
/* Partials of a two-pass reduction, one accumulator each (8 bytes covers float, double and
 * int64), in the thunk's fixed workspace: the block kernel uses at most
 * REDUCE_CUDA_MAX_PARTIALS of them, the columns kernel at most REDUCE_CUDA_MAX_COLUMN_PARTIALS
 * (outputs times parts; 8192 columns in 4 parts fill it). */
#define REDUCE_CUDA_MAX_PARTIALS 1024
#define REDUCE_CUDA_MAX_COLUMN_PARTIALS 32768
#define REDUCE_CUDA_WORKSPACE_BYTES (REDUCE_CUDA_MAX_COLUMN_PARTIALS * 8)
/* Reductions up to this long go to the rows kernel (a warp per output). */
#define REDUCE_CUDA_ROWS_MAX_COUNT 2048
/* Elements per block of the first pass at least (so a block's loads amortize its tree). */
#define REDUCE_CUDA_MIN_PART 16384
/* Columns kernel: the threads it aims for per SM (a full SM: 8 blocks of 256), the rows one
 * thread sums at least before the rows are split further (so the split's tree and partials
 * stay cheap against the loads), and the thread groups a strip splits its rows over when there
 * are outputs enough for 32-wide strips. */
#define REDUCE_CUDA_COLUMNS_THREADS_PER_SM 2048
#define REDUCE_CUDA_COLUMNS_MIN_ROWS 16
#define REDUCE_CUDA_COLUMNS_MAX_GROUPS 8
/* Bytes of a row that a strip's packs of one thread group span at least: one 128-byte line, so
 * that narrower strips of wide packs (and more groups) still read whole lines. */
#define REDUCE_CUDA_COLUMNS_LINE_BYTES 128
/* The widest pack load, in bytes. */
#define REDUCE_CUDA_COLUMNS_PACK_BYTES 16

enum {
  REDUCE_CUDA_ROWS_KERNEL = 0,
  REDUCE_CUDA_BLOCK_KERNEL = 1,
  REDUCE_CUDA_COLUMNS_KERNEL = 2,
  REDUCE_CUDA_FINISH_KERNEL = 3,
  REDUCE_CUDA_COLUMNS_FINISH_KERNEL = 4,
  REDUCE_CUDA_KERNEL_KINDS = 5
};

typedef struct reduce_cuda_plan {
  int kind;
  int64_t parts;          /* block and columns kernels: parts per output (partials when > 1) */
  int32_t pack;           /* columns kernel: adjacent outputs per thread, 1, 2, 4 or 8 */
  int32_t tile_columns;   /* columns kernel: packs per block, a power of two dividing 256;
                           * the block's 256 / tile_columns thread groups split the rows */
  uint32_t blocks;        /* grid of the first kernel (grid-stride loops cover the rest) */
  uint32_t finish_blocks; /* grid of the finish kernel when parts > 1 */
} reduce_cuda_plan;

REDUCE_CUDA_PLAN_FN int64_t reduce_cuda_magnitude(int64_t v) { return v < 0 ? -v : v; }

REDUCE_CUDA_PLAN_FN uint32_t reduce_cuda_blocks(int64_t items, uint32_t max_blocks) {
  if (items < 1) return 1;
  return items > (int64_t)max_blocks ? max_blocks : (uint32_t)items;
}

/* The columns kernel fits when consecutive outputs lie closer in memory than consecutive
 * elements of one reduction (the last kept dim's stride below the finest reduced one: a first
 * or middle axis, a transposed last axis), and for reductions of at most one element (a copy:
 * a thread per output). Not for one output: the block kernel splits that over the GPU. */
REDUCE_CUDA_PLAN_FN int reduce_cuda_use_columns(const reduce_layout *l) {
  if (l->outputs <= 1) return 0;
  if (l->count <= 1) return 1;
  return reduce_cuda_magnitude(l->kept_in_strides[l->kept_ndim - 1]) <
         reduce_cuda_magnitude(l->reduced_strides[l->reduced_ndim - 1]);
}

/* Whether the columns kernel can give a thread the `pack` adjacent outputs pack*q ..
 * pack*q + pack - 1: they are neighbours in the input in every row (the innermost kept dim has
 * stride 1 and a size that pack divides, so a pack never straddles it), and every other kept
 * stride and every reduced stride is a multiple of pack, so each pack of every row starts at a
 * multiple of pack elements (one load of pack * element bytes: aligned wherever the tensor's
 * first element is; the kernel checks that, and loads the elements one by one, in the same
 * order, otherwise). Depends on the layout only. */
REDUCE_CUDA_PLAN_FN int reduce_cuda_columns_packs(const reduce_layout *l, int32_t pack) {
  const int32_t last = l->kept_ndim - 1;
  if (pack < 2) return 1;
  if (l->outputs < pack || l->kept_in_strides[last] != 1 || l->kept_shape[last] % pack != 0) return 0;
  for (int32_t d = 0; d < last; d++)
    if (l->kept_in_strides[d] % pack != 0) return 0;
  for (int32_t d = 0; d < l->reduced_ndim; d++)
    if (l->reduced_strides[d] % pack != 0) return 0;
  return 1;
}

/* The widest pack of at most pack_limit outputs (a power of two) of element_bytes each, within
 * REDUCE_CUDA_COLUMNS_PACK_BYTES, that the layout has. */
REDUCE_CUDA_PLAN_FN int32_t reduce_cuda_columns_pack(const reduce_layout *l, int32_t element_bytes,
                                                     int32_t pack_limit) {
  int32_t pack = 1;
  while (pack * 2 <= pack_limit && pack * 2 * element_bytes <= REDUCE_CUDA_COLUMNS_PACK_BYTES &&
         reduce_cuda_columns_packs(l, pack * 2))
    pack *= 2;
  return pack;
}

/* Columns kernel: strips of tile_columns consecutive packs of `pack` outputs, each block thread
 * group taking every groups-th row of its part. The rows are split S ways (groups times parts) so
 * that the GPU holds REDUCE_CUDA_COLUMNS_THREADS_PER_SM threads per SM, no further than
 * REDUCE_CUDA_COLUMNS_MIN_ROWS rows per thread; up to max_groups inside a block (they meet in
 * shared memory), the rest as parts, within the partials the workspace holds. Fewer outputs
 * than a strip: narrower strips and more groups, so no thread idles while rows remain. The
 * sizes below count packs. */
REDUCE_CUDA_PLAN_FN void reduce_cuda_plan_columns_as(reduce_cuda_plan *plan, const reduce_layout *l,
                                                     uint32_t max_blocks, uint32_t sm_count,
                                                     int32_t pack, int64_t max_groups) {
  const int64_t m = l->outputs / pack, r = l->count;
  const int64_t threads = (int64_t)(sm_count > 0 ? sm_count : 1) * REDUCE_CUDA_COLUMNS_THREADS_PER_SM;
  int64_t splits = threads / m + (threads % m != 0), most = r / REDUCE_CUDA_COLUMNS_MIN_ROWS;
  int64_t groups = 1, columns, parts, tiles;
  if (splits > most) splits = most;
  if (splits < 1) splits = 1;
  while (groups < splits && groups < max_groups) groups *= 2;
  columns = REDUCE_CUDA_BLOCK / groups;
  while (columns > 1 && columns / 2 >= m && groups * 2 <= r) {
    columns /= 2;
    groups *= 2;
  }
  parts = splits / groups + (splits % groups != 0);
  if (parts > REDUCE_CUDA_MAX_COLUMN_PARTIALS / l->outputs)
    parts = REDUCE_CUDA_MAX_COLUMN_PARTIALS / l->outputs;
  if (parts < 1) parts = 1;
  tiles = m / columns + (m % columns != 0);
  plan->kind = REDUCE_CUDA_COLUMNS_KERNEL;
  plan->parts = parts;
  plan->pack = pack;
  plan->tile_columns = (int32_t)columns;
  plan->blocks = reduce_cuda_blocks(tiles * parts, max_blocks);
  plan->finish_blocks = reduce_cuda_blocks(l->outputs / REDUCE_CUDA_BLOCK + (l->outputs % REDUCE_CUDA_BLOCK != 0),
                                           max_blocks);
}

/* The columns plan: pairs of outputs per thread where the layout has them (one output
 * otherwise) in up to 8 thread groups; and when that needs a second pass (parts), the widest
 * pack within the thunk's pack_limit and 16 bytes (which may still be pairs: float64, or a
 * layout without wider packs), in as many groups as keep a group's packs across a 128-byte line
 * of a row (16 for 8-byte packs, 32 for 16-byte ones), if that needs none. Measured on
 * an H200: 16-byte packs made a middle axis at 2^20 one pass (7.3 -> 4.6-5.7 us, every float
 * dtype), but 16-bit ones in 16 groups cost 10-14 % where pairs already ran in one pass (2^26
 * elements), and 32 groups cost 3-9 % where parts remain (8192 x 8192). */
REDUCE_CUDA_PLAN_FN void reduce_cuda_plan_columns(reduce_cuda_plan *plan, const reduce_layout *l,
                                                  uint32_t max_blocks, uint32_t sm_count,
                                                  int32_t element_bytes, int32_t pack_limit) {
  const int32_t pairs = reduce_cuda_columns_pack(l, element_bytes, pack_limit < 2 ? pack_limit : 2);
  reduce_cuda_plan_columns_as(plan, l, max_blocks, sm_count, pairs, REDUCE_CUDA_COLUMNS_MAX_GROUPS);
  if (plan->parts > 1) {
    const int32_t wide = reduce_cuda_columns_pack(l, element_bytes, pack_limit);
    const int64_t line_packs = REDUCE_CUDA_COLUMNS_LINE_BYTES / ((int64_t)wide * element_bytes);
    int64_t max_groups = REDUCE_CUDA_BLOCK / (line_packs > 1 ? line_packs : 1);
    reduce_cuda_plan one_pass;
    if (max_groups < REDUCE_CUDA_COLUMNS_MAX_GROUPS) max_groups = REDUCE_CUDA_COLUMNS_MAX_GROUPS;
    reduce_cuda_plan_columns_as(&one_pass, l, max_blocks, sm_count, wide, max_groups);
    if (one_pass.parts == 1) *plan = one_pass;
  }
}

/* max_blocks caps every grid (the kernels stride over the rest); sm_count is the device's;
 * element_bytes the input's element size; pack_limit the columns kernel's outputs per thread
 * the thunk allows (1, 2, 4 or 8). */
REDUCE_CUDA_PLAN_FN void reduce_cuda_plan_make(reduce_cuda_plan *plan, const reduce_layout *l,
                                               uint32_t max_blocks, uint32_t sm_count,
                                               int32_t element_bytes, int32_t pack_limit) {
  /* counts up to 2^63-1 (a zero-stride view): rounded up by division, never by adding */
  const int64_t m = l->outputs, r = l->count;
  const int warps = REDUCE_CUDA_BLOCK / 32;
  plan->parts = 1;
  plan->pack = 1;
  plan->tile_columns = 0;
  plan->finish_blocks = 1;
  if (reduce_cuda_use_columns(l)) {
    reduce_cuda_plan_columns(plan, l, max_blocks, sm_count, element_bytes, pack_limit);
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

/* The columns kernel's work of one thread: block item `item` (0 <= item < tiles * parts, tiles
 * = outputs / pack / tile_columns rounded up) and thread `thread` of REDUCE_CUDA_BLOCK. The
 * thread sums outputs output .. output + pack - 1 (none when output >= outputs: a strip's spare
 * columns) over rows first, first + step, ... below end, and its group `group` meets the
 * strip's other groups in a tree; part `part` of parts covers a fixed slice of the rows. */
typedef struct reduce_cuda_column_work {
  int64_t output, part, first, end, step;
  int32_t column, group;
} reduce_cuda_column_work;

REDUCE_CUDA_PLAN_FN void reduce_cuda_column_work_of(const reduce_layout *l, int64_t parts,
                                                    int32_t tile_columns, int32_t pack,
                                                    int64_t item, int32_t thread,
                                                    reduce_cuda_column_work *w) {
  /* one part (most plans): no 64-bit divisions, which a thread of the kernel does per strip */
  int64_t begin = 0, end = l->count;
  w->part = 0;
  if (parts > 1) {
    const int64_t packs = l->outputs / pack;
    const int64_t tiles = packs / tile_columns + (packs % tile_columns != 0);
    const int64_t slice = l->count / parts + (l->count % parts != 0);
    w->part = item / tiles;
    item -= w->part * tiles;
    begin = w->part * slice < l->count ? w->part * slice : l->count;
    end = begin + slice < l->count ? begin + slice : l->count;
  }
  w->column = thread % tile_columns;
  w->group = thread / tile_columns;
  w->output = (item * tile_columns + w->column) * pack;
  w->first = begin + w->group;
  w->end = end;
  w->step = REDUCE_CUDA_BLOCK / tile_columns;
}

#endif
