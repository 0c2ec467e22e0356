/* scale_add_node.c — the op's type rule (make_node) and shape rule (infer_shape): two inputs of
 * one declared dtype and a finite alpha; the output has that dtype and the inputs' broadcast
 * shape. Both are pure: they read their arguments and write only args->outputs and args->error. */
#include <math.h>
#include <string.h>

#include "scale_add.h"

static int scale_add_check_arity(const dlop_node_args *args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: takes 2 inputs (x, y) and gives 1 output, got %d inputs and %d outputs",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_TYPE_ERROR;
  }
  return DLOP_OK;
}

/* alpha as the host resolved it (the declared default when the caller gave none). */
static int scale_add_check_alpha(const dlop_node_args *args) {
  const dlop_param_value *alpha;
  if (args->params == NULL || args->num_params != 1 ||
      args->params[SCALE_ADD_PARAM_ALPHA].kind != DLOP_PARAM_FLOAT) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: expected 1 parameter, alpha (float), got %d", (int)args->num_params);
    return DLOP_INVALID_ARGUMENT;
  }
  alpha = &args->params[SCALE_ADD_PARAM_ALPHA];
  if (!isfinite(alpha->u.f)) {
    dlop_set_error(args->error, args->error_size, "scale_add: alpha must be finite, got %g",
                   alpha->u.f);
    return DLOP_INVALID_ARGUMENT;
  }
  return DLOP_OK;
}

/* Broadcasts x's and y's shapes into out; a mismatch keeps broadcast's message after the name. */
static int scale_add_broadcast(const dlop_node_args *args, dlop_type *out) {
  char message[256];
  int status = dlop_broadcast_types(&args->inputs[0], &args->inputs[1], out, message,
                                    sizeof message);
  if (status != DLOP_OK)
    dlop_set_error(args->error, args->error_size, "scale_add: x and y: %s", message);
  return status;
}

int scale_add_make_node(const dlop_node_args *args) {
  const dlop_type *x, *y;
  int status = scale_add_check_arity(args);
  int i;
  if (status == DLOP_OK) status = scale_add_check_alpha(args);
  if (status != DLOP_OK) return status;
  x = &args->inputs[0];
  y = &args->inputs[1];
  for (i = 0; i < 2; i++) {
    const dlop_type *t = &args->inputs[i];
    if (t->dtype < 0 || t->dtype >= DLOP_DTYPE_COUNT ||
        !(SCALE_ADD_DTYPES & DLOP_DTYPE_BIT(t->dtype))) {
      char supported[64];
      dlop_set_error(args->error, args->error_size,
                     "scale_add: %s has dtype %s, expected one of %s", i == 0 ? "x" : "y",
                     dlop_dtype_name((dlop_dtype)t->dtype),
                     dlop_format_dtypes(SCALE_ADD_DTYPES, supported, sizeof supported));
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim < 0 || t->ndim > DLOP_MAX_NDIM) {
      dlop_set_error(args->error, args->error_size, "scale_add: %s has rank %d, expected 0 to %d",
                     i == 0 ? "x" : "y", (int)t->ndim, DLOP_MAX_NDIM);
      return DLOP_TYPE_ERROR;
    }
  }
  if (x->dtype != y->dtype) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: x and y must have the same dtype, got %s and %s",
                   dlop_dtype_name((dlop_dtype)x->dtype), dlop_dtype_name((dlop_dtype)y->dtype));
    return DLOP_TYPE_ERROR;
  }
  /* dtype from x, shape from broadcasting; unknown dims stay unknown until run time */
  return scale_add_broadcast(args, &args->outputs[0]);
}

/* Called while the graph is built (dims may be DLOP_DIM_UNKNOWN) and before every run (all
 * dims known): the host allocates z with the shape written here before the thunk runs. */
int scale_add_infer_shape(const dlop_node_args *args) {
  dlop_type out;
  int status = scale_add_check_arity(args);
  if (status == DLOP_OK) status = scale_add_broadcast(args, &out);
  if (status != DLOP_OK) return status;
  if (out.ndim != args->outputs[0].ndim) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: x and y broadcast to rank %d, but make_node gave z rank %d",
                   (int)out.ndim, (int)args->outputs[0].ndim);
    return DLOP_SHAPE_ERROR;
  }
  memcpy(args->outputs[0].shape, out.shape, sizeof(int64_t) * (size_t)out.ndim);
  return DLOP_OK;
}
