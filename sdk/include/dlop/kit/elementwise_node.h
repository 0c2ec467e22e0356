/* dlop/kit/elementwise_node.h — the type rule (make_node) and shape rule (infer_shape) of an
 * elementwise op of one dtype, from its dlop_elementwise_spec: inputs of one dtype the op
 * declares, an output of that dtype and the inputs' NumPy broadcast shape. Both are pure. */
#ifndef DLOP_ELEMENTWISE_NODE_H
#define DLOP_ELEMENTWISE_NODE_H

#include <stdio.h>
#include <string.h>

#include "elementwise_thunk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "add: takes 2 inputs and gives 1 output, got 1 inputs and 1 outputs" (DLOP_TYPE_ERROR). */
static inline int dlop_elementwise_check_arity(const dlop_elementwise_spec *spec,
                                               const dlop_node_args *args) {
  if (args->num_inputs == spec->num_inputs && args->num_outputs == 1) return DLOP_OK;
  dlop_set_error(args->error, args->error_size,
                 "%s: takes %d input%s and gives 1 output, got %d inputs and %d outputs",
                 spec->op_name, (int)spec->num_inputs, spec->num_inputs == 1 ? "" : "s",
                 (int)args->num_inputs, (int)args->num_outputs);
  return DLOP_TYPE_ERROR;
}

/* The inputs' broadcast type into out (dtype and anything else from input 0; one input: its
 * own type). A mismatch keeps dlop_broadcast_shapes' message after the op's name. */
static inline int dlop_elementwise_broadcast(const dlop_elementwise_spec *spec,
                                             const dlop_node_args *args, dlop_type *out) {
  dlop_type folded;
  int32_t i;
  *out = args->inputs[0];
  for (i = 1; i < args->num_inputs; i++) {
    char message[512];
    int status = dlop_broadcast_types(out, &args->inputs[i], &folded, message, sizeof message);
    if (status != DLOP_OK) {
      dlop_set_error(args->error, args->error_size, "%s: %s", spec->op_name, message);
      return status;
    }
    *out = folded;
  }
  return DLOP_OK;
}

/* make_node: inputs of one dtype among cpu_dtypes | cuda_dtypes, ranks 0 to DLOP_MAX_NDIM;
 * the output has that dtype and the broadcast shape (broadcast 0, which suits one input: the
 * input's type). Unknown dims stay unknown until run time. */
static inline int dlop_elementwise_make_node(const dlop_elementwise_spec *spec,
                                             const dlop_node_args *args) {
  uint32_t dtypes = spec->cpu_dtypes | spec->cuda_dtypes;
  dlop_type out;
  int32_t i;
  int status = dlop_elementwise_check_arity(spec, args);
  if (status != DLOP_OK) return status;
  if (!spec->broadcast && spec->num_inputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: dlop_elementwise_make_node needs broadcast 1 for %d inputs",
                   spec->op_name, (int)spec->num_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  for (i = 1; i < args->num_inputs; i++) {
    if (args->inputs[i].dtype == args->inputs[0].dtype) continue;
    dlop_set_error(args->error, args->error_size, "%s: inputs must have the same dtype, got %s and %s",
                   spec->op_name, dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   dlop_dtype_name((dlop_dtype)args->inputs[i].dtype));
    return DLOP_TYPE_ERROR;
  }
  for (i = 0; i < args->num_inputs; i++) {
    const dlop_type *t = &args->inputs[i];
    if (t->dtype < 0 || t->dtype >= DLOP_DTYPE_COUNT || !(dtypes & DLOP_DTYPE_BIT(t->dtype))) {
      char supported[160];
      dlop_set_error(args->error, args->error_size, "%s: dtype %s is not supported (expected one of %s)",
                     spec->op_name, dlop_dtype_name((dlop_dtype)t->dtype),
                     dlop_format_dtypes(dtypes, supported, sizeof supported));
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim >= 0 && t->ndim <= DLOP_MAX_NDIM) continue;
    if (spec->broadcast)
      dlop_set_error(args->error, args->error_size, "%s: input %d has rank %d, expected 0 to %d",
                     spec->op_name, (int)i, (int)t->ndim, DLOP_MAX_NDIM);
    else
      dlop_set_error(args->error, args->error_size, "%s: input has rank %d, expected 0 to %d",
                     spec->op_name, (int)t->ndim, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  status = dlop_elementwise_broadcast(spec, args, &out);
  if (status == DLOP_OK) args->outputs[0] = out;
  return status;
}

/* infer_shape: the broadcast shape again. Called while the graph is built (dims may be
 * DLOP_DIM_UNKNOWN) and before runs (all dims known): the host allocates the output with it. */
static inline int dlop_elementwise_infer_shape(const dlop_elementwise_spec *spec,
                                               const dlop_node_args *args) {
  dlop_type out;
  int status = dlop_elementwise_check_arity(spec, args);
  if (status == DLOP_OK) status = dlop_elementwise_broadcast(spec, args, &out);
  if (status != DLOP_OK) return status;
  if (out.ndim != args->outputs[0].ndim) {
    if (spec->broadcast)
      dlop_set_error(args->error, args->error_size,
                     "%s: inputs broadcast to rank %d but make_node gave the output rank %d",
                     spec->op_name, (int)out.ndim, (int)args->outputs[0].ndim);
    else
      dlop_set_error(args->error, args->error_size,
                     "%s: input has rank %d but make_node gave the output rank %d",
                     spec->op_name, (int)out.ndim, (int)args->outputs[0].ndim);
    return DLOP_SHAPE_ERROR;
  }
  if (out.ndim > 0)
    memcpy(args->outputs[0].shape, out.shape, sizeof(int64_t) * (size_t)out.ndim);
  return DLOP_OK;
}

/* The op's stages when its descriptor's op_data is its spec: .make_node =
 * dlop_elementwise_op_make_node, .infer_shape = dlop_elementwise_op_infer_shape. */
static inline int dlop_elementwise_op_make_node(const dlop_node_args *args) {
  return dlop_elementwise_make_node((const dlop_elementwise_spec *)args->op->op_data, args);
}

static inline int dlop_elementwise_op_infer_shape(const dlop_node_args *args) {
  return dlop_elementwise_infer_shape((const dlop_elementwise_spec *)args->op->op_data, args);
}

#ifdef __cplusplus
}
#endif

#endif
