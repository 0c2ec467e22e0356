/* bench_kernel.h — drive one registered op the way a host does, without the graph: make_node,
 * infer_shape and make_thunk once, then thunk.run on tensors the bench preallocated. This is
 * what isolates kernel throughput from per-call overhead (allocation, scheduling). */
#ifndef DLOP_BENCH_KERNEL_H
#define DLOP_BENCH_KERNEL_H

#include <stddef.h>

#include "dlop.h"

#define BENCH_MAX_INPUTS 4
#define BENCH_MAX_OUTPUTS 2
#define BENCH_MAX_PARAMS 16

typedef struct bench_kernel {
  const dlop_op_desc *op;
  dlop_device device;
  dlop_param_value params[BENCH_MAX_PARAMS];
  int32_t num_inputs;
  int32_t num_outputs;
  dlop_type inputs[BENCH_MAX_INPUTS];
  dlop_type outputs[BENCH_MAX_OUTPUTS];
  dlop_thunk thunk;
  int have_thunk;
  void *workspace; /* thunk.workspace_bytes on device, owned here */
  char error[512]; /* the plugin writes its messages here */
} bench_kernel;

/* Prepare op_name for these concrete input tensors on device, with every parameter at its
 * declared default. Checks that infer_shape's output shapes equal those of outputs[]. On
 * failure returns a status and writes a message into error. */
int bench_kernel_prepare(bench_kernel *kernel, const char *op_name, dlop_device device,
                         const dlop_tensor *inputs, int32_t num_inputs,
                         const dlop_tensor *outputs, int32_t num_outputs, char *error,
                         size_t error_size);

/* One thunk.run on the prepared tensors (stream: CUstream on CUDA, NULL on the CPU). */
int bench_kernel_run(bench_kernel *kernel, const dlop_tensor *inputs, const dlop_tensor *outputs,
                     void *stream);

void bench_kernel_release(bench_kernel *kernel);

/* Whether op_name is loaded and declares dtype on the device type; writes why not. */
int bench_op_supports(const char *op_name, dlop_device_type device, dlop_dtype dtype, char *why,
                      size_t why_size);

#endif
