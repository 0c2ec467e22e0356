/* blas_thunk.c — make_thunk of dot, matmul and gemm: checks the types and the device, reads the
 * parameters once, and prepares the device's backend (the CPU's CBLAS library, or cuBLAS
 * functions and the copy kernels on CUDA). The run itself is blas_run (blas_run.c). */
#include <stdlib.h>

#include "blas_dot_plan.h"
#include "blas_plugin.h"

static void blas_destroy(void *state) {
  blas_thunk_state *s = (blas_thunk_state *)state;
  if (s == NULL) return;
  blas_cuda_release(s);
  free(s);
}

int blas_make_thunk(const dlop_thunk_args *args) {
  const blas_op_info *info = (const blas_op_info *)args->op->op_data;
  int32_t expected_inputs = info->kind == BLAS_GEMM ? 3 : 2;
  uint32_t dtypes;
  int status;
  if (args->num_inputs != expected_inputs || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: make_thunk with %d inputs and %d outputs, expected %d and 1", info->name,
                   (int)args->num_inputs, (int)args->num_outputs, (int)expected_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type == DLOP_DEVICE_CPU) dtypes = BLAS_CPU_DTYPES;
  else if (args->device.type == DLOP_DEVICE_CUDA) dtypes = BLAS_CUDA_DTYPES;
  else {
    dlop_set_error(args->error, args->error_size, "%s: device type %d is not supported (cpu or cuda)",
                   info->name, (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  for (int32_t i = 0; i < args->num_inputs; i++) {
    int32_t dtype = args->inputs[i].dtype;
    if (dtype != args->inputs[0].dtype || dtype != args->outputs[0].dtype ||
        dtype < 0 || dtype >= DLOP_DTYPE_COUNT || !(dtypes & DLOP_DTYPE_BIT(dtype))) {
      char supported[128];
      dlop_set_error(args->error, args->error_size,
                     "%s: no %s kernel for input %d of dtype %s with output dtype %s (the %s "
                     "dtypes are %s, one for all inputs and the output)",
                     info->name, args->device.type == DLOP_DEVICE_CPU ? "CPU" : "CUDA", (int)i,
                     dlop_dtype_name((dlop_dtype)dtype),
                     dlop_dtype_name((dlop_dtype)args->outputs[0].dtype),
                     args->device.type == DLOP_DEVICE_CPU ? "CPU" : "CUDA",
                     dlop_format_dtypes(dtypes, supported, sizeof supported));
      return DLOP_UNSUPPORTED;
    }
  }
  blas_thunk_state *s = (blas_thunk_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: out of memory for the thunk state",
                   info->name);
    return DLOP_OUT_OF_MEMORY;
  }
  s->info = info;
  s->host = blas_host();
  s->params = blas_read_params(info, args->params, args->num_params);
  s->num_inputs = args->num_inputs;
  for (int32_t i = 0; i < args->num_inputs; i++) s->inputs[i] = args->inputs[i];
  s->output = args->outputs[0];
  s->device = args->device;
  if (!DLOP_HOST_HAS(s->host, memory_alloc) || !DLOP_HOST_HAS(s->host, memory_free)) {
    dlop_set_error(args->error, args->error_size, "%s: the host offers no memory_alloc/memory_free",
                   info->name);
    status = DLOP_UNSUPPORTED;
  } else if (args->device.type == DLOP_DEVICE_CPU) {
    status = blas_cpu_prepare(s, args);
  } else {
    status = blas_cuda_prepare(s, args);
  }
  if (status != DLOP_OK) {
    blas_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = blas_run;
  args->thunk->destroy = blas_destroy;
  /* CUDA: the partials of a dot (blas_cuda_dot.c), fixed so that nothing is allocated per run */
  args->thunk->workspace_bytes = args->device.type == DLOP_DEVICE_CUDA ? BLAS_DOT_WORKSPACE_BYTES : 0;
  return DLOP_OK;
}
