/* double_thunk.c — make_thunk for double: on the CPU a thunk that runs the C kernel; on CUDA
 * one that loads the embedded fatbin once (per thunk), picks the dtype's kernels and launches
 * them on the host's stream. */
#include <stdlib.h>

#include "double_plugin.h"

#if DLOP_HAVE_CUDA_KERNELS
extern const unsigned char dlop_double_double_cuda_fatbin[] __attribute__((visibility("hidden")));
#endif

typedef struct double_thunk_state {
  dlop_type input;
  dlop_type output;
  dlop_device device;
  void *module;                  /* CUDA only */
  dlop_cuda_elementwise kernels; /* CUDA only: CUfunctions and launch sizes */
} double_thunk_state;

static void double_thunk_destroy(void *state) {
  double_thunk_state *s = (double_thunk_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(double_host(), cuda_module_unload))
    double_host()->cuda_module_unload(s->module);
  free(s);
}

/* Checks shared by both devices; on success the loop is set up (output first, input second). */
static int double_prepare(const double_thunk_state *s, const dlop_run_args *args,
                          dlop_strided_loop *loop) {
  int status;
  char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "double: run with %d inputs and %d outputs, expected 1 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors("double", "input", args->inputs, 1, &s->input, s->device.type,
                              args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors("double", "output", args->outputs, 1, &s->output, s->device.type,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (memcmp(args->inputs[0].shape, args->outputs[0].shape,
             sizeof(int64_t) * (size_t)args->inputs[0].ndim) != 0) {
    dlop_set_error(args->error, args->error_size, "double: output shape %s differs from input shape %s",
                   dlop_format_shape(args->outputs[0].shape, args->outputs[0].ndim, got, sizeof got),
                   dlop_format_shape(args->inputs[0].shape, args->inputs[0].ndim, want, sizeof want));
    return DLOP_SHAPE_ERROR;
  }
  return dlop_strided_loop_init(loop, &args->outputs[0], args->inputs, 1, "double", args->error,
                                args->error_size);
}

static int double_run_cpu(void *state, const dlop_run_args *args) {
  const double_thunk_state *s = (const double_thunk_state *)state;
  dlop_strided_loop loop;
  int status = double_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return double_cpu_run(&loop, (dlop_dtype)s->input.dtype, args->error, args->error_size);
}

static int double_run_cuda(void *state, const dlop_run_args *args) {
  const double_thunk_state *s = (const double_thunk_state *)state;
  dlop_strided_loop loop;
  int status = double_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return dlop_cuda_launch_elementwise(double_host(), &loop, &s->kernels, args->stream,
                                      "double", args->error, args->error_size);
}

static int double_prepare_cuda(double_thunk_state *s, const dlop_thunk_args *args) {
#if DLOP_HAVE_CUDA_KERNELS
  const dlop_host_api *host = double_host();
  const char *dtype = dlop_dtype_name((dlop_dtype)s->input.dtype);
  char name[96];
  int status;
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function)) {
    dlop_set_error(args->error, args->error_size, "double: the host offers no CUDA module loading");
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->kernels.max_blocks, "double",
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, dlop_double_double_cuda_fatbin, &s->module,
                                  args->error, args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_double_contiguous_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.contiguous, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_double_rows_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.rows, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_double_strided_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.strided, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  s->kernels.contiguous_elements = (int32_t)(16 / dlop_dtype_size((dlop_dtype)s->input.dtype));
  return DLOP_OK;
#else
  dlop_set_error(args->error, args->error_size,
                 "double: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)");
  return DLOP_UNSUPPORTED;
#endif
}

int double_make_thunk(const dlop_thunk_args *args) {
  double_thunk_state *s;
  uint32_t dtypes;
  int status = DLOP_OK;
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "double: make_thunk with %d inputs and %d outputs, expected 1 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type == DLOP_DEVICE_CPU) dtypes = DOUBLE_DTYPES;
  else if (args->device.type == DLOP_DEVICE_CUDA) dtypes = DOUBLE_DTYPES;
  else {
    dlop_set_error(args->error, args->error_size, "double: device type %d is not supported (cpu or cuda)",
                   (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  if (args->inputs[0].dtype < 0 || args->inputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(dtypes & DLOP_DTYPE_BIT(args->inputs[0].dtype)) || args->outputs[0].dtype != args->inputs[0].dtype) {
    dlop_set_error(args->error, args->error_size, "double: no kernel for input dtype %s and output dtype %s",
                   dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
    return DLOP_UNSUPPORTED;
  }
  s = (double_thunk_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "double: out of memory for the thunk state");
    return DLOP_OUT_OF_MEMORY;
  }
  s->input = args->inputs[0];
  s->output = args->outputs[0];
  s->device = args->device;
  if (args->device.type == DLOP_DEVICE_CUDA) status = double_prepare_cuda(s, args);
  if (status != DLOP_OK) {
    double_thunk_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? double_run_cuda : double_run_cpu;
  args->thunk->destroy = double_thunk_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}
