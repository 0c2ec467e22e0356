/* fusion_reduce_thunk.c — the thunk of a reduction group: the loop of its run
 * (fusion_reduce_layout.c) over the inputs it reads, and the generated kernels
 * (fusion_reduce_source.c). Every output's order of combination depends only on shapes and
 * strides, never on the thread count or timing, so runs give the same bits.
 *   CPU:  the reduced elements of an output in chunks of 2^15, each a sequence of runs along the
 *         inner reduced dim (each run a pairwise tree in the generated code), runs and chunks
 *         joined by a binary cascade; parallel_for over outputs, or over (output, chunk) items
 *         with a second pass joining the chunks when outputs are fewer than the work.
 *   CUDA: a warp per output for reductions of up to 2048 elements; otherwise a block per
 *         (output, part), with parts (their partials in the thunk's workspace) when outputs
 *         are too few to fill the GPU, joined by the finish kernel. */
#include <stdlib.h>
#include <string.h>

#include <dlop/kit/checked_size.h>

#include "fusion.h"
#include "jit.h"

#define REDUCE_CPU_CHUNK ((int64_t)1 << 15)
/* Elements per parallel_for item at least, when splitting over outputs. */
#define REDUCE_CPU_GRAIN 16384
#define REDUCE_CUDA_BLOCK 256
#define REDUCE_CUDA_WARP_MAX_COUNT 2048
#define REDUCE_CUDA_MIN_PART 16384
#define REDUCE_CUDA_MAX_PARTIALS 1024

/* The generated module's entry points, in group->functions. */
enum { C_RUN = 0, C_COMBINE = 1, C_IDENTITY = 2, C_FINISH = 3 };
enum { CUDA_BLOCK = 0, CUDA_WARP = 1, CUDA_FINISH = 2 };

typedef void (*run_fn)(char *const *pointers, const int64_t *strides, int64_t n, void *result);
typedef void (*combine_fn)(void *accumulator, const void *later);
typedef void (*identity_fn)(void *accumulator);
typedef void (*finish_fn)(const void *accumulator, int64_t count, void *out);

/* ---- CPU ------------------------------------------------------------------------------------ */

typedef struct cpu_reduce {
  const dlop__fusion_reduce_layout *layout;
  run_fn run;
  combine_fn combine;
  identity_fn identity;
  finish_fn finish;
  int64_t chunks;     /* per output */
  uint64_t *partials; /* outputs * chunks accumulators when chunks > 1 */
} cpu_reduce;

/* Partials joined like a binary counter: the tree depends only on how many there are. Levels
 * hold earlier elements than the value pushed onto them. Accumulators fit in 8 bytes. */
typedef struct cascade {
  uint64_t levels[64];
  uint64_t occupied;
} cascade;

static void cascade_push(const cpu_reduce *c, cascade *s, uint64_t value) {
  int level = 0;
  while (s->occupied & (1ull << level)) {
    uint64_t earlier = s->levels[level];
    c->combine(&earlier, &value);
    value = earlier;
    s->occupied &= ~(1ull << level);
    level++;
  }
  s->levels[level] = value;
  s->occupied |= 1ull << level;
}

static uint64_t cascade_finish(const cpu_reduce *c, const cascade *s) {
  uint64_t result = 0;
  int have = 0;
  for (int level = 0; level < 64; level++) {
    if (!(s->occupied & (1ull << level))) continue;
    if (have) {
      uint64_t earlier = s->levels[level];
      c->combine(&earlier, &result);
      result = earlier;
    } else {
      result = s->levels[level];
      have = 1;
    }
  }
  if (!have) c->identity(&result);
  return result;
}

/* Output m's element (kept index m over the kept dims) and each input's first element for it. */
static char *kept_pointers(const dlop__fusion_reduce_layout *l, int64_t m, char **inputs) {
  char *out = l->output_base;
  for (int32_t k = 0; k < l->num_inputs; k++) inputs[k] = l->base[k];
  for (int32_t d = l->kept_ndim - 1; d >= 0; d--) {
    int64_t at = m % l->shape[d];
    m /= l->shape[d];
    out += at * l->output_strides[d] * l->output_element_size;
    for (int32_t k = 0; k < l->num_inputs; k++)
      inputs[k] += at * l->strides[k][d] * l->element_size[k];
  }
  return out;
}

/* Output m's reduction over its elements [begin, end) (C order over the reduced dims), in runs
 * along the inner reduced dim; moving to the next run is a pointer add per input, with a carry
 * into outer reduced dims at their ends. */
static uint64_t reduce_range(const cpu_reduce *c, int64_t m, int64_t begin, int64_t end) {
  const dlop__fusion_reduce_layout *l = c->layout;
  const int32_t first = l->kept_ndim, inner = l->kept_ndim + l->reduced_ndim - 1;
  const int32_t count = l->num_inputs;
  const int64_t cols = l->shape[inner];
  char *row_start[DLOP__FUSION_MAX_OPERANDS], *pointers[DLOP__FUSION_MAX_OPERANDS];
  int64_t strides[DLOP__FUSION_MAX_OPERANDS], index[DLOP__FUSION_REDUCE_DIMS];
  int32_t k, d;
  cascade s;
  s.occupied = 0;
  if (begin >= end) return cascade_finish(c, &s); /* an empty reduction: cols may be 0 */
  int64_t row = begin / cols, col = begin - row * cols;
  kept_pointers(l, m, row_start);
  for (k = 0; k < count; k++) strides[k] = l->strides[k][inner];
  for (d = inner - 1; d >= first; d--) {
    index[d] = row % l->shape[d];
    row /= l->shape[d];
    for (k = 0; k < count; k++) row_start[k] += index[d] * l->strides[k][d] * l->element_size[k];
  }
  for (k = 0; k < count; k++) pointers[k] = row_start[k] + col * strides[k] * l->element_size[k];
  for (;;) {
    uint64_t value = 0;
    int64_t n = cols - col < end - begin ? cols - col : end - begin;
    c->run(pointers, strides, n, &value);
    cascade_push(c, &s, value);
    begin += n;
    if (begin >= end) return cascade_finish(c, &s);
    col = 0;
    d = inner - 1;
    for (k = 0; k < count; k++) row_start[k] += l->strides[k][d] * l->element_size[k];
    while (++index[d] == l->shape[d] && d > first) {
      index[d] = 0;
      for (k = 0; k < count; k++)
        row_start[k] +=
            (l->strides[k][d - 1] - l->shape[d] * l->strides[k][d]) * l->element_size[k];
      d--;
    }
    for (k = 0; k < count; k++) pointers[k] = row_start[k];
  }
}

/* One item per output: the whole reduction, finished into the output. */
static void outputs_body(void *context, int64_t begin, int64_t end) {
  const cpu_reduce *c = (const cpu_reduce *)context;
  char *inputs[DLOP__FUSION_MAX_OPERANDS];
  for (int64_t m = begin; m < end; m++) {
    uint64_t value = reduce_range(c, m, 0, c->layout->count);
    c->finish(&value, c->layout->count, kept_pointers(c->layout, m, inputs));
  }
}

/* One item per (output, chunk): a partial. */
static void chunks_body(void *context, int64_t begin, int64_t end) {
  const cpu_reduce *c = (const cpu_reduce *)context;
  const int64_t count = c->layout->count;
  for (int64_t item = begin; item < end; item++) {
    int64_t m = item / c->chunks, first = (item - m * c->chunks) * REDUCE_CPU_CHUNK;
    int64_t last = count - first > REDUCE_CPU_CHUNK ? first + REDUCE_CPU_CHUNK : count;
    c->partials[item] = reduce_range(c, m, first, last);
  }
}

/* One item per output: its chunks' partials joined in order, finished into the output. */
static void join_body(void *context, int64_t begin, int64_t end) {
  const cpu_reduce *c = (const cpu_reduce *)context;
  char *inputs[DLOP__FUSION_MAX_OPERANDS];
  for (int64_t m = begin; m < end; m++) {
    cascade s;
    s.occupied = 0;
    for (int64_t j = 0; j < c->chunks; j++) cascade_push(c, &s, c->partials[m * c->chunks + j]);
    uint64_t value = cascade_finish(c, &s);
    c->finish(&value, c->layout->count, kept_pointers(c->layout, m, inputs));
  }
}

static int cpu_reduce_run(const dlop__fusion_group *group, const dlop__fusion_reduce_layout *l,
                          const dlop_run_args *args) {
  const dlop_host_api *host = dlop__host_api();
  cpu_reduce c = {l,
                  (run_fn)group->functions[C_RUN],
                  (combine_fn)group->functions[C_COMBINE],
                  (identity_fn)group->functions[C_IDENTITY],
                  (finish_fn)group->functions[C_FINISH],
                  1,
                  NULL};
  int status = DLOP_OK;
  /* rounded up by division: a zero-stride view may count up to 2^63-1 elements */
  c.chunks = l->count / REDUCE_CPU_CHUNK + (l->count % REDUCE_CPU_CHUNK != 0);
  if (c.chunks < 1) c.chunks = 1;
  if (c.chunks == 1) {
    int64_t per_output = l->count > 1 ? l->count : 1, grain = REDUCE_CPU_GRAIN / per_output;
    status = host->parallel_for(l->outputs, grain > 1 ? grain : 1, outputs_body, &c);
  } else {
    int64_t items;
    if (dlop_mul_overflow(l->outputs, c.chunks, &items) || (uint64_t)items > SIZE_MAX / 8) {
      dlop__format(args->error, args->error_size,
                   "fused reduction: %lld outputs of %lld chunks "
                   "each are more partials than memory holds",
                   (long long)l->outputs, (long long)c.chunks);
      return DLOP_OUT_OF_MEMORY;
    }
    c.partials = malloc(sizeof(uint64_t) * (size_t)items);
    if (c.partials == NULL) {
      dlop__format(args->error, args->error_size,
                   "fused reduction: out of memory for %lld "
                   "partials",
                   (long long)items);
      return DLOP_OUT_OF_MEMORY;
    }
    status = host->parallel_for(items, 1, chunks_body, &c);
    if (status == DLOP_OK) status = host->parallel_for(l->outputs, 1, join_body, &c);
    free(c.partials);
  }
  if (status != DLOP_OK)
    dlop__format(args->error, args->error_size,
                 "fused reduction: the host's parallel_for failed (%d)", status);
  return status;
}

/* ---- CUDA ----------------------------------------------------------------------------------- */

static uint32_t grid_of(int64_t items, uint32_t cap) {
  if (items < 1) return 1;
  return items > (int64_t)cap ? cap : (uint32_t)items;
}

static int cuda_launch(void *function, uint32_t grid, void **kernel_args,
                       const dlop_run_args *args) {
  uint32_t grid3[3] = {grid, 1, 1}, block[3] = {REDUCE_CUDA_BLOCK, 1, 1};
  return dlop__host_api()->cuda_launch(function, grid3, block, 0, args->stream, kernel_args,
                                       args->error, args->error_size);
}

static int cuda_reduce_run(const dlop__fusion_group *group, const dlop__fusion_reduce_layout *l,
                           const dlop_run_args *args) {
  /* the kernels' layout struct: kept_ndim, reduced_ndim, outputs, count, parts, slice, then
   * shape, strides[inputs] and out_strides, each DLOP__FUSION_REDUCE_DIMS long, all int64 */
  int64_t layout[6 + (DLOP__FUSION_MAX_OPERANDS + 2) * DLOP__FUSION_REDUCE_DIMS];
  const void *pointers[DLOP__FUSION_MAX_OPERANDS] = {NULL};
  int32_t inputs = group->num_inputs > 0 ? group->num_inputs : 1, k, d;
  int64_t parts = 1, slice = l->count;
  if (args->stream == NULL) {
    dlop__format(args->error, args->error_size, "fused reduction: no CUDA stream given");
    return DLOP_INVALID_ARGUMENT;
  }
  if (l->count > REDUCE_CUDA_WARP_MAX_COUNT && l->outputs < REDUCE_CUDA_MAX_PARTIALS / 2) {
    parts = l->count / REDUCE_CUDA_MIN_PART + (l->count % REDUCE_CUDA_MIN_PART != 0);
    if (parts > REDUCE_CUDA_MAX_PARTIALS / l->outputs)
      parts = REDUCE_CUDA_MAX_PARTIALS / l->outputs;
    if (parts < 1) parts = 1;
    /* slices of a multiple of 16 elements: each starts on a pack when the row does */
    slice = l->count / parts + (l->count % parts != 0);
    slice = slice / 16 * 16 + (slice % 16 != 0) * 16;
    parts = l->count / slice + (l->count % slice != 0);
  }
  if (parts > 1 && (args->workspace == NULL ||
                    args->workspace_bytes < (size_t)(l->outputs * parts) * sizeof(uint64_t))) {
    dlop__format(args->error, args->error_size,
                 "fused reduction: the run needs %lld bytes of "
                 "workspace, the host gave %zu",
                 (long long)(l->outputs * parts * 8),
                 args->workspace ? args->workspace_bytes : (size_t)0);
    return DLOP_INTERNAL;
  }
  memset(layout, 0, sizeof layout);
  layout[0] = l->kept_ndim;
  layout[1] = l->reduced_ndim;
  layout[2] = l->outputs;
  layout[3] = l->count;
  layout[4] = parts;
  layout[5] = slice;
  int64_t *shape = layout + 6, *strides = shape + DLOP__FUSION_REDUCE_DIMS;
  int64_t *out_strides = strides + (int64_t)inputs * DLOP__FUSION_REDUCE_DIMS;
  for (d = 0; d < l->kept_ndim + l->reduced_ndim; d++) shape[d] = l->shape[d];
  for (k = 0; k < group->num_inputs; k++) {
    pointers[k] = l->base[k];
    for (d = 0; d < l->kept_ndim + l->reduced_ndim; d++)
      strides[k * DLOP__FUSION_REDUCE_DIMS + d] = l->strides[k][d];
  }
  for (d = 0; d < l->kept_ndim; d++) out_strides[d] = l->output_strides[d];
  void *out = l->output_base, *partials = args->workspace;
  uint32_t cap = group->max_blocks;
  if (l->count <= REDUCE_CUDA_WARP_MAX_COUNT) {
    void *kernel_args[3] = {(void *)pointers, &out, layout};
    int64_t warps = REDUCE_CUDA_BLOCK / 32;
    return cuda_launch(group->functions[CUDA_WARP],
                       grid_of(l->outputs / warps + (l->outputs % warps != 0), cap), kernel_args,
                       args);
  }
  void *block_args[4] = {(void *)pointers, &out, &partials, layout};
  int status =
      cuda_launch(group->functions[CUDA_BLOCK], grid_of(l->outputs * parts, cap), block_args, args);
  if (status != DLOP_OK || parts == 1) return status;
  void *finish_args[3] = {&out, &partials, layout};
  return cuda_launch(group->functions[CUDA_FINISH], grid_of(l->outputs, cap), finish_args, args);
}

/* ---- the thunk -------------------------------------------------------------------------------- */

static int reduction_run(void *state, const dlop_run_args *args) {
  const dlop__fusion_group *group = (const dlop__fusion_group *)state;
  const dlop__fusion_reduction *r = group->reduction;
  dlop__fusion_reduce_layout layout;
  int64_t shape[DLOP_MAX_NDIM];
  int32_t ndim = 0, reduced = 0;
  if (args->num_inputs != group->num_inputs || args->num_outputs != 1) {
    dlop__format(args->error, args->error_size,
                 "fused reduction: run with %d inputs and %d "
                 "outputs, expected %d and 1",
                 (int)args->num_inputs, (int)args->num_outputs, (int)group->num_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  int status = dlop__fusion_reduce_shape(group, args->inputs, shape, &ndim);
  if (status == DLOP_OK && ndim != r->node.input_types[0].ndim)
    status = dlop__error(DLOP_INTERNAL,
                         "fused reduction: its inputs broadcast to rank %d, but "
                         "the reduction's input has rank %d",
                         (int)ndim, (int)r->node.input_types[0].ndim);
  for (uint32_t bits = r->axes; bits; bits &= bits - 1) reduced++;
  if (status == DLOP_OK)
    status =
        dlop__fusion_reduce_layout_init(&layout, shape, ndim, reduced, args->inputs,
                                        group->input_scalar, group->num_inputs, &args->outputs[0]);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "%s", dlop_last_error());
    return status;
  }
  if (layout.outputs == 0) return DLOP_OK;
  if (group->target == DLOP__FUSION_TARGET_CUDA) return cuda_reduce_run(group, &layout, args);
  return cpu_reduce_run(group, &layout, args);
}

void dlop__fusion_reduction_thunk(dlop__fusion_group *group, dlop_thunk *thunk) {
  memset(thunk, 0, sizeof *thunk);
  thunk->struct_size = sizeof(dlop_thunk);
  thunk->state = group;
  thunk->run = reduction_run;
  thunk->destroy = NULL; /* the module is the function's (function_fuse.c) */
  thunk->workspace_bytes =
      group->target == DLOP__FUSION_TARGET_CUDA ? REDUCE_CUDA_MAX_PARTIALS * sizeof(uint64_t) : 0;
}
