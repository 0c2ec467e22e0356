/* reduce_node.c — the reduce ops' type rule (make_node) and shape rule (infer_shape): axes and
 * keepdims checked against the input rank, the output dtype (integer sums give int64) and the
 * output shape, unknown dims propagated. Both are pure. */
#include "reduce_plugin.h"

int reduce_parse_params(const reduce_op_info *info, const dlop_param_value *params,
                        int32_t num_params, int32_t ndim, reduce_params *out, char *error,
                        size_t error_size) {
  const int64_t *axes = NULL;
  int32_t count = 0, i;
  char text[DLOP_MAX_NDIM * 22 + 64];
  out->mask = 0;
  out->keepdims = 0;
  /* the host always passes every declared parameter; a direct caller may pass none */
  if (num_params >= 1 && params != NULL) {
    if (params[0].kind != DLOP_PARAM_INTS || params[0].count < 0 ||
        (params[0].count > 0 && params[0].u.ints == NULL)) {
      dlop_set_error(error, error_size, "%s: parameter axes must be ints, got kind %s with %d values",
                     info->name, dlop_param_kind_name(params[0].kind), (int)params[0].count);
      return DLOP_INVALID_ARGUMENT;
    }
    axes = params[0].u.ints;
    count = params[0].count;
  }
  if (num_params >= 2 && params != NULL) {
    if (params[1].kind != DLOP_PARAM_BOOL) {
      dlop_set_error(error, error_size, "%s: parameter keepdims must be a bool, got kind %s",
                     info->name, dlop_param_kind_name(params[1].kind));
      return DLOP_INVALID_ARGUMENT;
    }
    out->keepdims = params[1].u.i != 0;
  }
  if (ndim < 0 || ndim > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "%s: input has rank %d, expected 0 to %d", info->name,
                   (int)ndim, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  if (count == 0) { /* every axis */
    out->mask = ndim == 0 ? 0u : (uint32_t)((1ull << ndim) - 1);
    return DLOP_OK;
  }
  for (i = 0; i < count; i++) {
    int64_t axis = axes[i] < 0 ? axes[i] + ndim : axes[i];
    if (axes[i] < -(int64_t)ndim || axes[i] >= ndim) {
      if (ndim == 0)
        dlop_set_error(error, error_size,
                       "%s: axes %s are invalid for an input of rank 0: axis %lld is out of range "
                       "(a 0-d input takes no axes; leave axes empty)",
                       info->name, dlop_format_ints(axes, count, text, sizeof text),
                       (long long)axes[i]);
      else
        dlop_set_error(error, error_size,
                       "%s: axes %s are invalid for an input of rank %d: axis %lld is out of range "
                       "[%d, %d]",
                       info->name, dlop_format_ints(axes, count, text, sizeof text), (int)ndim,
                       (long long)axes[i], -(int)ndim, (int)ndim - 1);
      return DLOP_TYPE_ERROR;
    }
    if (out->mask & (1u << axis)) {
      dlop_set_error(error, error_size,
                     "%s: axes %s are invalid for an input of rank %d: axis %lld is repeated "
                     "(each axis may appear once)",
                     info->name, dlop_format_ints(axes, count, text, sizeof text), (int)ndim,
                     (long long)axes[i]);
      return DLOP_TYPE_ERROR;
    }
    out->mask |= 1u << axis;
  }
  return DLOP_OK;
}

dlop_dtype reduce_output_dtype(reduce_kind kind, dlop_dtype input) {
  if (kind == REDUCE_SUM && !dlop_dtype_is_float(input)) return DLOP_INT64;
  return input;
}

int reduce_output_shape(const reduce_op_info *info, const reduce_params *p, int32_t ndim,
                        const int64_t *shape, int32_t *out_ndim, int64_t *out_shape,
                        char *error, size_t error_size) {
  int32_t d, o = 0;
  for (d = 0; d < ndim; d++) {
    if (!(p->mask & (1u << d))) {
      out_shape[o++] = shape[d];
      continue;
    }
    if (shape[d] == 0 && (info->kind == REDUCE_MAX || info->kind == REDUCE_MIN)) {
      char text[DLOP_MAX_NDIM * 22 + 4];
      dlop_set_error(error, error_size,
                     "%s: cannot reduce an empty axis (axis %d of %s): %s has no identity",
                     info->name, (int)d, dlop_format_shape(shape, ndim, text, sizeof text),
                     info->name);
      return DLOP_SHAPE_ERROR;
    }
    if (p->keepdims) out_shape[o++] = 1;
  }
  *out_ndim = o;
  return DLOP_OK;
}

static int check_arity(const reduce_op_info *info, const dlop_node_args *args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: takes 1 input and gives 1 output, got %d inputs and %d outputs",
                   info->name, (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_TYPE_ERROR;
  }
  return DLOP_OK;
}

int reduce_make_node(const dlop_node_args *args) {
  const reduce_op_info *info = (const reduce_op_info *)args->op->op_data;
  const dlop_type *x;
  reduce_params p;
  int status = check_arity(info, args);
  if (status != DLOP_OK) return status;
  x = &args->inputs[0];
  if (x->dtype < 0 || x->dtype >= DLOP_DTYPE_COUNT || !(info->dtypes & DLOP_DTYPE_BIT(x->dtype))) {
    char supported[160];
    dlop_set_error(args->error, args->error_size, "%s: dtype %s is not supported (expected one of %s)",
                   info->name, dlop_dtype_name((dlop_dtype)x->dtype),
                   dlop_format_dtypes(info->dtypes, supported, sizeof supported));
    return DLOP_TYPE_ERROR;
  }
  status = reduce_parse_params(info, args->params, args->num_params, x->ndim, &p, args->error,
                               args->error_size);
  if (status != DLOP_OK) return status;
  args->outputs[0].dtype = reduce_output_dtype(info->kind, (dlop_dtype)x->dtype);
  return reduce_output_shape(info, &p, x->ndim, x->shape, &args->outputs[0].ndim,
                             args->outputs[0].shape, args->error, args->error_size);
}

int reduce_infer_shape(const dlop_node_args *args) {
  const reduce_op_info *info = (const reduce_op_info *)args->op->op_data;
  reduce_params p;
  int32_t ndim = 0;
  int status = check_arity(info, args);
  if (status != DLOP_OK) return status;
  status = reduce_parse_params(info, args->params, args->num_params, args->inputs[0].ndim, &p,
                               args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = reduce_output_shape(info, &p, args->inputs[0].ndim, args->inputs[0].shape, &ndim,
                               args->outputs[0].shape, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (ndim != args->outputs[0].ndim) {
    dlop_set_error(args->error, args->error_size,
                   "%s: the output has rank %d for this input, but make_node gave it rank %d",
                   info->name, (int)ndim, (int)args->outputs[0].ndim);
    return DLOP_SHAPE_ERROR;
  }
  return DLOP_OK;
}
