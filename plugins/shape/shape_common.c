/* shape_common.c — what the shape plugin's ops share: the input check (one input of a known
 * dtype and a valid rank, one output) and the view's start. */
#include "shape_plugin.h"

int shape_check_input(const dlop_node_args *args) {
  const char *name = args->op->name;
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: takes 1 input and gives 1 output, got %d inputs and %d outputs", name,
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_TYPE_ERROR;
  }
  const dlop_type *x = &args->inputs[0];
  if (x->dtype < 0 || x->dtype >= DLOP_DTYPE_COUNT ||
      !(SHAPE_DTYPES & DLOP_DTYPE_BIT(x->dtype))) {
    dlop_set_error(args->error, args->error_size, "%s: dtype %d is not a dlop dtype", name,
                   (int)x->dtype);
    return DLOP_TYPE_ERROR;
  }
  if (x->ndim < 0 || x->ndim > DLOP_MAX_NDIM) {
    dlop_set_error(args->error, args->error_size, "%s: input has rank %d, expected 0 to %d", name,
                   (int)x->ndim, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  return DLOP_OK;
}

void shape_view_same_start(const dlop_view_args *args) {
  *args->output_byte_offset = args->input->byte_offset;
}
