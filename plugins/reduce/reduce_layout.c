/* reduce_layout.c — collapses a reduction's input and output strides into the kept and
 * reduced dim lists of reduce_layout.h, shared by the CPU and CUDA thunks. */
#include <stdlib.h>

#include "reduce_plugin.h"

static int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }

void reduce_layout_init(reduce_layout *l, const dlop_tensor *input, const dlop_tensor *output,
                        uint32_t mask) {
  int64_t in_strides[DLOP_MAX_NDIM], out_strides[DLOP_MAX_NDIM];
  int64_t contiguous = 1;
  int32_t d, o, kept = 0, reduced = 0, keepdims = output->ndim == input->ndim;
  memset(l, 0, sizeof *l);
  for (d = input->ndim - 1; d >= 0; d--) {
    in_strides[d] = input->strides ? input->strides[d] : contiguous;
    contiguous *= input->shape[d];
  }
  contiguous = 1;
  for (d = output->ndim - 1; d >= 0; d--) {
    out_strides[d] = output->strides ? output->strides[d] : contiguous;
    contiguous *= output->shape[d];
  }
  l->outputs = 1;
  l->count = 1;
  /* kept dims in input order (which is the output's order); o walks the output's dims */
  for (d = 0, o = 0; d < input->ndim; d++) {
    int64_t size = input->shape[d];
    if (mask & (1u << d)) {
      l->count *= size;
      if (keepdims) o++;
      if (size == 1) continue;
      l->reduced_shape[reduced] = size;
      l->reduced_strides[reduced] = in_strides[d];
      reduced++;
      continue;
    }
    l->outputs *= size;
    if (size != 1) {
      if (kept > 0 && l->kept_in_strides[kept - 1] == in_strides[d] * size &&
          l->kept_out_strides[kept - 1] == out_strides[o] * size) {
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
      if (merged > 0 &&
          l->reduced_strides[merged - 1] == l->reduced_strides[d] * l->reduced_shape[d]) {
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
}
