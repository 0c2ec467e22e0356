/* check_node.c — calling an op's make_node and infer_shape the way a host does (struct_size
 * set, the declared parameter defaults, an error buffer), and the shapes the checks walk. */
#include <string.h>

#include "check_suite.h"

/* 0-d, empty, one element, odd sizes of ranks 1..4, and (last) a large odd size. */
const check_shape check_shapes[] = {
    {0, {0}},        {1, {0}},       {1, {1}},          {1, {7}},     {3, {3, 0, 5}},
    {2, {5, 3}},     {3, {2, 3, 5}}, {4, {2, 1, 3, 4}}, {1, {1048579}},
};
const int check_shape_count = (int)(sizeof check_shapes / sizeof check_shapes[0]);

int32_t check_num_inputs(const dlop_op_desc *op) {
  return op->num_inputs == DLOP_VARIADIC ? 2 : op->num_inputs;
}

const dlop_param_value *check_default_params(const dlop_op_desc *op) {
  static dlop_param_value values[64];
  for (int32_t i = 0; i < op->num_params && i < 64; i++) values[i] = op->params[i].default_value;
  return op->num_params > 0 ? values : NULL;
}

static dlop_node_args node_args(const dlop_op_desc *op, const dlop_type *inputs,
                                int32_t num_inputs, dlop_type *outputs, char *error,
                                size_t error_size) {
  dlop_node_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.op = op;
  args.params = check_default_params(op);
  args.num_params = op->num_params;
  args.num_inputs = num_inputs;
  args.inputs = inputs;
  args.outputs = outputs;
  args.num_outputs = op->num_outputs;
  args.error = error;
  args.error_size = error_size;
  error[0] = '\0';
  return args;
}

int check_call_make_node(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                         dlop_type *outputs, char *error, size_t error_size) {
  /* The host zeroes the outputs before make_node. */
  memset(outputs, 0, sizeof(dlop_type) * (size_t)op->num_outputs);
  dlop_node_args args = node_args(op, inputs, num_inputs, outputs, error, error_size);
  return op->make_node(&args);
}

int check_call_infer_shape(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                           dlop_type *outputs, char *error, size_t error_size) {
  dlop_node_args args = node_args(op, inputs, num_inputs, outputs, error, error_size);
  return op->infer_shape(&args);
}

dlop_type check_type(int dtype, int32_t ndim, const int64_t *dims, int unknown) {
  dlop_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) t.shape[d] = unknown ? DLOP_DIM_UNKNOWN : dims[d];
  return t;
}
