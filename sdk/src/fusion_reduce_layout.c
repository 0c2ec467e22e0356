/* fusion_reduce_layout.c — the loop of a fused reduction's run: the iteration shape (the
 * broadcast of what the group reads, which is the reduction's input shape) split into the kept
 * dims, one per output element, and the trailing reduced dims, each collapsed on its own as
 * fusion_layout.c collapses an elementwise loop (size-1 dims dropped, dims that every operand
 * steps through as one run merged), so a contiguous row reduction is one kept and one reduced
 * dim and a reduction over every axis one reduced dim. The tensors come from arrays the runner
 * checked (sizes and reach fit int64), so nothing here can overflow. */
#include <string.h>

#include "fusion.h"

/* Broadcasts shape (ndim dims) into result (*result_ndim dims so far, right-aligned). */
static int broadcast_into(int64_t *result, int32_t *result_ndim, const int64_t *shape,
                          int32_t ndim) {
  if (ndim > *result_ndim) { /* new leading dims of size 1 */
    int32_t grow = ndim - *result_ndim;
    memmove(result + grow, result, sizeof(int64_t) * (size_t)*result_ndim);
    for (int32_t d = 0; d < grow; d++) result[d] = 1;
    *result_ndim = ndim;
  }
  for (int32_t j = 0; j < ndim; j++) {
    int64_t *have = &result[*result_ndim - ndim + j];
    if (shape[j] == *have || shape[j] == 1) continue;
    if (*have != 1) return 0;
    *have = shape[j];
  }
  return 1;
}

int dlop__fusion_reduce_shape(const dlop__fusion_group *group, const dlop_tensor *inputs,
                              int64_t *shape, int32_t *ndim) {
  char have[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  *ndim = 0;
  for (int32_t l = 0; l < group->num_literals; l++)
    if (!broadcast_into(shape, ndim, group->literals[l].type.shape, group->literals[l].type.ndim))
      return dlop__error(DLOP_SHAPE_ERROR, "fused reduction: a constant does not broadcast");
  for (int32_t k = 0; k < group->num_inputs; k++)
    if (!broadcast_into(shape, ndim, inputs[k].shape, inputs[k].ndim))
      return dlop__error(DLOP_SHAPE_ERROR,
                         "fused reduction: input %d of shape %s does not "
                         "broadcast with the others (%s so far)",
                         (int)k,
                         dlop__format_ints(inputs[k].shape, inputs[k].ndim, have, sizeof have),
                         dlop__format_ints(shape, *ndim, want, sizeof want));
  return DLOP_OK;
}

/* Collapses dims [first, first + count) of the layout's full-rank arrays into slot `at`
 * onwards, for the operands whose strides are listed (k < operands, plus the output when
 * with_output): size-1 dims dropped, a dim merged into the kept one before it when every
 * operand steps through both as one run. Returns the dims kept, at least 1. */
static int32_t collapse(dlop__fusion_reduce_layout *l, const int64_t *shape,
                        int64_t strides[][DLOP__FUSION_REDUCE_DIMS], const int64_t *out_strides,
                        int32_t first, int32_t count, int32_t at) {
  int32_t kept = 0, k, operands = l->num_inputs;
  for (int32_t d = first; d < first + count; d++) {
    if (shape[d] == 1) continue;
    int mergeable = kept > 0;
    for (k = 0; k < operands && mergeable; k++)
      mergeable = l->strides[k][at + kept - 1] == strides[k][d] * shape[d];
    if (mergeable && out_strides != NULL)
      mergeable = l->output_strides[at + kept - 1] == out_strides[d] * shape[d];
    int32_t to = mergeable ? at + kept - 1 : at + kept;
    l->shape[to] = mergeable ? l->shape[to] * shape[d] : shape[d];
    for (k = 0; k < operands; k++) l->strides[k][to] = strides[k][d];
    if (out_strides != NULL) l->output_strides[to] = out_strides[d];
    if (!mergeable) kept++;
  }
  if (kept == 0) { /* nothing but size-1 dims: one dim of size 1 */
    l->shape[at] = 1;
    for (k = 0; k < operands; k++) l->strides[k][at] = 0;
    l->output_strides[at] = 0;
    kept = 1;
  }
  return kept;
}

int dlop__fusion_reduce_layout_init(dlop__fusion_reduce_layout *l, const int64_t *shape,
                                    int32_t ndim, int32_t reduced, const dlop_tensor *inputs,
                                    const char *flat, int32_t count, const dlop_tensor *output) {
  int64_t strides[DLOP__FUSION_MAX_OPERANDS][DLOP__FUSION_REDUCE_DIMS];
  int64_t out_strides[DLOP__FUSION_REDUCE_DIMS];
  char have[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  int32_t kept = ndim - reduced, k, d;
  memset(l, 0, sizeof *l);
  l->num_inputs = count;
  /* the output: the kept dims, then the reduced ones as 1 (keepdims) or nothing */
  int fits = output->ndim == kept || output->ndim == ndim;
  for (d = 0; d < output->ndim && fits; d++)
    fits = d < kept ? output->shape[d] == shape[d] : output->shape[d] == 1;
  if (!fits)
    return dlop__error(DLOP_SHAPE_ERROR,
                       "fused reduction: the output's shape %s is not the "
                       "reduction of %s over its last %d axes",
                       dlop__format_ints(output->shape, output->ndim, have, sizeof have),
                       dlop__format_ints(shape, ndim, want, sizeof want), (int)reduced);
  int64_t contiguous = 1;
  for (d = output->ndim - 1; d >= 0; d--) {
    int64_t stride = output->strides ? output->strides[d] : contiguous;
    contiguous *= output->shape[d];
    if (d < kept) out_strides[d] = stride;
  }
  l->output_base = (char *)output->data + output->byte_offset;
  l->output_element_size = (int64_t)dlop_dtype_size(dlop_tensor_dtype(output));
  for (k = 0; k < count; k++) {
    const dlop_tensor *t = &inputs[k];
    l->base[k] = (char *)t->data + t->byte_offset;
    l->element_size[k] = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
    contiguous = 1;
    for (d = ndim - 1; d >= 0; d--) {
      int32_t j = d - (ndim - t->ndim);
      strides[k][d] = 0;
      if (flat[k] || j < 0) continue;
      int64_t stride = t->strides ? t->strides[j] : contiguous;
      contiguous *= t->shape[j];
      if (t->shape[j] == shape[d] && shape[d] != 1)
        strides[k][d] = stride;
      else if (t->shape[j] != 1 && t->shape[j] != shape[d])
        return dlop__error(DLOP_SHAPE_ERROR,
                           "fused reduction: input %d of shape %s does not "
                           "broadcast to %s",
                           (int)k, dlop__format_ints(t->shape, t->ndim, have, sizeof have),
                           dlop__format_ints(shape, ndim, want, sizeof want));
    }
  }
  l->outputs = 1;
  l->count = 1;
  for (d = 0; d < ndim; d++) {
    if (d < kept)
      l->outputs *= shape[d];
    else
      l->count *= shape[d];
  }
  l->kept_ndim = collapse(l, shape, strides, out_strides, 0, kept, 0);
  if (l->outputs == 0) return DLOP_OK; /* nothing to write */
  if (l->count == 0) {                 /* every output is the empty reduction's */
    l->reduced_ndim = 1;
    l->shape[l->kept_ndim] = 0;
    for (k = 0; k < count; k++) l->strides[k][l->kept_ndim] = 0;
    return DLOP_OK;
  }
  l->reduced_ndim = collapse(l, shape, strides, NULL, kept, reduced, l->kept_ndim);
  return DLOP_OK;
}
