/* dlop/kit/elementwise_thunk.h — make_thunk for an elementwise op (1 to 3 inputs, one output)
 * from a small const spec: checks, the CPU run of the op's per-run C kernels over the host's
 * parallel_for, the CUDA run that loads the plugin's embedded fatbin and launches its kernels.
 * Header-only; plugin C code only. */
#ifndef DLOP_ELEMENTWISE_THUNK_H
#define DLOP_ELEMENTWISE_THUNK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fatbin.h"
#include "kernel_util.h"
#include "../op.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLOP_ELEMENTWISE_MAX_INPUTS (DLOP_KERNEL_MAX_OPERANDS - 1)
/* How many operand dtypes may pick an op's kernels (a cast's: from and to). */
#define DLOP_ELEMENTWISE_MAX_KERNEL_DTYPES 2
/* The size of an op's parameter block (make_params), as its kernels take it. */
#define DLOP_ELEMENTWISE_MAX_PARAM_BYTES 64
/* Elements per parallel chunk on the CPU: large enough to amortize scheduling, small enough
 * to balance. */
#define DLOP_ELEMENTWISE_CPU_GRAIN 32768

/* The plugin's C kernel for one run of the loop along its inner dimension: pointers[k] and
 * strides[k] (in elements) of operand k (0 is the output, then the inputs), n elements, and
 * the op's parameter block. The output may be an input (an op with an inplace_map), so a
 * kernel reads element i of its inputs before it writes element i of its output.
 * elementwise_cpu.h makes these from an element function. */
typedef void (*dlop_elementwise_cpu_kernel)(char *const *pointers, const int64_t *strides,
                                            int64_t n, const void *params);

/* For an op whose operands do not all have one dtype (a comparison's bool output, a select's
 * bool condition, a cast): checks make_thunk's dtypes (a message and DLOP_UNSUPPORTED when no
 * kernel fits) and writes the dtypes that pick the kernels, 1 or 2, into dtypes[*count]. */
typedef int (*dlop_elementwise_kernel_dtypes_fn)(const dlop_thunk_args *args, dlop_dtype *dtypes,
                                                 int32_t *count);

/* Writes the op's parameter block from make_thunk's parameters (at most
 * DLOP_ELEMENTWISE_MAX_PARAM_BYTES, laid out as the kernels read it: an alpha as a float for
 * float32 kernels), or returns a status with a message. */
typedef int (*dlop_elementwise_make_params_fn)(const dlop_thunk_args *args, void *params,
                                               char *error, size_t error_size);

/* The rows kernel an op has on CUDA (cuda_launch.h): none (rows layouts go to the strided
 * kernel), the 1-d one (dlop_cuda_{unary,binary}_rows, DLOP_CUDA_*_ROWS) or the 2-d one of
 * binary ops (dlop_cuda_binary_rows_2d, DLOP_CUDA_BINARY_ROWS_2D). */
typedef enum dlop_elementwise_rows {
  DLOP_ELEMENTWISE_NO_ROWS = 0,
  DLOP_ELEMENTWISE_ROWS = 1,
  DLOP_ELEMENTWISE_ROWS_2D = 2
} dlop_elementwise_rows;

/* What an elementwise op tells the helper. Its kernels are picked by its kernel dtypes: input
 * 0's dtype, which every operand has, for the usual op; what kernel_dtypes writes for others.
 * CPU: cpu_kernels[d] for one kernel dtype d, cpu_kernels[d0 * DLOP_DTYPE_COUNT + d1] for two
 * (NULL entries: no kernel). CUDA, in cuda_fatbin: "<cuda_kernel_prefix>_<kind>_<d>" (or
 * "..._<d0>_<d1>"), dtypes as dlop_dtype_name spells them, for kind "contiguous" (when
 * cuda_contiguous_vectors > 0), "rows" (when cuda_rows says so) and "strided", with the
 * signatures of cuda_launch.h and the parameter block as their last argument. */
typedef struct dlop_elementwise_spec {
  const char *op_name;                /* starts every message: "exp: ..." */
  const dlop_host_api *(*host)(void); /* the table the plugin got in dlop_plugin_init */
  int32_t num_inputs;                 /* 1 to DLOP_ELEMENTWISE_MAX_INPUTS */
  /* 0: every input has the output's shape; 1: the output has the inputs' broadcast shape */
  int32_t broadcast;
  uint32_t cpu_dtypes, cuda_dtypes; /* DLOP_DTYPE_BIT masks, as in the op descriptor */
  const dlop_elementwise_cpu_kernel *cpu_kernels;
  const unsigned char *cuda_fatbin; /* DLOP_FATBIN(symbol): NULL when built without CUDA */
  const char *cuda_kernel_prefix;   /* "dlop_exp" */
  /* 16-byte vectors one thread of the contiguous kernel handles (its unroll); 0: the op has
   * no contiguous kernel (contiguous loops go to strided, whose 1-d case needs no division) */
  int32_t cuda_contiguous_vectors;
  int32_t cuda_rows; /* dlop_elementwise_rows */
  /* optional: NULL for an op of one dtype throughout, and for an op without parameters */
  dlop_elementwise_kernel_dtypes_fn kernel_dtypes;
  dlop_elementwise_make_params_fn make_params;
  /* optional: the output dtypes (DLOP_DTYPE_BIT mask) whose contiguous kernel is in the chunk
   * form (dlop_cuda_unary_chunks, DLOP_CUDA_UNARY_CHUNKS), launched in blocks of
   * DLOP_CUDA_CHUNK_BLOCK threads; the others' in the grid form, blocks of 256. Either form
   * covers any grid the launch gives it, so a mask that disagrees with the kernels costs
   * speed, never a result (for any tensor a GPU holds). */
  uint32_t cuda_chunk_dtypes;
} dlop_elementwise_spec;

/* One thunk: the types it was made for, its parameter block, its CPU kernel or, on CUDA, its
 * module and kernels. run only reads it, so several threads may run one thunk at once. */
typedef struct dlop_elementwise_state {
  const dlop_elementwise_spec *spec;
  dlop_type inputs[DLOP_ELEMENTWISE_MAX_INPUTS];
  dlop_type output;
  dlop_device device;
  dlop_elementwise_cpu_kernel cpu; /* CPU only */
  void *module;                    /* CUDA only */
  dlop_cuda_elementwise kernels;   /* CUDA only: CUfunctions and launch sizes */
  uint64_t params[DLOP_ELEMENTWISE_MAX_PARAM_BYTES / 8]; /* zeros for an op without parameters */
} dlop_elementwise_state;

static inline void dlop_elementwise_destroy(void *state) {
  dlop_elementwise_state *s = (dlop_elementwise_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(s->spec->host(), cuda_module_unload))
    s->spec->host()->cuda_module_unload(s->module);
  free(s);
}

/* "exp: run with 2 inputs and 1 outputs, expected 1 and 1" when the counts are not the op's. */
static inline int dlop_elementwise_check_counts(const dlop_elementwise_spec *spec,
                                                const char *stage, int32_t num_inputs,
                                                int32_t num_outputs, char *error,
                                                size_t error_size) {
  if (num_inputs == spec->num_inputs && num_outputs == 1) return DLOP_OK;
  dlop_set_error(error, error_size, "%s: %s with %d inputs and %d outputs, expected %d and 1",
                 spec->op_name, stage, (int)num_inputs, (int)num_outputs, (int)spec->num_inputs);
  return DLOP_INVALID_ARGUMENT;
}

/* The output's shape against the inputs': equal to each (broadcast 0) or to their broadcast. */
static inline int dlop_elementwise_check_shapes(const dlop_elementwise_spec *spec,
                                                const dlop_run_args *args) {
  const dlop_tensor *out = &args->outputs[0];
  char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  int32_t i;
  /* the output must be exactly the broadcast shape: anything else is a caller's bug */
  if (spec->broadcast)
    return dlop_check_broadcast_output(spec->op_name, args->inputs, spec->num_inputs, out,
                                       args->error, args->error_size);
  for (i = 0; i < spec->num_inputs; i++) {
    const dlop_tensor *in = &args->inputs[i];
    if (in->ndim == out->ndim &&
        (in->ndim == 0 || memcmp(in->shape, out->shape, sizeof(int64_t) * (size_t)in->ndim) == 0))
      continue;
    dlop_format_shape(out->shape, out->ndim, got, sizeof got);
    dlop_format_shape(in->shape, in->ndim, want, sizeof want);
    if (spec->num_inputs == 1)
      dlop_set_error(args->error, args->error_size, "%s: output shape %s differs from input shape %s",
                     spec->op_name, got, want);
    else
      dlop_set_error(args->error, args->error_size,
                     "%s: output shape %s differs from input %d's shape %s", spec->op_name, got,
                     (int)i, want);
    return DLOP_SHAPE_ERROR;
  }
  return DLOP_OK;
}

/* Checks shared by both devices; on success the loop is set up (output first, then inputs). */
static inline int dlop_elementwise_prepare(const dlop_elementwise_state *s,
                                           const dlop_run_args *args, dlop_strided_loop *loop) {
  const dlop_elementwise_spec *spec = s->spec;
  int status;
  status = dlop_elementwise_check_counts(spec, "run", args->num_inputs, args->num_outputs,
                                         args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = dlop_check_tensors(spec->op_name, "input", args->inputs, spec->num_inputs, s->inputs,
                              s->device, args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors(spec->op_name, "output", args->outputs, 1, &s->output,
                                s->device, args->error, args->error_size);
  if (status == DLOP_OK) status = dlop_elementwise_check_shapes(spec, args);
  if (status != DLOP_OK) return status;
  /* every tensor passed dlop_check_tensors: the loop need not check sizes and reach again */
  return dlop_strided_loop_setup(loop, &args->outputs[0], args->inputs, spec->num_inputs, 1,
                                 spec->op_name, args->error, args->error_size);
}

/* ---- CPU: the op's kernel on each run of the loop, chunks over the host's parallel_for ---- */

typedef struct dlop_elementwise_cpu_context {
  const dlop_strided_loop *loop;
  dlop_elementwise_cpu_kernel kernel;
  const void *params;
} dlop_elementwise_cpu_context;

/* The parallel_for body: elements [begin, end) of the loop, in runs along the inner dim (the
 * whole range when the loop collapsed to one dim, as every contiguous one does). Moving to the
 * next run is a pointer add per operand, with a carry into outer dims only at their ends: the
 * strides in bytes of the dim outside the inner one are computed once per chunk. */
static inline void dlop_elementwise_cpu_chunk(void *context, int64_t begin, int64_t end) {
  const dlop_elementwise_cpu_context *c = (const dlop_elementwise_cpu_context *)context;
  const dlop_strided_loop *loop = c->loop;
  const dlop_nd_offsets *l = &loop->layout;
  const int32_t inner = l->ndim - 1, operands = l->num_operands;
  const int64_t cols = l->shape[inner];
  int64_t strides[DLOP_KERNEL_MAX_OPERANDS] = {0, 0, 0, 0};
  int64_t row_bytes[DLOP_KERNEL_MAX_OPERANDS] = {0, 0, 0, 0};
  int64_t index[DLOP_MAX_NDIM], row = begin / cols, col = begin - row * cols, n;
  char *row_start[DLOP_KERNEL_MAX_OPERANDS], *pointers[DLOP_KERNEL_MAX_OPERANDS];
  int32_t k, d;
  for (k = 0; k < operands; k++) {
    strides[k] = l->strides[k][inner];
    if (inner > 0) row_bytes[k] = l->strides[k][inner - 1] * loop->element_size[k];
    row_start[k] = loop->base[k];
  }
  for (d = inner - 1; d >= 0; d--) { /* the first run's row: its index and pointers */
    index[d] = row % l->shape[d];
    row /= l->shape[d];
    for (k = 0; k < operands; k++) row_start[k] += index[d] * l->strides[k][d] * loop->element_size[k];
  }
  for (k = 0; k < operands; k++) pointers[k] = row_start[k] + col * strides[k] * loop->element_size[k];
  for (;;) {
    n = cols - col < end - begin ? cols - col : end - begin;
    c->kernel(pointers, strides, n, c->params);
    begin += n;
    if (begin >= end) return; /* always so for one dim: [begin, end) was a single run */
    col = 0;
    d = inner - 1;
    for (k = 0; k < operands; k++) row_start[k] += row_bytes[k];
    while (++index[d] == l->shape[d] && d > 0) {
      index[d] = 0;
      for (k = 0; k < operands; k++)
        row_start[k] += (l->strides[k][d - 1] - l->shape[d] * l->strides[k][d]) * loop->element_size[k];
      d--;
    }
    for (k = 0; k < operands; k++) pointers[k] = row_start[k];
  }
}

static inline int dlop_elementwise_run_cpu(void *state, const dlop_run_args *args) {
  const dlop_elementwise_state *s = (const dlop_elementwise_state *)state;
  dlop_elementwise_cpu_context context;
  dlop_strided_loop loop;
  int status = dlop_elementwise_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  context.loop = &loop;
  context.kernel = s->cpu;
  context.params = s->params;
  return dlop_strided_loop_run(s->spec->host(), &loop, DLOP_ELEMENTWISE_CPU_GRAIN,
                               dlop_elementwise_cpu_chunk, &context, s->spec->op_name,
                               args->error, args->error_size);
}

/* ---- CUDA: the kernel that fits the loop's layout ----------------------------------------- */

static inline int dlop_elementwise_run_cuda(void *state, const dlop_run_args *args) {
  const dlop_elementwise_state *s = (const dlop_elementwise_state *)state;
  dlop_strided_loop loop;
  int status = dlop_elementwise_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return dlop_cuda_launch_elementwise(s->spec->host(), &loop, &s->kernels, args->stream,
                                      s->spec->op_name, args->error, args->error_size);
}

/* Looks up "<prefix>_<kind>_<d0>[_<d1>]" in the thunk's module. */
static inline int dlop_elementwise_cuda_function(const dlop_elementwise_state *s, const char *kind,
                                                 const dlop_dtype *dtypes, int32_t count,
                                                 void **function, const dlop_thunk_args *args) {
  const dlop_elementwise_spec *spec = s->spec;
  char name[128];
  int written = snprintf(name, sizeof name, "%s_%s", spec->cuda_kernel_prefix, kind);
  int32_t i;
  for (i = 0; i < count && written >= 0 && (size_t)written < sizeof name; i++)
    written += snprintf(name + written, sizeof name - (size_t)written, "_%s",
                        dlop_dtype_name(dtypes[i]));
  if (written < 0 || (size_t)written >= sizeof name) {
    dlop_set_error(args->error, args->error_size,
                   "%s: CUDA kernel name prefix \"%s\" is too long (names must fit %zu bytes)",
                   spec->op_name, spec->cuda_kernel_prefix, sizeof name);
    return DLOP_INVALID_ARGUMENT;
  }
  return spec->host()->cuda_module_function(s->module, name, function, args->error,
                                            args->error_size);
}

/* Loads the fatbin on the thunk's device and finds the kernels of its kernel dtypes. */
static inline int dlop_elementwise_prepare_cuda(dlop_elementwise_state *s,
                                                const dlop_dtype *dtypes, int32_t count,
                                                const dlop_thunk_args *args) {
  const dlop_elementwise_spec *spec = s->spec;
  const dlop_host_api *host = spec->host();
  int status;
  if (spec->cuda_fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)",
                   spec->op_name);
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function)) {
    dlop_set_error(args->error, args->error_size, "%s: the host offers no CUDA module loading",
                   spec->op_name);
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(args->error, args->error_size, "%s: the host offers no cuda_launch",
                   spec->op_name);
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->kernels.max_blocks, spec->op_name,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, spec->cuda_fatbin, &s->module, args->error,
                                  args->error_size);
  if (status == DLOP_OK && spec->cuda_contiguous_vectors > 0)
    status = dlop_elementwise_cuda_function(s, "contiguous", dtypes, count,
                                            &s->kernels.contiguous, args);
  if (status == DLOP_OK && spec->cuda_rows != DLOP_ELEMENTWISE_NO_ROWS)
    status = dlop_elementwise_cuda_function(s, "rows", dtypes, count, &s->kernels.rows, args);
  if (status == DLOP_OK)
    status = dlop_elementwise_cuda_function(s, "strided", dtypes, count, &s->kernels.strided, args);
  if (status != DLOP_OK) return status;
  s->kernels.contiguous_elements = (int32_t)(spec->cuda_contiguous_vectors * 16 /
                                             dlop_dtype_size((dlop_dtype)s->output.dtype));
  s->kernels.rows_2d = spec->cuda_rows == DLOP_ELEMENTWISE_ROWS_2D;
  s->kernels.chunk_block =
      (spec->cuda_chunk_dtypes & DLOP_DTYPE_BIT(s->output.dtype)) != 0 ? DLOP_CUDA_CHUNK_BLOCK : 0;
  s->kernels.params = s->params;
  return DLOP_OK;
}

/* ---- make_thunk ----------------------------------------------------------------------------- */

/* "input dtype float32", "input dtypes float32 and int8", "input dtypes a, b and c". */
static inline const char *dlop_elementwise_format_input_dtypes(const dlop_thunk_args *args,
                                                               char *buffer, size_t size) {
  size_t used = 0;
  int32_t i;
  buffer[0] = '\0';
  for (i = 0; i < args->num_inputs && used < size; i++) {
    const char *separator = i == 0 ? (args->num_inputs == 1 ? "input dtype " : "input dtypes ")
                            : i == args->num_inputs - 1 ? " and " : ", ";
    int written = snprintf(buffer + used, size - used, "%s%s", separator,
                           dlop_dtype_name((dlop_dtype)args->inputs[i].dtype));
    if (written > 0) used += (size_t)written;
  }
  buffer[size - 1] = '\0';
  return buffer;
}

/* The kernel dtype of an op of one dtype throughout: input 0's, which every operand must
 * have, among the device's dtypes. */
static inline int dlop_elementwise_one_dtype(const dlop_elementwise_spec *spec,
                                             const dlop_thunk_args *args, dlop_dtype *dtypes,
                                             int32_t *count) {
  uint32_t mask = args->device.type == DLOP_DEVICE_CUDA ? spec->cuda_dtypes : spec->cpu_dtypes;
  int32_t i, same_dtype = args->outputs[0].dtype == args->inputs[0].dtype;
  for (i = 1; i < spec->num_inputs; i++) same_dtype &= args->inputs[i].dtype == args->inputs[0].dtype;
  if (args->inputs[0].dtype < 0 || args->inputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(mask & DLOP_DTYPE_BIT(args->inputs[0].dtype)) || !same_dtype) {
    char inputs[DLOP_ELEMENTWISE_MAX_INPUTS * 24 + 16];
    dlop_set_error(args->error, args->error_size, "%s: no kernel for %s and output dtype %s",
                   spec->op_name, dlop_elementwise_format_input_dtypes(args, inputs, sizeof inputs),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
    return DLOP_UNSUPPORTED;
  }
  dtypes[0] = (dlop_dtype)args->inputs[0].dtype;
  *count = 1;
  return DLOP_OK;
}

/* cpu_kernels' entry for the kernel dtypes, NULL when there is none. */
static inline dlop_elementwise_cpu_kernel dlop_elementwise_cpu_kernel_of(
    const dlop_elementwise_spec *spec, const dlop_dtype *dtypes, int32_t count) {
  size_t index = 0;
  int32_t i;
  for (i = 0; i < count; i++) {
    if ((int)dtypes[i] < 0 || (int)dtypes[i] >= DLOP_DTYPE_COUNT) return NULL;
    index = index * DLOP_DTYPE_COUNT + (size_t)dtypes[i];
  }
  return spec->cpu_kernels[index];
}

static inline int dlop_elementwise_spec_is_valid(const dlop_elementwise_spec *spec) {
  return spec != NULL && spec->op_name != NULL && spec->host != NULL &&
         spec->cpu_kernels != NULL && spec->num_inputs >= 1 &&
         spec->num_inputs <= DLOP_ELEMENTWISE_MAX_INPUTS && spec->cuda_contiguous_vectors >= 0 &&
         spec->cuda_rows >= DLOP_ELEMENTWISE_NO_ROWS && spec->cuda_rows <= DLOP_ELEMENTWISE_ROWS_2D &&
         (spec->cuda_rows != DLOP_ELEMENTWISE_ROWS_2D || spec->num_inputs == 2) &&
         (spec->cuda_fatbin == NULL || spec->cuda_kernel_prefix != NULL);
}

/* make_thunk of an elementwise op: call it from the op's make_thunk with the op's spec (which
 * must outlive the thunks: a static const), or name dlop_elementwise_op_make_thunk below in
 * the op's descriptor. */
static inline int dlop_elementwise_make_thunk(const dlop_elementwise_spec *spec,
                                              const dlop_thunk_args *args) {
  dlop_elementwise_state *s;
  dlop_dtype dtypes[DLOP_ELEMENTWISE_MAX_KERNEL_DTYPES];
  int32_t i, count = 0;
  int status = DLOP_OK;
  if (!dlop_elementwise_spec_is_valid(spec)) {
    dlop_set_error(args->error, args->error_size,
                   "%s: invalid dlop_elementwise_spec (needs op_name, host, cpu_kernels, 1 to %d "
                   "inputs (2 with 2-d rows kernels), and with a fatbin a kernel prefix)",
                   spec != NULL && spec->op_name != NULL ? spec->op_name : "elementwise thunk",
                   DLOP_ELEMENTWISE_MAX_INPUTS);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_elementwise_check_counts(spec, "make_thunk", args->num_inputs, args->num_outputs,
                                         args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (args->device.type != DLOP_DEVICE_CPU && args->device.type != DLOP_DEVICE_CUDA) {
    dlop_set_error(args->error, args->error_size, "%s: device type %d is not supported (cpu or cuda)",
                   spec->op_name, (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  status = spec->kernel_dtypes != NULL ? spec->kernel_dtypes(args, dtypes, &count)
                                       : dlop_elementwise_one_dtype(spec, args, dtypes, &count);
  if (status != DLOP_OK) return status;
  if (count < 1 || count > DLOP_ELEMENTWISE_MAX_KERNEL_DTYPES) {
    dlop_set_error(args->error, args->error_size,
                   "%s: kernel_dtypes gave %d kernel dtypes, expected 1 to %d", spec->op_name,
                   (int)count, DLOP_ELEMENTWISE_MAX_KERNEL_DTYPES);
    return DLOP_INVALID_ARGUMENT;
  }
  s = (dlop_elementwise_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: out of memory for the thunk state",
                   spec->op_name);
    return DLOP_OUT_OF_MEMORY;
  }
  s->spec = spec;
  for (i = 0; i < spec->num_inputs; i++) s->inputs[i] = args->inputs[i];
  s->output = args->outputs[0];
  s->device = args->device;
  if (spec->make_params != NULL)
    status = spec->make_params(args, s->params, args->error, args->error_size);
  if (status == DLOP_OK && args->device.type == DLOP_DEVICE_CUDA) {
    status = dlop_elementwise_prepare_cuda(s, dtypes, count, args);
  } else if (status == DLOP_OK) {
    s->cpu = dlop_elementwise_cpu_kernel_of(spec, dtypes, count);
    if (s->cpu == NULL) {
      dlop_set_error(args->error, args->error_size, "%s: no CPU kernel for dtype %s",
                     spec->op_name, dlop_dtype_name((dlop_dtype)args->inputs[0].dtype));
      status = DLOP_UNSUPPORTED;
    }
  }
  if (status != DLOP_OK) {
    dlop_elementwise_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? dlop_elementwise_run_cuda
                                                           : dlop_elementwise_run_cpu;
  args->thunk->destroy = dlop_elementwise_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}

/* The op's make_thunk when its descriptor's op_data is its spec:
 * .make_thunk = dlop_elementwise_op_make_thunk, .op_data = (void *)&my_spec. */
static inline int dlop_elementwise_op_make_thunk(const dlop_thunk_args *args) {
  return dlop_elementwise_make_thunk((const dlop_elementwise_spec *)args->op->op_data, args);
}

#ifdef __cplusplus
}
#endif

#endif
