/* multiply_them_thunk.c — make_thunk for multiply_them: on the CPU a thunk that runs the C kernel; on CUDA
 * one that loads the embedded fatbin once (per thunk), picks the dtype's kernels and launches
 * them on the host's stream. */
#include <stdlib.h>

#include "multiply_them_plugin.h"

#if DLOP_HAVE_CUDA_KERNELS
extern const unsigned char dlop_multiply_them_multiply_them_cuda_fatbin[] __attribute__((visibility("hidden")));
#endif

typedef struct multiply_them_thunk_state {
  dlop_type inputs[2];
  dlop_type output;
  dlop_device device;
  void *module;                  /* CUDA only */
  dlop_cuda_elementwise kernels; /* CUDA only: CUfunctions and launch sizes */
} multiply_them_thunk_state;

static void multiply_them_thunk_destroy(void *state) {
  multiply_them_thunk_state *s = (multiply_them_thunk_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(multiply_them_host(), cuda_module_unload))
    multiply_them_host()->cuda_module_unload(s->module);
  free(s);
}

/* Checks shared by both devices; on success the loop is set up (z first, then a and b). */
static int multiply_them_prepare(const multiply_them_thunk_state *s, const dlop_run_args *args,
                          dlop_strided_loop *loop) {
  int status;
  char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  dlop_type broadcast;
  memset(&broadcast, 0, sizeof broadcast);
  if (args->num_inputs != 2 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "multiply_them: run with %d inputs and %d outputs, expected 2 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors("multiply_them", "input", args->inputs, 2, s->inputs, s->device.type,
                              args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors("multiply_them", "output", args->outputs, 1, &s->output, s->device.type,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  /* the output must be exactly the broadcast shape: anything else is a caller's bug */
  status = dlop_broadcast_shapes(args->inputs[0].shape, args->inputs[0].ndim, args->inputs[1].shape,
                                 args->inputs[1].ndim, broadcast.shape, &broadcast.ndim,
                                 args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (broadcast.ndim != args->outputs[0].ndim ||
      memcmp(broadcast.shape, args->outputs[0].shape, sizeof(int64_t) * (size_t)broadcast.ndim) != 0) {
    dlop_set_error(args->error, args->error_size,
                   "multiply_them: output shape %s differs from the inputs' broadcast shape %s",
                   dlop_format_shape(args->outputs[0].shape, args->outputs[0].ndim, got, sizeof got),
                   dlop_format_shape(broadcast.shape, broadcast.ndim, want, sizeof want));
    return DLOP_SHAPE_ERROR;
  }
  return dlop_strided_loop_init(loop, &args->outputs[0], args->inputs, 2, "multiply_them", args->error,
                                args->error_size);
}

static int multiply_them_run_cpu(void *state, const dlop_run_args *args) {
  const multiply_them_thunk_state *s = (const multiply_them_thunk_state *)state;
  dlop_strided_loop loop;
  int status = multiply_them_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return multiply_them_cpu_run(&loop, (dlop_dtype)s->inputs[0].dtype, args->error, args->error_size);
}

static int multiply_them_run_cuda(void *state, const dlop_run_args *args) {
  const multiply_them_thunk_state *s = (const multiply_them_thunk_state *)state;
  dlop_strided_loop loop;
  int status = multiply_them_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return dlop_cuda_launch_elementwise(multiply_them_host(), &loop, &s->kernels, args->stream,
                                      "multiply_them", args->error, args->error_size);
}

static int multiply_them_prepare_cuda(multiply_them_thunk_state *s, const dlop_thunk_args *args) {
#if DLOP_HAVE_CUDA_KERNELS
  const dlop_host_api *host = multiply_them_host();
  const char *dtype = dlop_dtype_name((dlop_dtype)s->inputs[0].dtype);
  char name[96];
  int status;
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function)) {
    dlop_set_error(args->error, args->error_size, "multiply_them: the host offers no CUDA module loading");
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->kernels.max_blocks, "multiply_them",
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, dlop_multiply_them_multiply_them_cuda_fatbin, &s->module,
                                  args->error, args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_multiply_them_contiguous_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.contiguous, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_multiply_them_rows_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.rows, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_multiply_them_strided_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.strided, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  s->kernels.contiguous_elements = (int32_t)(16 / dlop_dtype_size((dlop_dtype)s->inputs[0].dtype));
  return DLOP_OK;
#else
  dlop_set_error(args->error, args->error_size,
                 "multiply_them: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)");
  return DLOP_UNSUPPORTED;
#endif
}

int multiply_them_make_thunk(const dlop_thunk_args *args) {
  multiply_them_thunk_state *s;
  uint32_t dtypes;
  int status = DLOP_OK;
  if (args->num_inputs != 2 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "multiply_them: make_thunk with %d inputs and %d outputs, expected 2 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type == DLOP_DEVICE_CPU) dtypes = MULTIPLY_THEM_DTYPES;
  else if (args->device.type == DLOP_DEVICE_CUDA) dtypes = MULTIPLY_THEM_DTYPES;
  else {
    dlop_set_error(args->error, args->error_size, "multiply_them: device type %d is not supported (cpu or cuda)",
                   (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  if (args->inputs[0].dtype < 0 || args->inputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(dtypes & DLOP_DTYPE_BIT(args->inputs[0].dtype)) || args->inputs[1].dtype != args->inputs[0].dtype ||
      args->outputs[0].dtype != args->inputs[0].dtype) {
    dlop_set_error(args->error, args->error_size, "multiply_them: no kernel for input dtypes %s and %s and output dtype %s",
                   dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   dlop_dtype_name((dlop_dtype)args->inputs[1].dtype),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
    return DLOP_UNSUPPORTED;
  }
  s = (multiply_them_thunk_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "multiply_them: out of memory for the thunk state");
    return DLOP_OUT_OF_MEMORY;
  }
  s->inputs[0] = args->inputs[0];
  s->inputs[1] = args->inputs[1];
  s->output = args->outputs[0];
  s->device = args->device;
  if (args->device.type == DLOP_DEVICE_CUDA) status = multiply_them_prepare_cuda(s, args);
  if (status != DLOP_OK) {
    multiply_them_thunk_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? multiply_them_run_cuda : multiply_them_run_cpu;
  args->thunk->destroy = multiply_them_thunk_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}
