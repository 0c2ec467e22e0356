/* reduce_layout.c — collapses a reduction's input and output strides into the kept and
 * reduced dim lists of reduce_layout.h, shared by the CPU and CUDA thunks. */
#include <stdlib.h>
#include <string.h>

#include "reduce_plugin.h"

static int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }

/* Every product below is a partial product of the input's or the output's dims, or a stride
 * times a dim: dlop_check_tensors (checked_size.h) bounded all of them before the run got
 * here, so they fit; the checked forms keep that true for any caller. */
int reduce_layout_init(reduce_layout *l, const dlop_tensor *input, const dlop_tensor *output,
                       uint32_t mask, const char *op_name, char *error, size_t error_size) {
  int64_t in_strides[DLOP_MAX_NDIM], out_strides[DLOP_MAX_NDIM];
  int32_t d, o, kept = 0, reduced = 0, keepdims = output->ndim == input->ndim;
  char text[DLOP_MAX_NDIM * 22 + 4];
  memset(l, 0, sizeof *l);
  if (dlop_shape_size(input->shape, input->ndim, 0, NULL, NULL) != DLOP_SIZE_FITS ||
      (input->strides == NULL && dlop_contiguous_strides(input->shape, input->ndim, in_strides)) ||
      (output->strides == NULL && dlop_contiguous_strides(output->shape, output->ndim, out_strides))) {
    dlop_set_error(error, error_size, "%s: input shape %s has more than " DLOP_SIZE_LIMIT_TEXT
                   " elements", op_name, dlop_format_shape(input->shape, input->ndim, text, sizeof text));
    return DLOP_SHAPE_ERROR;
  }
  if (input->strides) memcpy(in_strides, input->strides, sizeof(int64_t) * (size_t)input->ndim);
  if (output->strides) memcpy(out_strides, output->strides, sizeof(int64_t) * (size_t)output->ndim);
  l->outputs = 1;
  l->count = 1;
  /* kept dims in input order (which is the output's order); o walks the output's dims */
  for (d = 0, o = 0; d < input->ndim; d++) {
    int64_t size = input->shape[d];
    if (mask & (1u << d)) {
      l->count *= size; /* the input's element count fits, so its partial products do */
      if (keepdims) o++;
      if (size == 1) continue;
      l->reduced_shape[reduced] = size;
      l->reduced_strides[reduced] = in_strides[d];
      reduced++;
      continue;
    }
    l->outputs *= size;
    if (size != 1) {
      int64_t in_step, out_step;
      if (kept > 0 && !dlop_mul_overflow(in_strides[d], size, &in_step) &&
          !dlop_mul_overflow(out_strides[o], size, &out_step) &&
          l->kept_in_strides[kept - 1] == in_step && l->kept_out_strides[kept - 1] == out_step) {
        l->kept_shape[kept - 1] *= size;
        l->kept_in_strides[kept - 1] = in_strides[d];
        l->kept_out_strides[kept - 1] = out_strides[o];
      } else {
        l->kept_shape[kept] = size;
        l->kept_in_strides[kept] = in_strides[d];
        l->kept_out_strides[kept] = out_strides[o];
        kept++;
      }
    }
    o++;
  }
  /* reduced dims by decreasing |stride| (stable insertion sort), then merged */
  for (d = 1; d < reduced; d++) {
    int64_t size = l->reduced_shape[d], stride = l->reduced_strides[d];
    int32_t j = d;
    while (j > 0 && magnitude(l->reduced_strides[j - 1]) < magnitude(stride)) {
      l->reduced_shape[j] = l->reduced_shape[j - 1];
      l->reduced_strides[j] = l->reduced_strides[j - 1];
      j--;
    }
    l->reduced_shape[j] = size;
    l->reduced_strides[j] = stride;
  }
  {
    int32_t merged = 0;
    for (d = 0; d < reduced; d++) {
      int64_t step;
      if (merged > 0 &&
          !dlop_mul_overflow(l->reduced_strides[d], l->reduced_shape[d], &step) &&
          l->reduced_strides[merged - 1] == step) {
        l->reduced_shape[merged - 1] *= l->reduced_shape[d];
        l->reduced_strides[merged - 1] = l->reduced_strides[d];
      } else {
        l->reduced_shape[merged] = l->reduced_shape[d];
        l->reduced_strides[merged] = l->reduced_strides[d];
        merged++;
      }
    }
    reduced = merged;
  }
  if (kept == 0) {
    l->kept_shape[0] = 1;
    kept = 1;
  }
  if (reduced == 0) {
    l->reduced_shape[0] = 1;
    reduced = 1;
  }
  /* an empty tensor: sizes stay as given (0 somewhere), counts carry the truth */
  l->kept_ndim = kept;
  l->reduced_ndim = reduced;
  return DLOP_OK;
}
