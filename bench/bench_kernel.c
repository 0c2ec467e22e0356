/* bench_kernel.c — make_node / infer_shape / make_thunk for one op on preallocated tensors,
 * through the public op descriptor, as a host would call them. */
#include "bench_kernel.h"

#include <stdio.h>
#include <string.h>

static void type_from_tensor(const dlop_tensor *tensor, dlop_type *type) {
  int32_t i;
  memset(type, 0, sizeof(*type));
  type->dtype = dlop_tensor_dtype(tensor);
  type->ndim = tensor->ndim;
  for (i = 0; i < tensor->ndim && i < DLOP_MAX_NDIM; i++) type->shape[i] = tensor->shape[i];
}

int bench_op_supports(const char *op_name, dlop_device_type device, dlop_dtype dtype, char *why,
                      size_t why_size) {
  const dlop_op_desc *op = dlop_find_op(op_name);
  if (op == NULL) {
    snprintf(why, why_size, "op '%s' is not loaded: %s", op_name, dlop_last_error());
    return 0;
  }
  if ((dlop_op_dtypes(op, device) & DLOP_DTYPE_BIT(dtype)) == 0) {
    snprintf(why, why_size, "op '%s' does not declare %s on %s", op_name, dlop_dtype_name(dtype),
             device == DLOP_DEVICE_CUDA ? "cuda" : "cpu");
    return 0;
  }
  return 1;
}

int bench_kernel_prepare(bench_kernel *kernel, const char *op_name, dlop_device device,
                         const dlop_tensor *inputs, int32_t num_inputs,
                         const dlop_tensor *outputs, int32_t num_outputs, char *error,
                         size_t error_size) {
  const dlop_op_desc *op;
  dlop_node_args node;
  dlop_thunk_args thunk_args;
  int32_t i, d;
  int status;

  memset(kernel, 0, sizeof(*kernel));
  kernel->device = device;
  op = dlop_find_op(op_name);
  if (op == NULL) {
    snprintf(error, error_size, "op '%s' is not loaded: %s", op_name, dlop_last_error());
    return DLOP_NOT_FOUND;
  }
  kernel->op = op;
  if ((op->num_inputs != DLOP_VARIADIC && op->num_inputs != num_inputs) ||
      num_inputs > BENCH_MAX_INPUTS || op->num_outputs != num_outputs ||
      num_outputs > BENCH_MAX_OUTPUTS || op->num_params > BENCH_MAX_PARAMS) {
    snprintf(error, error_size,
             "op '%s' takes %d inputs, %d outputs and %d params; the bench passes %d inputs "
             "and %d outputs (at most %d, %d and %d)",
             op_name, op->num_inputs, op->num_outputs, op->num_params, num_inputs, num_outputs,
             BENCH_MAX_INPUTS, BENCH_MAX_OUTPUTS, BENCH_MAX_PARAMS);
    return DLOP_INVALID_ARGUMENT;
  }
  kernel->num_inputs = num_inputs;
  kernel->num_outputs = num_outputs;
  for (i = 0; i < op->num_params; i++) kernel->params[i] = op->params[i].default_value;
  for (i = 0; i < num_inputs; i++) type_from_tensor(&inputs[i], &kernel->inputs[i]);

  node = (dlop_node_args){.struct_size = sizeof(node), .op = op, .params = kernel->params,
                          .num_params = op->num_params,
                          .inputs = kernel->inputs, .num_inputs = num_inputs,
                          .outputs = kernel->outputs, .num_outputs = num_outputs,
                          .error = kernel->error, .error_size = sizeof(kernel->error)};
  status = op->make_node(&node);
  if (status != DLOP_OK) {
    snprintf(error, error_size, "%s.make_node failed (%s): %s", op_name, dlop_status_name(status),
             kernel->error);
    return status;
  }
  status = op->infer_shape(&node);
  if (status != DLOP_OK) {
    snprintf(error, error_size, "%s.infer_shape failed (%s): %s", op_name,
             dlop_status_name(status), kernel->error);
    return status;
  }
  for (i = 0; i < num_outputs; i++) {
    int same = kernel->outputs[i].ndim == outputs[i].ndim &&
               kernel->outputs[i].dtype == (int32_t)dlop_tensor_dtype(&outputs[i]);
    for (d = 0; same && d < outputs[i].ndim; d++) same = kernel->outputs[i].shape[d] == outputs[i].shape[d];
    if (!same) {
      snprintf(error, error_size,
               "%s: infer_shape gave output %d as %s rank %d (first dim %lld); the bench "
               "allocated %s rank %d (first dim %lld)",
               op_name, i, dlop_dtype_name((dlop_dtype)kernel->outputs[i].dtype),
               kernel->outputs[i].ndim, (long long)kernel->outputs[i].shape[0],
               dlop_dtype_name(dlop_tensor_dtype(&outputs[i])), outputs[i].ndim,
               outputs[i].ndim > 0 ? (long long)outputs[i].shape[0] : 0LL);
      return DLOP_SHAPE_ERROR;
    }
  }

  kernel->thunk.struct_size = sizeof(kernel->thunk);
  thunk_args = (dlop_thunk_args){.struct_size = sizeof(thunk_args), .op = op,
                                 .params = kernel->params, .num_params = op->num_params,
                                 .inputs = kernel->inputs, .num_inputs = num_inputs,
                                 .outputs = kernel->outputs, .num_outputs = num_outputs,
                                 .device = device, .thunk = &kernel->thunk,
                                 .error = kernel->error, .error_size = sizeof(kernel->error)};
  status = op->make_thunk(&thunk_args);
  if (status != DLOP_OK) {
    snprintf(error, error_size, "%s.make_thunk failed (%s): %s", op_name,
             dlop_status_name(status), kernel->error);
    return status;
  }
  kernel->have_thunk = 1;
  if (kernel->thunk.run == NULL) {
    snprintf(error, error_size, "%s.make_thunk returned a thunk with no run function", op_name);
    bench_kernel_release(kernel);
    return DLOP_INVALID_PLUGIN;
  }
  if (kernel->thunk.workspace_bytes > 0) {
    status = dlop_memory_alloc(device, kernel->thunk.workspace_bytes, NULL, &kernel->workspace);
    if (status != DLOP_OK) {
      snprintf(error, error_size, "%s: workspace of %zu bytes: %s", op_name,
               kernel->thunk.workspace_bytes, dlop_last_error());
      bench_kernel_release(kernel);
      return status;
    }
  }
  return DLOP_OK;
}

int bench_kernel_run(bench_kernel *kernel, const dlop_tensor *inputs, const dlop_tensor *outputs,
                     void *stream) {
  dlop_run_args run;
  memset(&run, 0, sizeof(run));
  run.struct_size = sizeof(run);
  run.inputs = inputs;
  run.num_inputs = kernel->num_inputs;
  run.outputs = outputs;
  run.num_outputs = kernel->num_outputs;
  run.stream = stream;
  run.workspace = kernel->workspace;
  run.workspace_bytes = kernel->thunk.workspace_bytes;
  run.error = kernel->error;
  run.error_size = sizeof(kernel->error);
  return kernel->thunk.run(kernel->thunk.state, &run);
}

void bench_kernel_release(bench_kernel *kernel) {
  if (kernel->workspace != NULL) dlop_memory_free(kernel->device, kernel->workspace, NULL);
  kernel->workspace = NULL;
  if (kernel->have_thunk && kernel->thunk.destroy != NULL) kernel->thunk.destroy(kernel->thunk.state);
  kernel->have_thunk = 0;
}
