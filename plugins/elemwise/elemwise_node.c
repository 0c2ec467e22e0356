/* elemwise_node.c — the type rule (make_node) of every elemwise op: inputs of one dtype the op
 * accepts (where: a bool condition and two values of one dtype; cast: any dtype and the dtype
 * parameter), NumPy broadcasting of the shapes (the kit's, as is the shape rule). Pure. */
#include "elemwise_plugin.h"

static const elemwise_op_info *info_of(const dlop_node_args *args) {
  return (const elemwise_op_info *)args->op->op_data;
}

dlop_dtype elemwise_dtype_from_name(const char *name) {
  int i;
  if (name == NULL) return DLOP_DTYPE_INVALID;
  for (i = 0; i < DLOP_DTYPE_COUNT; i++)
    if (strcmp(name, dlop_dtype_name((dlop_dtype)i)) == 0) return (dlop_dtype)i;
  return DLOP_DTYPE_INVALID;
}

dlop_dtype elemwise_bit_copy_dtype(dlop_dtype dtype) {
  switch (dlop_dtype_size(dtype)) {
    case 1: return DLOP_UINT8;
    case 2: return DLOP_INT16;
    case 4: return DLOP_INT32;
    default: return DLOP_INT64;
  }
}

/* The output dtype given the inputs', or an error naming the problem. */
static int output_dtype(const dlop_node_args *args, const elemwise_op_info *info, int32_t *dtype) {
  const char *name = info->spec.op_name;
  int32_t first = info->kind == EW_KIND_WHERE ? 1 : 0, i;
  char supported[160];
  for (i = 0; i < args->num_inputs; i++) {
    if (args->inputs[i].ndim < 0 || args->inputs[i].ndim > DLOP_MAX_NDIM) {
      dlop_set_error(args->error, args->error_size, "%s: input %d has rank %d, expected 0 to %d",
                     name, (int)i, (int)args->inputs[i].ndim, DLOP_MAX_NDIM);
      return DLOP_TYPE_ERROR;
    }
  }
  if (info->kind == EW_KIND_WHERE && args->inputs[0].dtype != DLOP_BOOL) {
    dlop_set_error(args->error, args->error_size,
                   "where: the condition (input 0) must be bool, got %s (compare, or cast it to bool)",
                   dlop_dtype_name((dlop_dtype)args->inputs[0].dtype));
    return DLOP_TYPE_ERROR;
  }
  if (args->num_inputs - first == 2 && args->inputs[first].dtype != args->inputs[first + 1].dtype) {
    dlop_set_error(args->error, args->error_size,
                   "%s: input dtypes %s and %s differ; cast one (the Python operators promote for you)",
                   name, dlop_dtype_name((dlop_dtype)args->inputs[first].dtype),
                   dlop_dtype_name((dlop_dtype)args->inputs[first + 1].dtype));
    return DLOP_TYPE_ERROR;
  }
  if (!(info->spec.cpu_dtypes & DLOP_DTYPE_BIT(args->inputs[first].dtype))) {
    dlop_set_error(args->error, args->error_size, "%s: dtype %s is not supported (expected one of %s)",
                   name, dlop_dtype_name((dlop_dtype)args->inputs[first].dtype),
                   dlop_format_dtypes(info->spec.cpu_dtypes, supported, sizeof supported));
    return DLOP_TYPE_ERROR;
  }
  switch (info->kind) {
    case EW_KIND_COMPARE: *dtype = DLOP_BOOL; return DLOP_OK;
    case EW_KIND_CAST: {
      const dlop_param_value *p = args->num_params >= 1 && args->params ? &args->params[0] : NULL;
      dlop_dtype to;
      if (p == NULL || p->kind != DLOP_PARAM_STRING) {
        dlop_set_error(args->error, args->error_size,
                       "cast: the dtype parameter must be a string (a dtype name)");
        return DLOP_TYPE_ERROR;
      }
      to = elemwise_dtype_from_name(p->u.s);
      if (to == DLOP_DTYPE_INVALID) {
        dlop_set_error(args->error, args->error_size,
                       "cast: unknown dtype '%s' (expected one of %s)", p->u.s ? p->u.s : "(null)",
                       dlop_format_dtypes(DLOP_DTYPES_ALL, supported, sizeof supported));
        return DLOP_TYPE_ERROR;
      }
      *dtype = to;
      return DLOP_OK;
    }
    default: *dtype = args->inputs[first].dtype; return DLOP_OK;
  }
}

int elemwise_make_node(const dlop_node_args *args) {
  const elemwise_op_info *info = info_of(args);
  dlop_type out;
  int32_t dtype = 0;
  int status = dlop_elementwise_check_arity(&info->spec, args);
  if (status == DLOP_OK) status = output_dtype(args, info, &dtype);
  if (status == DLOP_OK) status = dlop_elementwise_broadcast(&info->spec, args, &out);
  if (status != DLOP_OK) return status;
  out.dtype = dtype;
  args->outputs[0] = out;
  return DLOP_OK;
}
