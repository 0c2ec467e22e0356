/* shape_common.c — what the shape plugin's ops share: the input check (one input of a known
 * dtype and a valid rank, one output) and formatting of ints parameters for messages. */
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

const char *shape_format_ints(const dlop_param_value *value, char *buffer, size_t size) {
  size_t used = 0;
  buffer[0] = '\0';
  used += (size_t)snprintf(buffer, size, "(");
  for (int32_t i = 0; i < value->count && used < size; i++)
    used += (size_t)snprintf(buffer + used, size - used, "%s%lld", i ? ", " : "",
                             (long long)value->u.ints[i]);
  if (used < size) snprintf(buffer + used, size - used, value->count == 1 ? ",)" : ")");
  buffer[size - 1] = '\0';
  return buffer;
}

void shape_view_same_start(const dlop_view_args *args) {
  *args->output_byte_offset = args->input->byte_offset;
}
