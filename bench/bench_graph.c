/* bench_graph.c — build, compile and call a one-node graph through the public C graph API. */
#include "bench_graph.h"

#include <stdio.h>

int bench_function_prepare(const char *op_name, dlop_device device, dlop_array *const *inputs,
                           int32_t num_inputs, dlop_function **function, char *error,
                           size_t error_size) {
  dlop_graph *graph = NULL;
  dlop_var *vars[4], *output = NULL;
  char name[16];
  int32_t i;
  int status;

  *function = NULL;
  if (num_inputs > 4) {
    snprintf(error, error_size, "bench_function_prepare: %d inputs, at most 4", num_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_graph_create(&graph);
  if (status != DLOP_OK) goto fail;
  for (i = 0; i < num_inputs; i++) {
    const dlop_tensor *t = dlop_array_tensor(inputs[i]);
    snprintf(name, sizeof(name), "in%d", i);
    status = dlop_graph_input(graph, name, dlop_array_dtype(inputs[i]), t->ndim, t->shape, &vars[i]);
    if (status != DLOP_OK) goto fail;
  }
  status = dlop_graph_apply(graph, op_name, vars, num_inputs, NULL, 0, &output, 1);
  if (status != DLOP_OK) goto fail;
  status = dlop_function_compile(graph, vars, num_inputs, &output, 1, device, function);
  if (status != DLOP_OK) goto fail;
  dlop_graph_destroy(graph);
  return DLOP_OK;
fail:
  snprintf(error, error_size, "graph of %s: %s: %s", op_name, dlop_status_name(status),
           dlop_last_error());
  if (graph != NULL) dlop_graph_destroy(graph);
  return status;
}

int bench_function_call(dlop_function *function, dlop_array *const *inputs, int32_t num_inputs,
                        dlop_stream *stream, dlop_array **output, char *error, size_t error_size) {
  int status;
  *output = NULL;
  status = dlop_function_run(function, inputs, num_inputs, output, 1, stream);
  if (status != DLOP_OK)
    snprintf(error, error_size, "dlop_function_run: %s: %s", dlop_status_name(status),
             dlop_last_error());
  return status;
}
