/* exp_thunk.c — make_thunk for exp: on the CPU a thunk that runs the C kernel; on CUDA
 * one that loads the embedded fatbin once (per thunk), picks the dtype's kernels and launches
 * them on the host's stream. */
#include <stdlib.h>

#include "exp_plugin.h"

#if DLOP_HAVE_CUDA_KERNELS
extern const unsigned char dlop_exp_exp_cuda_fatbin[] __attribute__((visibility("hidden")));
#endif

typedef struct exp_thunk_state {
  dlop_type input;
  dlop_type output;
  dlop_device device;
  void *module;                  /* CUDA only */
  dlop_cuda_elementwise kernels; /* CUDA only: CUfunctions and launch sizes */
} exp_thunk_state;

static void exp_thunk_destroy(void *state) {
  exp_thunk_state *s = (exp_thunk_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(exp_host(), cuda_module_unload))
    exp_host()->cuda_module_unload(s->module);
  free(s);
}

/* Checks shared by both devices; on success the loop is set up (output first, input second). */
static int exp_prepare(const exp_thunk_state *s, const dlop_run_args *args,
                          dlop_strided_loop *loop) {
  int status;
  char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "exp: run with %d inputs and %d outputs, expected 1 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors("exp", "input", args->inputs, 1, &s->input, s->device.type,
                              args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors("exp", "output", args->outputs, 1, &s->output, s->device.type,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (memcmp(args->inputs[0].shape, args->outputs[0].shape,
             sizeof(int64_t) * (size_t)args->inputs[0].ndim) != 0) {
    dlop_set_error(args->error, args->error_size, "exp: output shape %s differs from input shape %s",
                   dlop_format_shape(args->outputs[0].shape, args->outputs[0].ndim, got, sizeof got),
                   dlop_format_shape(args->inputs[0].shape, args->inputs[0].ndim, want, sizeof want));
    return DLOP_SHAPE_ERROR;
  }
  return dlop_strided_loop_init(loop, &args->outputs[0], args->inputs, 1, "exp", args->error,
                                args->error_size);
}

static int exp_run_cpu(void *state, const dlop_run_args *args) {
  const exp_thunk_state *s = (const exp_thunk_state *)state;
  dlop_strided_loop loop;
  int status = exp_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return exp_cpu_run(&loop, (dlop_dtype)s->input.dtype, args->error, args->error_size);
}

static int exp_run_cuda(void *state, const dlop_run_args *args) {
  const exp_thunk_state *s = (const exp_thunk_state *)state;
  dlop_strided_loop loop;
  int status = exp_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return dlop_cuda_launch_elementwise(exp_host(), &loop, &s->kernels, args->stream,
                                      "exp", args->error, args->error_size);
}

static int exp_prepare_cuda(exp_thunk_state *s, const dlop_thunk_args *args) {
#if DLOP_HAVE_CUDA_KERNELS
  const dlop_host_api *host = exp_host();
  const char *dtype = dlop_dtype_name((dlop_dtype)s->input.dtype);
  char name[96];
  int status;
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function)) {
    dlop_set_error(args->error, args->error_size, "exp: the host offers no CUDA module loading");
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->kernels.max_blocks, "exp",
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, dlop_exp_exp_cuda_fatbin, &s->module,
                                  args->error, args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_exp_contiguous_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.contiguous, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_exp_rows_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.rows, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "dlop_exp_strided_%s", dtype);
  status = host->cuda_module_function(s->module, name, &s->kernels.strided, args->error,
                                      args->error_size);
  if (status != DLOP_OK) return status;
  /* two 16-byte vectors per thread: EXP_CUDA_UNROLL in exp_cuda.cu */
  s->kernels.contiguous_elements = (int32_t)(2 * 16 / dlop_dtype_size((dlop_dtype)s->input.dtype));
  return DLOP_OK;
#else
  dlop_set_error(args->error, args->error_size,
                 "exp: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)");
  return DLOP_UNSUPPORTED;
#endif
}

int exp_make_thunk(const dlop_thunk_args *args) {
  exp_thunk_state *s;
  uint32_t dtypes;
  int status = DLOP_OK;
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "exp: make_thunk with %d inputs and %d outputs, expected 1 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type == DLOP_DEVICE_CPU) dtypes = EXP_DTYPES;
  else if (args->device.type == DLOP_DEVICE_CUDA) dtypes = EXP_DTYPES;
  else {
    dlop_set_error(args->error, args->error_size, "exp: device type %d is not supported (cpu or cuda)",
                   (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  if (args->inputs[0].dtype < 0 || args->inputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(dtypes & DLOP_DTYPE_BIT(args->inputs[0].dtype)) || args->outputs[0].dtype != args->inputs[0].dtype) {
    dlop_set_error(args->error, args->error_size, "exp: no kernel for input dtype %s and output dtype %s",
                   dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
    return DLOP_UNSUPPORTED;
  }
  s = (exp_thunk_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "exp: out of memory for the thunk state");
    return DLOP_OUT_OF_MEMORY;
  }
  s->input = args->inputs[0];
  s->output = args->outputs[0];
  s->device = args->device;
  if (args->device.type == DLOP_DEVICE_CUDA) status = exp_prepare_cuda(s, args);
  if (status != DLOP_OK) {
    exp_thunk_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? exp_run_cuda : exp_run_cpu;
  args->thunk->destroy = exp_thunk_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}
