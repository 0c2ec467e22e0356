/* multiply_them_node.c — the multiply_them op's type rule (make_node) and shape rule
 * (infer_shape): two inputs of one declared dtype, the output has that dtype and their NumPy
 * broadcast shape. Both are pure. */
#include "multiply_them_plugin.h"

static int multiply_them_check_arity(const dlop_node_args *args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "multiply_them: takes 2 inputs and gives 1 output, got %d inputs and %d outputs",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_TYPE_ERROR;
  }
  return DLOP_OK;
}

int multiply_them_make_node(const dlop_node_args *args) {
  const dlop_type *a, *b;
  int status = multiply_them_check_arity(args);
  int i;
  if (status != DLOP_OK) return status;
  a = &args->inputs[0];
  b = &args->inputs[1];
  if (a->dtype != b->dtype) {
    dlop_set_error(args->error, args->error_size,
                   "multiply_them: inputs must have the same dtype, got %s and %s",
                   dlop_dtype_name((dlop_dtype)a->dtype), dlop_dtype_name((dlop_dtype)b->dtype));
    return DLOP_TYPE_ERROR;
  }
  for (i = 0; i < 2; i++) {
    const dlop_type *t = &args->inputs[i];
    if (t->dtype < 0 || t->dtype >= DLOP_DTYPE_COUNT ||
        !(MULTIPLY_THEM_DTYPES & DLOP_DTYPE_BIT(t->dtype))) {
      char supported[128];
      dlop_set_error(args->error, args->error_size,
                     "multiply_them: dtype %s is not supported (expected one of %s)",
                     dlop_dtype_name((dlop_dtype)t->dtype),
                     dlop_format_dtypes(MULTIPLY_THEM_DTYPES, supported, sizeof supported));
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim < 0 || t->ndim > DLOP_MAX_NDIM) {
      dlop_set_error(args->error, args->error_size,
                     "multiply_them: input %d has rank %d, expected 0 to %d", i, (int)t->ndim,
                     DLOP_MAX_NDIM);
      return DLOP_TYPE_ERROR;
    }
  }
  status = dlop_broadcast_types(a, b, &args->outputs[0], args->error, args->error_size);
  if (status != DLOP_OK) {
    /* prefix the op's name without losing broadcast's message */
    char message[512];
    snprintf(message, sizeof message, "%s", args->error ? args->error : "");
    dlop_set_error(args->error, args->error_size, "multiply_them: %s", message);
  }
  return status;
}

int multiply_them_infer_shape(const dlop_node_args *args) {
  dlop_type out;
  int status = multiply_them_check_arity(args);
  if (status != DLOP_OK) return status;
  status = dlop_broadcast_types(&args->inputs[0], &args->inputs[1], &out, args->error,
                                args->error_size);
  if (status != DLOP_OK) {
    char message[512];
    snprintf(message, sizeof message, "%s", args->error ? args->error : "");
    dlop_set_error(args->error, args->error_size, "multiply_them: %s", message);
    return status;
  }
  if (out.ndim != args->outputs[0].ndim) {
    dlop_set_error(args->error, args->error_size,
                   "multiply_them: inputs broadcast to rank %d but make_node gave the output rank %d",
                   (int)out.ndim, (int)args->outputs[0].ndim);
    return DLOP_SHAPE_ERROR;
  }
  memcpy(args->outputs[0].shape, out.shape, sizeof(int64_t) * (size_t)out.ndim);
  return DLOP_OK;
}
