/* fusion_layout.c — the loop of a fused kernel's run over any number of operands (the kit's
 * dlop_strided_loop holds four): every tensor broadcast to the iteration shape (NumPy rules,
 * any strides: views feed a group as they are), dims of size 1 dropped, dims that every operand
 * steps through as one run merged, so a contiguous group is one flat loop. The tensors come
 * from arrays the runner checked (sizes and reach fit int64), so nothing here can overflow. */
#include <string.h>

#include "fusion.h"

int dlop__fusion_layout_init(dlop__fusion_layout *layout, const int64_t *shape, int32_t ndim,
                             const dlop_tensor *const *tensors, const char *flat, int32_t count,
                             const char *what) {
  int32_t k, d, kept = 0;
  layout->num_operands = count;
  layout->numel = 1;
  for (d = 0; d < ndim; d++) {
    layout->shape[d] = shape[d];
    layout->numel *= shape[d];
  }
  for (k = 0; k < count; k++) {
    const dlop_tensor *t = tensors[k];
    int64_t contiguous = 1;
    layout->base[k] = (char *)t->data + t->byte_offset;
    layout->element_size[k] = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
    for (d = ndim - 1; d >= 0; d--) {
      int32_t j = d - (ndim - t->ndim);
      layout->strides[k][d] = 0;
      if (flat[k] || j < 0) continue;
      int64_t stride = t->strides ? t->strides[j] : contiguous;
      contiguous *= t->shape[j];
      if (t->shape[j] == shape[d]) {
        layout->strides[k][d] = shape[d] == 1 ? 0 : stride;
      } else if (t->shape[j] != 1) {
        char have[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
        return dlop__error(DLOP_SHAPE_ERROR, "%s: operand %d of shape %s does not broadcast to %s",
                           what, (int)k, dlop__format_ints(t->shape, t->ndim, have, sizeof have),
                           dlop__format_ints(shape, ndim, want, sizeof want));
      }
    }
    if (!flat[k] && t->ndim > ndim) {
      char have[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
      return dlop__error(DLOP_SHAPE_ERROR, "%s: operand %d of shape %s does not broadcast to %s",
                         what, (int)k, dlop__format_ints(t->shape, t->ndim, have, sizeof have),
                         dlop__format_ints(shape, ndim, want, sizeof want));
    }
  }
  if (layout->numel == 0) {
    layout->ndim = 1;
    layout->shape[0] = 0;
    for (k = 0; k < count; k++) layout->strides[k][0] = 0;
    return DLOP_OK;
  }
  /* drop dims of size 1, merge a dim into the kept one before it when every operand steps
   * through both as one run (outer stride == inner stride * inner size) */
  for (d = 0; d < ndim; d++) {
    int mergeable = kept > 0;
    if (layout->shape[d] == 1) continue;
    for (k = 0; k < count && mergeable; k++)
      mergeable = layout->strides[k][kept - 1] == layout->strides[k][d] * layout->shape[d];
    if (mergeable) {
      layout->shape[kept - 1] *= layout->shape[d];
      for (k = 0; k < count; k++) layout->strides[k][kept - 1] = layout->strides[k][d];
    } else {
      layout->shape[kept] = layout->shape[d];
      for (k = 0; k < count; k++) layout->strides[k][kept] = layout->strides[k][d];
      kept++;
    }
  }
  if (kept == 0) { /* a single element */
    layout->shape[0] = 1;
    for (k = 0; k < count; k++) layout->strides[k][0] = 0;
    kept = 1;
  }
  layout->ndim = kept;
  return DLOP_OK;
}

int dlop__fusion_layout_contiguous(const dlop__fusion_layout *layout, const char *flat) {
  if (layout->ndim != 1) return 0;
  if (layout->shape[0] <= 1) return 1;
  for (int32_t k = 0; k < layout->num_operands; k++)
    if (!flat[k] && layout->strides[k][0] != 1) return 0;
  return 1;
}
