/* transpose.c — transpose(x; axes): x with its axes permuted, as NumPy's x.transpose(axes).
 * axes empty (the default) reverses the axes (x.T); negative axes count from the end. The
 * output's strides are the input's, permuted: a view, whatever the input's strides. */
#include "shape_plugin.h"

/* perm[i] = the input axis that becomes output axis i. */
static int transpose_axes(const dlop_param_value *axes, int32_t ndim, int32_t *perm, char *error,
                          size_t error_size) {
  char text[256];
  if (axes->count == 0) {
    for (int32_t i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
    return DLOP_OK;
  }
  if (axes->count != ndim) {
    dlop_set_error(error, error_size,
                   "transpose: axes %s has %d entries but the input has rank %d: give a "
                   "permutation of all %d axes (or no axes to reverse them)",
                   dlop_format_ints(axes->u.ints, axes->count, text, sizeof text),
                   (int)axes->count, (int)ndim, (int)ndim);
    return DLOP_TYPE_ERROR;
  }
  int seen[DLOP_MAX_NDIM] = {0};
  for (int32_t i = 0; i < ndim; i++) {
    int64_t axis = axes->u.ints[i];
    if (axis < -(int64_t)ndim || axis >= ndim) {
      dlop_set_error(error, error_size,
                     "transpose: axes %s: axis %lld is out of range for rank %d (expected %d to "
                     "%d)",
                     dlop_format_ints(axes->u.ints, axes->count, text, sizeof text),
                     (long long)axis, (int)ndim, -(int)ndim, (int)ndim - 1);
      return DLOP_TYPE_ERROR;
    }
    if (axis < 0) axis += ndim;
    if (seen[axis]++) {
      dlop_set_error(error, error_size,
                     "transpose: axes %s is not a permutation: axis %lld appears twice",
                     dlop_format_ints(axes->u.ints, axes->count, text, sizeof text),
                     (long long)axis);
      return DLOP_TYPE_ERROR;
    }
    perm[i] = (int32_t)axis;
  }
  return DLOP_OK;
}

static int transpose_shape(const dlop_node_args *args) {
  int32_t perm[DLOP_MAX_NDIM];
  const dlop_type *x = &args->inputs[0];
  int status = shape_check_input(args);
  if (status == DLOP_OK)
    status = transpose_axes(&args->params[0], x->ndim, perm, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  for (int32_t i = 0; i < x->ndim; i++) args->outputs[0].shape[i] = x->shape[perm[i]];
  return DLOP_OK;
}

int transpose_make_node(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  args->outputs[0].dtype = args->inputs[0].dtype;
  args->outputs[0].ndim = args->inputs[0].ndim;
  return transpose_shape(args);
}

int transpose_infer_shape(const dlop_node_args *args) { return transpose_shape(args); }

int transpose_make_view(const dlop_view_args *args) {
  int32_t perm[DLOP_MAX_NDIM];
  const dlop_tensor *x = args->input;
  int status = transpose_axes(&args->params[0], x->ndim, perm, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  for (int32_t i = 0; i < x->ndim; i++) args->output_strides[i] = x->strides[perm[i]];
  shape_view_same_start(args);
  return DLOP_OK;
}
