/* dimshuffle.c — dimshuffle(x; pattern), Theano's: pattern lists input axes in their new
 * order, -1 for a new axis of size 1; each input axis appears at most once, and the ones left
 * out are dropped and must have size 1 (checked once the size is known: unknown while the graph
 * is built, a DLOP_SHAPE_ERROR at run time if it is not 1). The empty pattern (the default)
 * drops every axis: a 0-d view of an input whose axes all have size 1. */
#include "shape_plugin.h"

/* Check the pattern against the input shape (unknown dims pass); fill the output shape when
 * out is not NULL. */
static int dimshuffle_rule(const dlop_param_value *pattern, const dlop_type *x, int64_t *out,
                           char *error, size_t error_size) {
  char text[256], shape[256];
  int used[DLOP_MAX_NDIM] = {0};
  if (pattern->count > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "dimshuffle: pattern %s has %d entries, at most %d allowed",
                   dlop_format_ints(pattern->u.ints, pattern->count, text, sizeof text),
                   (int)pattern->count, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  for (int32_t i = 0; i < pattern->count; i++) {
    int64_t axis = pattern->u.ints[i];
    if (axis == -1) {
      if (out) out[i] = 1;
      continue;
    }
    if (axis < 0 || axis >= x->ndim) {
      dlop_set_error(error, error_size,
                     "dimshuffle: pattern %s: entry %lld is neither an input axis (0 to %d) nor "
                     "-1 (a new axis of size 1)",
                     dlop_format_ints(pattern->u.ints, pattern->count, text, sizeof text),
                     (long long)axis, (int)x->ndim - 1);
      return DLOP_TYPE_ERROR;
    }
    if (used[axis]++) {
      dlop_set_error(error, error_size, "dimshuffle: pattern %s uses input axis %lld twice",
                     dlop_format_ints(pattern->u.ints, pattern->count, text, sizeof text),
                     (long long)axis);
      return DLOP_TYPE_ERROR;
    }
    if (out) out[i] = x->shape[axis];
  }
  for (int32_t d = 0; d < x->ndim; d++) {
    if (used[d] || x->shape[d] == 1 || x->shape[d] == DLOP_DIM_UNKNOWN) continue;
    dlop_set_error(error, error_size,
                   "dimshuffle: pattern %s drops input axis %d of size %lld from shape %s: only "
                   "axes of size 1 may be dropped",
                   dlop_format_ints(pattern->u.ints, pattern->count, text, sizeof text), (int)d,
                   (long long)x->shape[d], dlop_format_shape(x->shape, x->ndim, shape, sizeof shape));
    return DLOP_SHAPE_ERROR;
  }
  return DLOP_OK;
}

int dimshuffle_make_node(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  const dlop_param_value *pattern = &args->params[0];
  args->outputs[0].dtype = args->inputs[0].dtype;
  args->outputs[0].ndim = pattern->count <= DLOP_MAX_NDIM ? pattern->count : 0;
  return dimshuffle_rule(pattern, &args->inputs[0], args->outputs[0].shape, args->error,
                         args->error_size);
}

int dimshuffle_infer_shape(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  return dimshuffle_rule(&args->params[0], &args->inputs[0], args->outputs[0].shape, args->error,
                         args->error_size);
}

int dimshuffle_make_view(const dlop_view_args *args) {
  const dlop_param_value *pattern = &args->params[0];
  const dlop_tensor *x = args->input;
  dlop_type input = {0};
  input.dtype = args->output->dtype;
  input.ndim = x->ndim;
  for (int32_t d = 0; d < x->ndim; d++) input.shape[d] = x->shape[d];
  int status = dimshuffle_rule(pattern, &input, NULL, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  /* a new axis has size 1: its stride is never used to step, 0 says "broadcast" */
  for (int32_t i = 0; i < pattern->count; i++)
    args->output_strides[i] = pattern->u.ints[i] == -1 ? 0 : x->strides[pattern->u.ints[i]];
  shape_view_same_start(args);
  return DLOP_OK;
}
