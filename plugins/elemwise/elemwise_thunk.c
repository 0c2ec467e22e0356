/* elemwise_thunk.c — make_thunk and the run of every elemwise op. Like the SDK's
 * elementwise_thunk.h, generalized to operands of different dtypes (bool results, where's
 * condition, cast): checks the tensors, builds the broadcast loop, then runs the CPU kernel
 * over it or launches the CUDA kernel that fits (contiguous, rows or strided). */
#include <dlop/kit/fatbin.h> /* DLOP_FATBIN_DECLARE, DLOP_FATBIN */

#include "elemwise_plugin.h"

/* Elements per parallel chunk on the CPU: large enough to amortize scheduling, small enough
 * to balance. */
#define ELEMWISE_GRAIN 32768

DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_arith_fatbin);
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_unary_fatbin);
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_compare_fatbin);
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_cast_fatbin);

static const unsigned char *fatbin_of(int32_t file) {
  switch (file) {
    case EW_CUDA_ARITH: return DLOP_FATBIN(dlop_elemwise_elemwise_cuda_arith_fatbin);
    case EW_CUDA_UNARY: return DLOP_FATBIN(dlop_elemwise_elemwise_cuda_unary_fatbin);
    case EW_CUDA_COMPARE: return DLOP_FATBIN(dlop_elemwise_elemwise_cuda_compare_fatbin);
    case EW_CUDA_CAST: return DLOP_FATBIN(dlop_elemwise_elemwise_cuda_cast_fatbin);
    default: return NULL;
  }
}

typedef struct elemwise_state {
  const elemwise_op_info *info;
  const char *name;
  dlop_type inputs[DLOP_KERNEL_MAX_OPERANDS - 1];
  dlop_type output;
  dlop_device device;
  elemwise_cpu_inner_fn cpu; /* CPU only */
  void *module;              /* CUDA only: the module and its kernels (contiguous, rows NULL */
  void *contiguous, *rows, *strided; /* when the op has none: the strided one does it all) */
  int32_t contiguous_elements;       /* elements one thread of the contiguous kernel handles */
  uint32_t max_blocks;               /* grid cap of the strided kernel */
} elemwise_state;

static void elemwise_destroy(void *state) {
  elemwise_state *s = (elemwise_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(elemwise_host(), cuda_module_unload))
    elemwise_host()->cuda_module_unload(s->module);
  free(s);
}

/* ---- run ------------------------------------------------------------------------------- */

/* Tensors against the thunk's types, the output against the inputs' broadcast shape; on
 * success the loop is set up (output first, then the inputs). */
static int prepare(const elemwise_state *s, const dlop_run_args *args, dlop_strided_loop *loop) {
  int32_t n = s->info->num_inputs;
  int status;
  if (args->num_inputs != n || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "%s: run with %d inputs and %d outputs, expected %d and 1",
                   s->name, (int)args->num_inputs, (int)args->num_outputs, (int)n);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors(s->name, "input", args->inputs, n, s->inputs, s->device, args->error,
                              args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors(s->name, "output", args->outputs, 1, &s->output, s->device,
                                args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_broadcast_output(s->name, args->inputs, n, &args->outputs[0], args->error,
                                         args->error_size);
  if (status != DLOP_OK) return status;
  return dlop_strided_loop_init(loop, &args->outputs[0], args->inputs, n, s->name, args->error,
                                args->error_size);
}

typedef struct cpu_context {
  const dlop_strided_loop *loop;
  elemwise_cpu_inner_fn inner;
} cpu_context;

static void cpu_chunk(void *context, int64_t begin, int64_t end) {
  const cpu_context *ctx = (const cpu_context *)context;
  const dlop_nd_offsets *layout = &ctx->loop->layout;
  int64_t strides[DLOP_KERNEL_MAX_OPERANDS] = {0, 0, 0, 0};
  char *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_strided_cursor cursor;
  int64_t n;
  int32_t k;
  for (k = 0; k < layout->num_operands; k++) strides[k] = layout->strides[k][layout->ndim - 1];
  dlop_strided_cursor_init(&cursor, ctx->loop, begin, end);
  while ((n = dlop_strided_cursor_next(&cursor, ctx->loop, pointers)) > 0)
    ctx->inner(pointers, strides, n);
}

static int run_cpu(void *state, const dlop_run_args *args) {
  const elemwise_state *s = (const elemwise_state *)state;
  dlop_strided_loop loop;
  cpu_context ctx;
  int status = prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  ctx.loop = &loop;
  ctx.inner = s->cpu;
  return dlop_strided_loop_run(elemwise_host(), &loop, ELEMWISE_GRAIN, cpu_chunk, &ctx, s->name,
                               args->error, args->error_size);
}

/* The kind of input k (1 or 2) in a rows layout, as elemwise_cuda.cuh's EW_FULL (0), EW_ROW
 * (1: one row read by every row) and EW_COLUMN (2: one element per row, or a scalar). */
static int32_t rows_kind(const dlop_rows_layout *rows, int32_t k, int64_t row_count) {
  if (!rows->inner[k]) return 2;
  return rows->row_stride[k] == 0 && row_count > 1 ? 1 : 0;
}

/* EW_ROWS_PATTERN(kind of a, kind of b) */
static int32_t rows_pattern(const dlop_rows_layout *rows, int64_t row_count) {
  return rows_kind(rows, 1, row_count) * 3 + rows_kind(rows, 2, row_count);
}

/* The launch of cuda_launch.h's dlop_cuda_launch_elementwise, with the contiguous kernel
 * optional too (ops without one send contiguous loops to the strided kernel, whose 1-d case
 * needs no division). Kernels take the inputs, then the output, then n (and the layout). */
static int run_cuda(void *state, const dlop_run_args *args) {
  const elemwise_state *s = (const elemwise_state *)state;
  const dlop_host_api *host = elemwise_host();
  dlop_strided_loop loop;
  dlop_rows_layout rows;
  dlop_nd_offsets offsets;
  void *kernel_args[DLOP_KERNEL_MAX_OPERANDS + 2], *pointers[DLOP_KERNEL_MAX_OPERANDS], *function;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {DLOP_CUDA_ELEMENTWISE_BLOCK, 1, 1};
  int64_t n;
  int32_t k, operands, count = 0, pattern = 0;
  int status = prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  n = loop.numel;
  if (n <= 0) return DLOP_OK;
  if (args->stream == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: no CUDA stream given (thunks never use the default stream)", s->name);
    return DLOP_INVALID_ARGUMENT;
  }
  operands = loop.layout.num_operands;
  for (k = 1; k < operands; k++) pointers[k - 1] = loop.base[k];
  pointers[operands - 1] = loop.base[0];
  for (k = 0; k < operands; k++) kernel_args[count++] = &pointers[k];
  if (s->contiguous != NULL && dlop_strided_loop_is_contiguous(&loop)) {
    function = s->contiguous;
    kernel_args[count++] = &n;
    grid[0] = dlop_cuda_grid_size((n + s->contiguous_elements - 1) / s->contiguous_elements,
                                  block[0], DLOP_CUDA_MAX_GRID);
  } else if (s->rows != NULL && operands == 3 && dlop_rows_layout_init(&rows, &loop)) {
    /* elemwise_cuda.cuh's 2-d rows kernel: y walks rows (at most 65535 blocks, the kernel
     * strides over the rest), x covers a row's vectors, per_thread vectors per thread */
    int64_t per_thread = loop.element_size[0] < 4 ? 2 : 1; /* EW_ROWS_VECTORS_PER_THREAD */
    int64_t row_count = rows.vectors / rows.per_row;
    function = s->rows;
    kernel_args[count++] = &rows;
    kernel_args[count++] = &pattern;
    if (rows.per_row * 2 < (int64_t)block[0] * per_thread) {
      pattern = 9; /* EW_ROWS_SHORT: short rows go to the 1-d body, one vector per thread */
      grid[0] = dlop_cuda_grid_size(rows.vectors, block[0], DLOP_CUDA_MAX_GRID);
    } else {
      pattern = rows_pattern(&rows, row_count);
      grid[0] = dlop_cuda_grid_size((rows.per_row + per_thread - 1) / per_thread, block[0],
                                    DLOP_CUDA_MAX_GRID);
      grid[1] = (uint32_t)(row_count < 65535 ? row_count : 65535);
    }
  } else {
    offsets = loop.layout;
    function = s->strided;
    kernel_args[count++] = &n;
    kernel_args[count++] = &offsets;
    grid[0] = dlop_cuda_grid_size(n, block[0], s->max_blocks);
  }
  status = host->cuda_launch(function, grid, block, 0, args->stream, kernel_args, args->error,
                             args->error_size);
  if (status != DLOP_OK && args->error != NULL && args->error_size > 0 && args->error[0] == '\0')
    dlop_set_error(args->error, args->error_size, "%s: kernel launch failed with status %d",
                   s->name, status);
  return status;
}

/* ---- make_thunk ------------------------------------------------------------------------ */

static int find_kernel(elemwise_state *s, const char *kind, void **function,
                       const dlop_thunk_args *args) {
  char name[128];
  dlop_dtype value = (dlop_dtype)s->inputs[s->info->kind == EW_KIND_WHERE ? 1 : 0].dtype;
  if (s->info->kind == EW_KIND_CAST) {
    dlop_dtype from = value, to = (dlop_dtype)s->output.dtype;
    if (from == to) from = to = elemwise_bit_copy_dtype(from);
    snprintf(name, sizeof name, "dlop_elemwise_cast_%s_%s_%s", kind, dlop_dtype_name(from),
             dlop_dtype_name(to));
  } else {
    snprintf(name, sizeof name, "dlop_elemwise_%s_%s_%s", s->name, kind, dlop_dtype_name(value));
  }
  return elemwise_host()->cuda_module_function(s->module, name, function, args->error,
                                               args->error_size);
}

static int prepare_cuda(elemwise_state *s, const dlop_thunk_args *args) {
  const dlop_host_api *host = elemwise_host();
  const unsigned char *fatbin = fatbin_of(s->info->cuda_file);
  int status;
  if (fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)",
                   s->name);
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function) ||
      !DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(args->error, args->error_size,
                   "%s: the host offers no CUDA module loading and launch", s->name);
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->max_blocks, s->name, args->error,
                                args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, fatbin, &s->module, args->error, args->error_size);
  if (status == DLOP_OK) status = find_kernel(s, "strided", &s->strided, args);
  if (status == DLOP_OK && s->info->cuda_contiguous)
    status = find_kernel(s, "contiguous", &s->contiguous, args);
  if (status == DLOP_OK && s->info->cuda_rows) status = find_kernel(s, "rows", &s->rows, args);
  /* one 16-byte vector per thread in the contiguous kernels (elemwise_cuda.cuh) */
  s->contiguous_elements = (int32_t)(16 / dlop_dtype_size((dlop_dtype)s->output.dtype));
  return status;
}

static elemwise_cpu_inner_fn cpu_kernel(const elemwise_op_info *info, const dlop_thunk_args *args) {
  dlop_dtype in = (dlop_dtype)args->inputs[info->kind == EW_KIND_WHERE ? 1 : 0].dtype;
  switch (info->kind) {
    case EW_KIND_UNARY: return elemwise_cpu_unary(info->id, in);
    case EW_KIND_BINARY: return elemwise_cpu_arith(info->id, in);
    case EW_KIND_CAST: return elemwise_cpu_cast(in, (dlop_dtype)args->outputs[0].dtype);
    default: return elemwise_cpu_compare(info->id, in);
  }
}

/* make_node's rule again (the host passes make_node's types, but a direct caller may not). */
static int check_thunk_types(const elemwise_op_info *info, const char *name, const dlop_thunk_args *args) {
  int32_t first = info->kind == EW_KIND_WHERE ? 1 : 0, i;
  int32_t value = args->inputs[first].dtype, expected_out = value;
  int ok = (info->dtypes & DLOP_DTYPE_BIT(value)) != 0;
  for (i = first + 1; i < args->num_inputs; i++) ok &= args->inputs[i].dtype == value;
  if (info->kind == EW_KIND_WHERE) ok &= args->inputs[0].dtype == DLOP_BOOL;
  if (info->kind == EW_KIND_COMPARE) expected_out = DLOP_BOOL;
  if (info->kind == EW_KIND_CAST) {
    expected_out = args->outputs[0].dtype;
    ok &= (DLOP_DTYPES_ALL & DLOP_DTYPE_BIT(expected_out)) != 0;
  }
  ok &= args->outputs[0].dtype == expected_out;
  if (ok) return DLOP_OK;
  {
    char text[128];
    size_t used = 0;
    text[0] = '\0';
    for (i = 0; i < args->num_inputs && used < sizeof text; i++) {
      int written = snprintf(text + used, sizeof text - used, "%s%s", i ? ", " : "",
                             dlop_dtype_name((dlop_dtype)args->inputs[i].dtype));
      if (written > 0) used += (size_t)written;
    }
    dlop_set_error(args->error, args->error_size, "%s: no kernel for input dtypes (%s) and output dtype %s",
                   name, text, dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
  }
  return DLOP_UNSUPPORTED;
}

int elemwise_make_thunk(const dlop_thunk_args *args) {
  const elemwise_op_info *info = (const elemwise_op_info *)args->op->op_data;
  const char *name = elemwise_op_name(info->id);
  elemwise_state *s;
  int32_t i;
  int status;
  if (args->num_inputs != info->num_inputs || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: make_thunk with %d inputs and %d outputs, expected %d and 1", name,
                   (int)args->num_inputs, (int)args->num_outputs, (int)info->num_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type != DLOP_DEVICE_CPU && args->device.type != DLOP_DEVICE_CUDA) {
    dlop_set_error(args->error, args->error_size, "%s: device type %d is not supported (cpu or cuda)",
                   name, (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  status = check_thunk_types(info, name, args);
  if (status != DLOP_OK) return status;
  s = (elemwise_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: out of memory for the thunk state", name);
    return DLOP_OUT_OF_MEMORY;
  }
  s->info = info;
  s->name = name;
  for (i = 0; i < info->num_inputs; i++) s->inputs[i] = args->inputs[i];
  s->output = args->outputs[0];
  s->device = args->device;
  if (args->device.type == DLOP_DEVICE_CUDA) {
    status = prepare_cuda(s, args);
  } else {
    s->cpu = cpu_kernel(info, args);
    if (s->cpu == NULL) {
      dlop_set_error(args->error, args->error_size, "%s: no CPU kernel for dtype %s", name,
                     dlop_dtype_name((dlop_dtype)args->inputs[0].dtype));
      status = DLOP_UNSUPPORTED;
    }
  }
  if (status != DLOP_OK) {
    elemwise_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? run_cuda : run_cpu;
  args->thunk->destroy = elemwise_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}
