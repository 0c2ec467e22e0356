/* broadcast_to.c — broadcast_to(x; shape), NumPy's: x's axes align with the last axes of
 * shape, each of size 1 or equal to its target; the output has stride 0 along broadcast axes.
 * shape empty (the default) is the 0-d shape: only a 0-d input broadcasts to it. Unknown input
 * dims pass while the graph is built and are checked at run time. */
#include "shape_plugin.h"

static int broadcast_rule(const dlop_param_value *target, const dlop_type *x, int64_t *out,
                          char *error, size_t error_size) {
  char text[256], shape[256];
  if (target->count > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "broadcast_to: shape %s has %d entries, at most %d allowed",
                   dlop_format_ints(target->u.ints, target->count, text, sizeof text),
                   (int)target->count, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  for (int32_t i = 0; i < target->count; i++)
    if (target->u.ints[i] < 0) {
      dlop_set_error(error, error_size, "broadcast_to: shape %s has a negative size %lld",
                     dlop_format_ints(target->u.ints, target->count, text, sizeof text),
                     (long long)target->u.ints[i]);
      return DLOP_TYPE_ERROR;
    }
  if (x->ndim > target->count) {
    dlop_set_error(error, error_size,
                   "broadcast_to: cannot broadcast %s to %s: the input has more axes (%d) than "
                   "the target (%d)",
                   dlop_format_shape(x->shape, x->ndim, shape, sizeof shape),
                   dlop_format_ints(target->u.ints, target->count, text, sizeof text), (int)x->ndim,
                   (int)target->count);
    return DLOP_TYPE_ERROR;
  }
  int32_t lead = target->count - x->ndim;
  for (int32_t d = 0; d < x->ndim; d++) {
    int64_t have = x->shape[d], want = target->u.ints[lead + d];
    if (have == DLOP_DIM_UNKNOWN || have == 1 || have == want) continue;
    dlop_set_error(error, error_size,
                   "broadcast_to: cannot broadcast %s to %s: input axis %d has size %lld, "
                   "expected 1 or %lld",
                   dlop_format_shape(x->shape, x->ndim, shape, sizeof shape),
                   dlop_format_ints(target->u.ints, target->count, text, sizeof text),
                   (int)d, (long long)have, (long long)want);
    return DLOP_SHAPE_ERROR;
  }
  /* a target no array can have: refused while the graph is built, not wrapped at run time */
  int size = dlop_shape_size(target->u.ints, target->count,
                             (int64_t)dlop_dtype_size((dlop_dtype)x->dtype), NULL, NULL);
  if (size != DLOP_SIZE_FITS) {
    dlop_set_size_error(error, error_size, "broadcast_to", size, target->u.ints, target->count,
                        x->dtype);
    return DLOP_SHAPE_ERROR;
  }
  if (out)
    for (int32_t i = 0; i < target->count; i++) out[i] = target->u.ints[i];
  return DLOP_OK;
}

int broadcast_to_make_node(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  const dlop_param_value *target = &args->params[0];
  args->outputs[0].dtype = args->inputs[0].dtype;
  args->outputs[0].ndim = target->count <= DLOP_MAX_NDIM ? target->count : 0;
  return broadcast_rule(target, &args->inputs[0], args->outputs[0].shape, args->error,
                        args->error_size);
}

int broadcast_to_infer_shape(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  return broadcast_rule(&args->params[0], &args->inputs[0], args->outputs[0].shape, args->error,
                        args->error_size);
}

int broadcast_to_make_view(const dlop_view_args *args) {
  const dlop_tensor *x = args->input;
  const dlop_type *y = args->output;
  int32_t lead = y->ndim - x->ndim;
  if (lead < 0) {
    dlop_set_error(args->error, args->error_size,
                   "broadcast_to: the input has rank %d, more than the output's %d", (int)x->ndim,
                   (int)y->ndim);
    return DLOP_SHAPE_ERROR;
  }
  for (int32_t i = 0; i < y->ndim; i++) {
    int32_t d = i - lead;
    int broadcast = d < 0 || (x->shape[d] == 1 && y->shape[i] != 1);
    args->output_strides[i] = broadcast ? 0 : x->strides[d];
  }
  shape_view_same_start(args);
  return DLOP_OK;
}
