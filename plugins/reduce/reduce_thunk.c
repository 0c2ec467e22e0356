/* reduce_thunk.c — make_thunk and run for the reduce ops: checks the tensors, collapses the
 * layout (reduce_layout.c) and runs the CPU kernel (reduce_cpu.c) or picks (reduce_cuda_plan.h)
 * and launches the CUDA kernels of reduce_cuda.cu (rows, block, columns, and finish or
 * columns_finish for two-pass reductions). */
#include <stdio.h>
#include <stdlib.h>

#include <dlop/kit/fatbin.h> /* DLOP_FATBIN_DECLARE, DLOP_FATBIN */

#include "reduce_plugin.h"
#include "reduce_cuda_plan.h"

DLOP_FATBIN_DECLARE(dlop_reduce_reduce_cuda_fatbin);

typedef struct reduce_state {
  const reduce_op_info *info;
  reduce_params params;
  dlop_type input, output;
  dlop_device device;
  void *module;                    /* CUDA only */
  void *kernels[REDUCE_CUDA_KERNEL_KINDS]; /* CUDA only: rows, block, columns, finish,
                                            columns_finish */
  uint32_t max_blocks, sm_count;   /* CUDA only */
} reduce_state;

static void reduce_destroy(void *state) {
  reduce_state *s = (reduce_state *)state;
  const dlop_host_api *host = reduce_host();
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(host, cuda_module_unload)) host->cuda_module_unload(s->module);
  free(s);
}

/* Checks shared by both devices; on success the layout is built. */
static int reduce_prepare(const reduce_state *s, const dlop_run_args *args, reduce_layout *layout) {
  const char *name = s->info->name;
  int64_t shape[DLOP_MAX_NDIM];
  int32_t ndim = 0;
  int status;
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "%s: run with %d inputs and %d outputs, expected 1 and 1",
                   name, (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors(name, "input", args->inputs, 1, &s->input, s->device, args->error,
                              args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors(name, "output", args->outputs, 1, &s->output, s->device,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = reduce_output_shape(s->info, &s->params, args->inputs[0].ndim, args->inputs[0].shape,
                               &ndim, shape, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (ndim != args->outputs[0].ndim ||
      (ndim > 0 && memcmp(shape, args->outputs[0].shape, sizeof(int64_t) * (size_t)ndim) != 0)) {
    char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4], in[DLOP_MAX_NDIM * 22 + 4];
    dlop_set_error(args->error, args->error_size, "%s: output shape %s, expected %s for input shape %s",
                   name, dlop_format_shape(args->outputs[0].shape, args->outputs[0].ndim, got, sizeof got),
                   dlop_format_shape(shape, ndim, want, sizeof want),
                   dlop_format_shape(args->inputs[0].shape, args->inputs[0].ndim, in, sizeof in));
    return DLOP_SHAPE_ERROR;
  }
  return reduce_layout_init(layout, &args->inputs[0], &args->outputs[0], s->params.mask, name,
                            args->error, args->error_size);
}

static const void *tensor_base(const dlop_tensor *t) {
  return (const char *)t->data + t->byte_offset;
}

static int reduce_run_cpu(void *state, const dlop_run_args *args) {
  const reduce_state *s = (const reduce_state *)state;
  reduce_layout layout;
  int status = reduce_prepare(s, args, &layout);
  if (status != DLOP_OK) return status;
  return reduce_cpu_run(s->info, (dlop_dtype)s->input.dtype, &layout, tensor_base(&args->inputs[0]),
                        (void *)tensor_base(&args->outputs[0]), args->error, args->error_size);
}

static int reduce_launch(const reduce_state *s, int kind, uint32_t blocks, void **kernel_args,
                         void *stream, const dlop_run_args *args) {
  const dlop_host_api *host = reduce_host();
  uint32_t grid[3] = {blocks, 1, 1}, block[3] = {REDUCE_CUDA_BLOCK, 1, 1};
  int status = host->cuda_launch(s->kernels[kind], grid, block, 0, stream, kernel_args, args->error,
                                 args->error_size);
  if (status != DLOP_OK && args->error != NULL && args->error_size > 0 && args->error[0] == '\0')
    dlop_set_error(args->error, args->error_size, "%s: kernel launch failed with status %d",
                   s->info->name, status);
  return status;
}

/* The columns kernel's outputs per thread for this dtype at most (reduce_cuda_plan.h: pairs,
 * and packs of one 16-byte load per row, 8 float16, 4 float32, 2 float64, where they save a
 * second pass), for every op of the float dtypes. A 16-bit sum's thread loaded 2 bytes per row
 * (64 bytes per warp instruction): 0.82x of PyTorch's time along a first axis on an H200; in
 * pairs, 4 bytes: 0.94-1.01x. */
static int32_t reduce_cuda_pack_limit(const reduce_state *s) {
  const dlop_dtype dtype = (dlop_dtype)s->input.dtype;
  return dlop_dtype_is_float(dtype) ? (int32_t)(16 / dlop_dtype_size(dtype)) : 1;
}

static int reduce_run_cuda(void *state, const dlop_run_args *args) {
  const reduce_state *s = (const reduce_state *)state;
  const char *name = s->info->name;
  reduce_layout layout;
  reduce_cuda_plan plan;
  const void *input;
  void *output, *partials;
  int32_t mean = s->info->kind == REDUCE_MEAN;
  int status = reduce_prepare(s, args, &layout);
  if (status != DLOP_OK) return status;
  if (layout.outputs <= 0) return DLOP_OK;
  if (args->stream == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: no CUDA stream given (thunks never use the default stream)", name);
    return DLOP_INVALID_ARGUMENT;
  }
  reduce_cuda_plan_make(&plan, &layout, s->max_blocks, s->sm_count,
                        (int32_t)dlop_dtype_size((dlop_dtype)s->input.dtype), reduce_cuda_pack_limit(s));
  if (plan.parts > 1 && (args->workspace == NULL || args->workspace_bytes < REDUCE_CUDA_WORKSPACE_BYTES)) {
    dlop_set_error(args->error, args->error_size,
                   "%s: a two-pass reduction needs the thunk's %zu-byte workspace, got %zu bytes at %p",
                   name, (size_t)REDUCE_CUDA_WORKSPACE_BYTES, args->workspace_bytes, args->workspace);
    return DLOP_INVALID_ARGUMENT;
  }
  input = tensor_base(&args->inputs[0]);
  output = (void *)tensor_base(&args->outputs[0]);
  partials = args->workspace;
  if (plan.kind == REDUCE_CUDA_BLOCK_KERNEL) {
    void *kernel_args[] = {(void *)&input, &output, &partials, &layout, &plan.parts, &mean};
    status = reduce_launch(s, REDUCE_CUDA_BLOCK_KERNEL, plan.blocks, kernel_args, args->stream, args);
    if (status == DLOP_OK && plan.parts > 1) {
      void *finish_args[] = {&partials, &output, &layout, &plan.parts, &mean};
      status = reduce_launch(s, REDUCE_CUDA_FINISH_KERNEL, plan.finish_blocks, finish_args,
                             args->stream, args);
    }
  } else if (plan.kind == REDUCE_CUDA_COLUMNS_KERNEL) {
    void *kernel_args[] = {(void *)&input, &output, &partials, &layout, &plan.parts,
                           &plan.pack, &plan.tile_columns, &mean};
    status = reduce_launch(s, REDUCE_CUDA_COLUMNS_KERNEL, plan.blocks, kernel_args, args->stream, args);
    if (status == DLOP_OK && plan.parts > 1) {
      void *finish_args[] = {&partials, &output, &layout, &plan.parts, &mean};
      status = reduce_launch(s, REDUCE_CUDA_COLUMNS_FINISH_KERNEL, plan.finish_blocks, finish_args,
                             args->stream, args);
    }
  } else {
    void *kernel_args[] = {(void *)&input, &output, &layout, &mean};
    status = reduce_launch(s, plan.kind, plan.blocks, kernel_args, args->stream, args);
  }
  return status;
}

static int reduce_prepare_cuda(reduce_state *s, const dlop_thunk_args *args) {
  static const char *const kinds[REDUCE_CUDA_KERNEL_KINDS] = {"rows", "block", "columns", "finish",
                                                               "columns_finish"};
  const dlop_host_api *host = reduce_host();
  const unsigned char *fatbin = DLOP_FATBIN(dlop_reduce_reduce_cuda_fatbin);
  const char *op = s->info->kind == REDUCE_MAX ? "max" : s->info->kind == REDUCE_MIN ? "min" : "sum";
  int status, k;
  if (fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)",
                   s->info->name);
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function) ||
      !DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(args->error, args->error_size, "%s: the host offers no CUDA module loading and launch",
                   s->info->name);
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->max_blocks, s->info->name, args->error,
                                args->error_size);
  if (status != DLOP_OK) return status;
  s->sm_count = s->max_blocks / DLOP_CUDA_BLOCKS_PER_SM; /* what dlop_cuda_max_blocks multiplied */
  status = host->cuda_module_load(args->device.id, fatbin, &s->module, args->error, args->error_size);
  for (k = 0; k < REDUCE_CUDA_KERNEL_KINDS && status == DLOP_OK; k++) {
    char kernel[96];
    snprintf(kernel, sizeof kernel, "dlop_reduce_%s_%s_%s", kinds[k], op,
             dlop_dtype_name((dlop_dtype)s->input.dtype));
    status = host->cuda_module_function(s->module, kernel, &s->kernels[k], args->error,
                                        args->error_size);
  }
  return status;
}

int reduce_make_thunk(const dlop_thunk_args *args) {
  const reduce_op_info *info = (const reduce_op_info *)args->op->op_data;
  reduce_state *s;
  int status;
  if (args->num_inputs != 1 || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: make_thunk with %d inputs and %d outputs, expected 1 and 1", info->name,
                   (int)args->num_inputs, (int)args->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type != DLOP_DEVICE_CPU && args->device.type != DLOP_DEVICE_CUDA) {
    dlop_set_error(args->error, args->error_size, "%s: device type %d is not supported (cpu or cuda)",
                   info->name, (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  if (args->inputs[0].dtype < 0 || args->inputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(info->dtypes & DLOP_DTYPE_BIT(args->inputs[0].dtype)) ||
      args->outputs[0].dtype != (int32_t)reduce_output_dtype(info->kind, (dlop_dtype)args->inputs[0].dtype)) {
    dlop_set_error(args->error, args->error_size, "%s: no kernel for input dtype %s and output dtype %s",
                   info->name, dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
    return DLOP_UNSUPPORTED;
  }
  s = (reduce_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: out of memory for the thunk state", info->name);
    return DLOP_OUT_OF_MEMORY;
  }
  s->info = info;
  s->input = args->inputs[0];
  s->output = args->outputs[0];
  s->device = args->device;
  status = reduce_parse_params(info, args->params, args->num_params, s->input.ndim, &s->params,
                               args->error, args->error_size);
  if (status == DLOP_OK && args->device.type == DLOP_DEVICE_CUDA) status = reduce_prepare_cuda(s, args);
  if (status != DLOP_OK) {
    reduce_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? reduce_run_cuda : reduce_run_cpu;
  args->thunk->destroy = reduce_destroy;
  /* CUDA: room for the partials of a two-pass reduction, fixed so that nothing is allocated
   * while the thunk runs (shapes may be unknown here) */
  args->thunk->workspace_bytes = args->device.type == DLOP_DEVICE_CUDA ? REDUCE_CUDA_WORKSPACE_BYTES : 0;
  return DLOP_OK;
}
