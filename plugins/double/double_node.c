/* double_node.c — the double op's type rule (make_node) and shape rule (infer_shape): one
 * input of a declared dtype, one output of the same dtype and shape. Both are pure. */
#include "double_plugin.h"

static int double_check_arity(const dlop_node_args *args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "double: takes 1 input and gives 1 output, got %d inputs and %d outputs",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_TYPE_ERROR;
  }
  return DLOP_OK;
}

int double_make_node(const dlop_node_args *args) {
  const dlop_type *x;
  int status = double_check_arity(args);
  if (status != DLOP_OK) return status;
  x = &args->inputs[0];
  if (x->dtype < 0 || x->dtype >= DLOP_DTYPE_COUNT || !(DOUBLE_DTYPES & DLOP_DTYPE_BIT(x->dtype))) {
    char supported[128];
    dlop_set_error(args->error, args->error_size, "double: dtype %s is not supported (expected one of %s)",
                   dlop_dtype_name((dlop_dtype)x->dtype),
                   dlop_format_dtypes(DOUBLE_DTYPES, supported, sizeof supported));
    return DLOP_TYPE_ERROR;
  }
  if (x->ndim < 0 || x->ndim > DLOP_MAX_NDIM) {
    dlop_set_error(args->error, args->error_size, "double: input has rank %d, expected 0 to %d",
                   (int)x->ndim, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  args->outputs[0] = *x;
  return DLOP_OK;
}

int double_infer_shape(const dlop_node_args *args) {
  int32_t d;
  int status = double_check_arity(args);
  if (status != DLOP_OK) return status;
  if (args->inputs[0].ndim != args->outputs[0].ndim) {
    dlop_set_error(args->error, args->error_size,
                   "double: input has rank %d but make_node gave the output rank %d",
                   (int)args->inputs[0].ndim, (int)args->outputs[0].ndim);
    return DLOP_SHAPE_ERROR;
  }
  for (d = 0; d < args->inputs[0].ndim; d++) args->outputs[0].shape[d] = args->inputs[0].shape[d];
  return DLOP_OK;
}
