/* scale_add_thunk.c — make_thunk: prepares scale_add once per node and device (on CUDA: loads the
 * embedded fatbin through the host and finds the dtype's kernel), and the thunk's run, which
 * checks the tensors it is handed and calls the CPU kernel or launches the CUDA one. */
#include <stdlib.h>

#include <dlop/kit/fatbin.h> /* DLOP_FATBIN_DECLARE, DLOP_FATBIN */

#include "scale_add.h"

/* dlop_add_plugin(scale_add SOURCES ... src/scale_add_cuda.cu) embeds that file's fatbin under
 * the name <target>_<file stem>_fatbin; DLOP_FATBIN gives NULL in a build without CUDA. */
DLOP_FATBIN_DECLARE(scale_add_scale_add_cuda_fatbin);

/* Threads per block of the CUDA kernel (a grid-stride loop covers the rest). */
#define SCALE_ADD_CUDA_BLOCK 256

/* One thunk: what it was made for, and on CUDA its module and kernel. run only reads it, so
 * several threads may run the same thunk at once. */
typedef struct scale_add_state {
  dlop_type inputs[2];
  dlop_type output;
  dlop_device device;
  double alpha;
  void *module;        /* CUDA: the loaded fatbin (a CUmodule), unloaded by destroy */
  void *kernel;        /* CUDA: scale_add_<dtype> (a CUfunction) */
  uint32_t max_blocks; /* CUDA: the grid cap, from the SM count */
} scale_add_state;

static void scale_add_destroy(void *state) {
  scale_add_state *s = (scale_add_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(scale_add_host(), cuda_module_unload))
    scale_add_host()->cuda_module_unload(s->module);
  free(s);
}

/* Checks shared by both devices: the tensors are those the thunk was made for, z has exactly the
 * broadcast shape of x and y. On success the loop is set up with z first, then x and y. */
static int scale_add_prepare(const scale_add_state *s, const dlop_run_args *args,
                             dlop_strided_loop *loop) {
  int status;
  if (args->num_inputs != 2 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: run with %d inputs and %d outputs, expected 2 and 1",
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors("scale_add", "input", args->inputs, 2, s->inputs, s->device,
                              args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors("scale_add", "output", args->outputs, 1, &s->output, s->device,
                                args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_broadcast_output("scale_add", args->inputs, 2, &args->outputs[0],
                                         args->error, args->error_size);
  if (status != DLOP_OK) return status;
  return dlop_strided_loop_init(loop, &args->outputs[0], args->inputs, 2, "scale_add",
                                args->error, args->error_size);
}

static int scale_add_run_cpu(void *state, const dlop_run_args *args) {
  const scale_add_state *s = (const scale_add_state *)state;
  dlop_strided_loop loop;
  int status = scale_add_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return scale_add_cpu_run(&loop, (dlop_dtype)s->output.dtype, s->alpha, args->error,
                           args->error_size);
}

/* One launch on the host's stream: no allocation, no synchronization (DLOP_OP_CUDA_GRAPH_SAFE). */
static int scale_add_run_cuda(void *state, const dlop_run_args *args) {
  const scale_add_state *s = (const scale_add_state *)state;
  const dlop_host_api *host = scale_add_host();
  dlop_strided_loop loop;
  void *x, *y, *z;
  float alpha32 = (float)s->alpha; /* the kernel takes alpha in its own dtype */
  double alpha64 = s->alpha;
  int64_t n;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {SCALE_ADD_CUDA_BLOCK, 1, 1};
  int status = scale_add_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  n = loop.numel;
  if (n == 0) return DLOP_OK; /* nothing to write; a grid of 0 blocks is a launch error */
  if (args->stream == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: no CUDA stream given (thunks never use the default stream)");
    return DLOP_INVALID_ARGUMENT;
  }
  /* kernel arguments are pointers to the values, in the kernel's parameter order */
  z = loop.base[0];
  x = loop.base[1];
  y = loop.base[2];
  void *kernel_args[] = {&x, &y, &z,
                         s->output.dtype == DLOP_FLOAT32 ? (void *)&alpha32 : (void *)&alpha64,
                         &n, &loop.layout};
  grid[0] = dlop_cuda_grid_size(n, block[0], s->max_blocks);
  status = host->cuda_launch(s->kernel, grid, block, 0, args->stream, kernel_args, args->error,
                             args->error_size);
  if (status != DLOP_OK && args->error != NULL && args->error_size > 0 && args->error[0] == '\0')
    dlop_set_error(args->error, args->error_size, "scale_add: kernel launch failed (status %d)",
                   status);
  return status;
}

/* Loads the fatbin on the thunk's device (the host caches modules per device and image) and
 * looks up the kernel for the dtype: scale_add_float32 or scale_add_float64. */
static int scale_add_prepare_cuda(scale_add_state *s, const dlop_thunk_args *args) {
  const dlop_host_api *host = scale_add_host();
  const unsigned char *fatbin = DLOP_FATBIN(scale_add_scale_add_cuda_fatbin);
  char name[64];
  int status;
  if (fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)");
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function) ||
      !DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: the host offers no CUDA module loading and launch");
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->max_blocks, "scale_add", args->error,
                                args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, fatbin, &s->module, args->error,
                                  args->error_size);
  if (status != DLOP_OK) return status;
  snprintf(name, sizeof name, "scale_add_%s", dlop_dtype_name((dlop_dtype)s->output.dtype));
  return host->cuda_module_function(s->module, name, &s->kernel, args->error, args->error_size);
}

int scale_add_make_thunk(const dlop_thunk_args *args) {
  scale_add_state *s;
  uint32_t dtypes;
  int status = DLOP_OK;
  if (args->num_inputs != 2 || args->num_outputs != 1 || args->params == NULL ||
      args->num_params != 1 || args->params[SCALE_ADD_PARAM_ALPHA].kind != DLOP_PARAM_FLOAT) {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: make_thunk with %d inputs, %d outputs and %d parameters, expected "
                   "2, 1 and 1 (alpha, a float)",
                   (int)args->num_inputs, (int)args->num_outputs, (int)args->num_params);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type == DLOP_DEVICE_CPU) dtypes = SCALE_ADD_DTYPES;
  else if (args->device.type == DLOP_DEVICE_CUDA) dtypes = DLOP_HAVE_CUDA_KERNELS ? SCALE_ADD_DTYPES : 0;
  else {
    dlop_set_error(args->error, args->error_size,
                   "scale_add: device type %d is not supported (expected cpu or cuda)",
                   (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  if (args->inputs[0].dtype != args->inputs[1].dtype || args->outputs[0].dtype != args->inputs[0].dtype ||
      args->outputs[0].dtype < 0 || args->outputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(dtypes & DLOP_DTYPE_BIT(args->outputs[0].dtype))) {
    char supported[64];
    dlop_set_error(args->error, args->error_size,
                   "scale_add: no %s kernel for x %s, y %s, z %s (expected one dtype of: %s)",
                   args->device.type == DLOP_DEVICE_CPU ? "CPU" : "CUDA",
                   dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   dlop_dtype_name((dlop_dtype)args->inputs[1].dtype),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype),
                   dlop_format_dtypes(dtypes, supported, sizeof supported));
    return DLOP_UNSUPPORTED;
  }
  s = (scale_add_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "scale_add: out of memory for the thunk state (%zu bytes)",
                   sizeof *s);
    return DLOP_OUT_OF_MEMORY;
  }
  s->inputs[0] = args->inputs[0];
  s->inputs[1] = args->inputs[1];
  s->output = args->outputs[0];
  s->device = args->device;
  s->alpha = args->params[SCALE_ADD_PARAM_ALPHA].u.f;
  if (args->device.type == DLOP_DEVICE_CUDA) status = scale_add_prepare_cuda(s, args);
  if (status != DLOP_OK) {
    scale_add_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? scale_add_run_cuda : scale_add_run_cpu;
  args->thunk->destroy = scale_add_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}
