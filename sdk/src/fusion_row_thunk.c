/* fusion_row_thunk.c — the thunk of a row group: the rows of the run (the broadcast of its
 * inputs' shapes; every row-varying output has that shape, every per-row one its rows and a last
 * dim of 1), each operand's offset per row and stride along it, and the generated kernel
 * (fusion_row_source.c) run over them. A row's order of combination depends only on its length,
 * never on threads or alignment, so runs give the same bits.
 *   CPU:  parallel_for over rows, one call of dlop_fused_g<N>_row per row.
 *   CUDA: a block per row (grid-stride over rows), the kernel that keeps the row's packs in
 *         registers when it fits (R packs a thread), else the one that reads them per phase. */
#include <stdlib.h>
#include <string.h>

#include <dlop/kit/checked_size.h>

#include "fusion.h"
#include "jit.h"

typedef void (*row_fn)(char *const *pointers, const int64_t *strides, int64_t n, char *scratch);

typedef struct row_layout {
  int32_t ndim, operands; /* outputs, then inputs */
  int64_t rows, n;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP__FUSION_MAX_OPERANDS][DLOP_MAX_NDIM]; /* elements, over the row dims */
  int64_t last[DLOP__FUSION_MAX_OPERANDS];                   /* elements, along the row */
  char *base[DLOP__FUSION_MAX_OPERANDS];
  int64_t element_size[DLOP__FUSION_MAX_OPERANDS];
} row_layout;

static const char *shape_text(const int64_t *shape, int32_t ndim, char *buffer, size_t size) {
  return dlop__format_ints(shape, ndim, buffer, size);
}

/* One operand's strides: the tensor's own (contiguous when it has none), 0 where it broadcasts. */
static void operand_strides(row_layout *l, int32_t k, const dlop_tensor *t) {
  int64_t contiguous = 1;
  for (int32_t d = l->ndim - 1; d >= 0; d--) {
    int32_t j = d - (l->ndim - t->ndim);
    int64_t stride = 0;
    if (j >= 0) {
      stride = t->strides ? t->strides[j] : contiguous;
      contiguous *= t->shape[j];
      if (t->shape[j] == 1) stride = 0;
    }
    if (d == l->ndim - 1)
      l->last[k] = stride;
    else
      l->strides[k][d] = stride;
  }
  l->base[k] = (char *)t->data + t->byte_offset;
  l->element_size[k] = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
}

static int layout_init(const dlop__fusion_group *group, const dlop_run_args *args, row_layout *l) {
  const dlop__fusion_row *row = group->row;
  char have[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  int32_t d, k, o;
  memset(l, 0, sizeof *l);
  l->ndim = row->ndim;
  l->operands = group->num_outputs + group->num_inputs;
  for (d = 0; d < l->ndim; d++) l->shape[d] = 1;
  for (k = 0; k < group->num_inputs; k++) {
    const dlop_tensor *t = &args->inputs[k];
    int fits = t->ndim <= l->ndim;
    for (d = 0; d < t->ndim && fits; d++) {
      int64_t *dim = &l->shape[l->ndim - t->ndim + d];
      if (t->shape[d] == *dim || t->shape[d] == 1) continue;
      fits = *dim == 1;
      *dim = t->shape[d];
    }
    if (!fits)
      return dlop__error(DLOP_SHAPE_ERROR,
                         "row group %d: input %d of shape %s does not broadcast to the rows "
                         "(%s so far, rank %d)",
                         (int)group->number, (int)k,
                         shape_text(t->shape, t->ndim, have, sizeof have),
                         shape_text(l->shape, l->ndim, want, sizeof want), (int)l->ndim);
  }
  for (o = 0; o < group->num_outputs; o++) {
    const dlop_tensor *t = &args->outputs[o];
    int per_row = row->value_per_row[group->output_values[o]], fits = t->ndim == l->ndim;
    for (d = 0; d < l->ndim && fits; d++)
      fits = t->shape[d] == (d == l->ndim - 1 && per_row ? 1 : l->shape[d]);
    if (!fits)
      return dlop__error(DLOP_SHAPE_ERROR,
                         "row group %d: output %d has shape %s, but the rows are %s (a %s output "
                         "has %s): these shapes broadcast in a way a row group does not cover; "
                         "compile the function with fuse=False",
                         (int)group->number, (int)o,
                         shape_text(t->shape, t->ndim, have, sizeof have),
                         shape_text(l->shape, l->ndim, want, sizeof want),
                         per_row ? "per-row" : "row-varying",
                         per_row ? "their shape with a last dim of 1" : "their shape");
    operand_strides(l, o, t);
  }
  for (k = 0; k < group->num_inputs; k++)
    operand_strides(l, group->num_outputs + k, &args->inputs[k]);
  l->n = l->shape[l->ndim - 1];
  l->rows = 1;
  for (d = 0; d + 1 < l->ndim; d++) l->rows *= l->shape[d];
  return DLOP_OK;
}

/* ---- CPU ------------------------------------------------------------------------------------ */

typedef struct cpu_rows {
  const row_layout *layout;
  row_fn run;
  size_t scratch_bytes; /* per row: the buffers of the values kept (fusion_row_source.c) */
  volatile int failed;
} cpu_rows;

static void rows_body(void *context, int64_t begin, int64_t end) {
  cpu_rows *c = (cpu_rows *)context;
  const row_layout *l = c->layout;
  char *pointers[DLOP__FUSION_MAX_OPERANDS];
  char *scratch = c->scratch_bytes > 0 ? malloc(c->scratch_bytes) : NULL;
  if (c->scratch_bytes > 0 && scratch == NULL) {
    c->failed = 1;
    return;
  }
  for (int64_t m = begin; m < end; m++) {
    int64_t rest = m;
    for (int32_t k = 0; k < l->operands; k++) pointers[k] = l->base[k];
    for (int32_t d = l->ndim - 2; d >= 0; d--) {
      int64_t at = rest % l->shape[d];
      rest /= l->shape[d];
      for (int32_t k = 0; k < l->operands; k++)
        pointers[k] += at * l->strides[k][d] * l->element_size[k];
    }
    c->run(pointers, l->last, l->n, scratch);
  }
  free(scratch);
}

static int cpu_run(const dlop__fusion_group *group, const row_layout *l,
                   const dlop_run_args *args) {
  const dlop__fusion_row *row = group->row;
  cpu_rows c = {l, (row_fn)group->functions[0], 0, 0};
  int64_t grain = 16384 / (l->n > 1 ? l->n : 1), bytes;
  if (row->num_cached > 0) {
    if (dlop_mul_overflow(l->n, row->scratch_bytes, &bytes) ||
        dlop_add_overflow(bytes, 64 * (int64_t)row->num_cached, &bytes) ||
        (uint64_t)bytes > SIZE_MAX) {
      dlop__format(args->error, args->error_size,
                   "row group: rows of %lld elements need more buffer than memory holds",
                   (long long)l->n);
      return DLOP_OUT_OF_MEMORY;
    }
    c.scratch_bytes = (size_t)bytes;
  }
  int status = dlop__host_api()->parallel_for(l->rows, grain > 1 ? grain : 1, rows_body, &c);
  if (status == DLOP_OK && c.failed) {
    dlop__format(args->error, args->error_size,
                 "row group: out of memory for a row's buffers (%zu bytes)", c.scratch_bytes);
    return DLOP_OUT_OF_MEMORY;
  }
  if (status != DLOP_OK)
    dlop__format(args->error, args->error_size, "row group: the host's parallel_for failed (%d)",
                 status);
  return status;
}

/* ---- CUDA ----------------------------------------------------------------------------------- */

static int cuda_run(const dlop__fusion_group *group, const row_layout *l,
                    const dlop_run_args *args) {
  /* the kernels' struct: p[operands], rows, n, ndim, shape[16], strides[operands][16],
   * last[operands], all 8 bytes */
  int64_t packed[DLOP__FUSION_MAX_OPERANDS * (DLOP_MAX_NDIM + 2) + 3 + DLOP_MAX_NDIM];
  int32_t ops = l->operands, k, d, kernel = 0;
  int64_t *at = packed;
  if (args->stream == NULL) {
    dlop__format(args->error, args->error_size, "row group: no CUDA stream given");
    return DLOP_INVALID_ARGUMENT;
  }
  memset(packed, 0, sizeof packed);
  for (k = 0; k < ops; k++) memcpy(at++, &l->base[k], sizeof(void *));
  *at++ = l->rows;
  *at++ = l->n;
  *at++ = l->ndim;
  for (d = 0; d < DLOP_MAX_NDIM; d++) *at++ = d < l->ndim ? l->shape[d] : 1;
  for (k = 0; k < ops; k++)
    for (d = 0; d < DLOP_MAX_NDIM; d++) *at++ = d + 1 < l->ndim ? l->strides[k][d] : 0;
  for (k = 0; k < ops; k++) *at++ = l->last[k];
  /* the fewest packs per thread that hold the row: kernel 1 + log2(R); 0 reads per phase */
  int64_t per_pack = (int64_t)DLOP__FUSION_ROW_THREADS * group->vector_width;
  for (int32_t packs = 1, index = 1; packs <= dlop__fusion_row_max_packs(group);
       packs *= 2, index++)
    if (kernel == 0 && l->n <= packs * per_pack) kernel = index;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {DLOP__FUSION_ROW_THREADS, 1, 1};
  grid[0] = l->rows > (int64_t)group->max_blocks ? group->max_blocks : (uint32_t)l->rows;
  void *kernel_args[1] = {packed};
  return dlop__host_api()->cuda_launch(group->functions[kernel], grid, block, 0, args->stream,
                                       kernel_args, args->error, args->error_size);
}

/* ---- the thunk ------------------------------------------------------------------------------ */

static int row_run(void *state, const dlop_run_args *args) {
  const dlop__fusion_group *group = (const dlop__fusion_group *)state;
  row_layout layout;
  if (args->num_inputs != group->num_inputs || args->num_outputs != group->num_outputs) {
    dlop__format(args->error, args->error_size,
                 "row group: run with %d inputs and %d outputs, expected %d and %d",
                 (int)args->num_inputs, (int)args->num_outputs, (int)group->num_inputs,
                 (int)group->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  int status = layout_init(group, args, &layout);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "%s", dlop_last_error());
    return status;
  }
  if (layout.rows == 0) return DLOP_OK;
  if (group->target == DLOP__FUSION_TARGET_CUDA) return cuda_run(group, &layout, args);
  return cpu_run(group, &layout, args);
}

void dlop__fusion_row_thunk(dlop__fusion_group *group, dlop_thunk *thunk) {
  memset(thunk, 0, sizeof *thunk);
  thunk->struct_size = sizeof(dlop_thunk);
  thunk->state = group;
  thunk->run = row_run;
  thunk->destroy = NULL; /* the module is the function's (function_fuse.c) */
  thunk->workspace_bytes = 0;
}
