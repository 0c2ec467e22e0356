"""The files every plugin that dlop.export_plugin writes shares, whatever its ops: the C header
of the type rule, shape rule, scalar body and thunks of an elementwise op of N inputs and M
outputs (exported_elementwise.h), and the CUDA header of its kernels (exported_cuda.cuh).  They
are plain text here because the package installs only .py files; the generator (_export.py)
writes them as they are."""

ELEMENTWISE_H = r'''/* exported_elementwise.h — what every op of this plugin shares (written by dlop.export_plugin;
 * edit freely): an elementwise op of one dtype throughout with inputs broadcast as in NumPy and
 * several outputs of the broadcast shape. Each op's .c file fills an exported_op; the type rule,
 * the shape rule, the scalar body that fusion inlines and the thunks (a strided CPU loop over the
 * host's thread pool; one strided CUDA kernel from the plugin's embedded fatbin) are here, once. */
#ifndef EXPORTED_ELEMENTWISE_H
#define EXPORTED_ELEMENTWISE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlop/kit/elementwise.h>

/* The kit's loop carries the outputs and the inputs together: at most DLOP_KERNEL_MAX_OPERANDS. */
#define EXPORTED_MAX_OPERANDS DLOP_KERNEL_MAX_OPERANDS
/* Each parameter takes 8 bytes of the block (a double or an int64_t, in declaration order). */
#define EXPORTED_MAX_PARAMS 8

/* One op, as its .c file describes it. */
typedef struct exported_op {
  const char *name;
  int32_t num_inputs, num_outputs;
  const char *const *inputs;  /* the names the body reads */
  const char *const *outputs; /* the names the body assigns */
  uint32_t dtypes;            /* DLOP_DTYPE_BIT mask, the same on the CPU and CUDA */
  /* by dtype; pointers[0..num_outputs) are the outputs, then the inputs */
  const dlop_elementwise_cpu_kernel *cpu_kernels;
  const unsigned char *cuda_fatbin; /* NULL in a build without CUDA kernels */
  const char *cuda_prefix;          /* the CUDA kernels are <prefix>_<dtype> */
  const char *body;                 /* the body's text, for the scalar body fusion inlines */
} exported_op;

/* The CUDA kernels' operand pointers, by value: the same order as the CPU kernels'. */
typedef struct exported_pointers {
  char *p[EXPORTED_MAX_OPERANDS];
} exported_pointers;

static inline const exported_op *exported_of(const dlop_op_desc *op) {
  return (const exported_op *)op->op_data;
}

/* ---- type rule and shape rule --------------------------------------------------------------- */

/* The counts, then the inputs' broadcast type. */
static inline int exported_broadcast(const exported_op *e, const dlop_node_args *args, dlop_type *out) {
  int32_t i;
  if (args->num_inputs != e->num_inputs || args->num_outputs != e->num_outputs) {
    dlop_set_error(args->error, args->error_size, "%s: takes %d inputs and gives %d outputs, got %d and %d",
                   e->name, (int)e->num_inputs, (int)e->num_outputs, (int)args->num_inputs,
                   (int)args->num_outputs);
    return DLOP_TYPE_ERROR;
  }
  *out = args->inputs[0];
  for (i = 1; i < e->num_inputs; i++) {
    dlop_type folded;
    char message[512];
    int status = dlop_broadcast_types(out, &args->inputs[i], &folded, message, sizeof message);
    if (status != DLOP_OK) {
      dlop_set_error(args->error, args->error_size, "%s: input %s: %s", e->name, e->inputs[i], message);
      return status;
    }
    *out = folded;
  }
  return DLOP_OK;
}

/* Every input of one dtype of the op's; every output of that dtype and the broadcast shape. */
static inline int exported_make_node(const dlop_node_args *args) {
  const exported_op *e = exported_of(args->op);
  dlop_type out;
  int32_t i, status;
  for (i = 0; i < args->num_inputs && i < e->num_inputs; i++) {
    const dlop_type *t = &args->inputs[i];
    char supported[160];
    if (t->dtype < 0 || t->dtype >= DLOP_DTYPE_COUNT || !(e->dtypes & DLOP_DTYPE_BIT(t->dtype))) {
      dlop_set_error(args->error, args->error_size, "%s: input %s has dtype %s, expected one of %s",
                     e->name, e->inputs[i], dlop_dtype_name((dlop_dtype)t->dtype),
                     dlop_format_dtypes(e->dtypes, supported, sizeof supported));
      return DLOP_TYPE_ERROR;
    }
    if (t->dtype != args->inputs[0].dtype) {
      dlop_set_error(args->error, args->error_size,
                     "%s: every input must have one dtype: %s is %s but %s is %s (cast one of them)",
                     e->name, e->inputs[0], dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                     e->inputs[i], dlop_dtype_name((dlop_dtype)t->dtype));
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim < 0 || t->ndim > DLOP_MAX_NDIM) {
      dlop_set_error(args->error, args->error_size, "%s: input %s has rank %d, expected 0 to %d",
                     e->name, e->inputs[i], (int)t->ndim, DLOP_MAX_NDIM);
      return DLOP_TYPE_ERROR;
    }
  }
  status = exported_broadcast(e, args, &out);
  if (status != DLOP_OK) return status;
  for (i = 0; i < args->num_outputs; i++) args->outputs[i] = out;
  return DLOP_OK;
}

static inline int exported_infer_shape(const dlop_node_args *args) {
  const exported_op *e = exported_of(args->op);
  dlop_type out;
  int32_t o, status = exported_broadcast(e, args, &out);
  if (status != DLOP_OK) return status;
  for (o = 0; o < args->num_outputs; o++) {
    if (args->outputs[o].ndim != out.ndim) {
      dlop_set_error(args->error, args->error_size,
                     "%s: inputs broadcast to rank %d but make_node gave output %s rank %d", e->name,
                     (int)out.ndim, e->outputs[o], (int)args->outputs[o].ndim);
      return DLOP_SHAPE_ERROR;
    }
    if (out.ndim > 0) memcpy(args->outputs[o].shape, out.shape, sizeof(int64_t) * (size_t)out.ndim);
  }
  return DLOP_OK;
}

/* ---- the scalar body (ABI 1.2): what fusion inlines ---------------------------------------- */

/* float16 and bfloat16 compute in float32, every other dtype in itself: as the kernels do. */
static inline int32_t exported_compute_dtype(int32_t dtype) {
  return dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16 ? DLOP_FLOAT32 : dtype;
}

static inline const char *exported_c_type(int32_t dtype) {
  switch (dtype) {
    case DLOP_UINT8: return "uint8_t";
    case DLOP_INT8: return "int8_t";
    case DLOP_INT16: return "int16_t";
    case DLOP_INT32: return "int32_t";
    case DLOP_INT64: return "int64_t";
    case DLOP_FLOAT64: return "double";
    default: return "float";
  }
}

/* The body between declarations of its names, the host's in0.. and out0.. around them, and each
 * parameter a constant of its value (a double by its bits, so every value is exact). */
static inline int exported_scalar_body(dlop_scalar_body_args *args) {
  const exported_op *e = exported_of(args->op);
  int32_t compute = exported_compute_dtype(args->inputs[0].dtype), k;
  size_t used = 0, size = args->code_buffer_size;
  int written = 0;
#define EXPORTED_ADD(...)                                                           \
  do {                                                                              \
    written = snprintf(args->code_buffer + used, used < size ? size - used : 0, __VA_ARGS__); \
    if (written < 0 || (size_t)written >= size - used) goto too_long;               \
    used += (size_t)written;                                                        \
  } while (0)
  if (size == 0) goto too_long;
  EXPORTED_ADD("typedef %s T;\n", exported_c_type(compute));
  for (k = 0; k < e->num_inputs; k++) EXPORTED_ADD("const T %s = in%d;\n", e->inputs[k], (int)k);
  for (k = 0; k < e->num_outputs; k++) EXPORTED_ADD("T %s;\n", e->outputs[k]);
  for (k = 0; k < args->num_params; k++) {
    const dlop_param_decl *decl = &args->op->params[k];
    if (decl->kind == DLOP_PARAM_FLOAT)
      EXPORTED_ADD("const double %s = dlop_scalar_double_from_bits(0x%016llxull);\n", decl->name,
                   (unsigned long long)dlop_double_bits(args->params[k].u.f));
    else if (args->params[k].u.i == INT64_MIN)
      EXPORTED_ADD("const int64_t %s = (-9223372036854775807ll - 1);\n", decl->name);
    else
      EXPORTED_ADD("const int64_t %s = (int64_t)%lldll;\n", decl->name, (long long)args->params[k].u.i);
  }
  EXPORTED_ADD("%s\n;\n", e->body);
  for (k = 0; k < e->num_outputs; k++) EXPORTED_ADD("out%d = %s;\n", (int)k, e->outputs[k]);
#undef EXPORTED_ADD
  args->code = args->code_buffer;
  args->flags = 0; /* the body may call math functions: not promised bit for bit across devices */
  for (k = 0; k < args->num_inputs; k++) args->input_compute_dtypes[k] = compute;
  for (k = 0; k < args->num_outputs; k++) args->output_compute_dtypes[k] = compute;
  return DLOP_OK;
too_long:
  dlop_set_error(args->error, args->error_size, "%s: the scalar body does not fit in %zu bytes",
                 e->name, size);
  return DLOP_PLUGIN_ERROR;
}

/* ---- thunks ------------------------------------------------------------------------------ */

typedef struct exported_state {
  const exported_op *op;
  dlop_device device;
  dlop_type inputs[EXPORTED_MAX_OPERANDS], outputs[EXPORTED_MAX_OPERANDS];
  dlop_elementwise_cpu_kernel cpu; /* CPU only */
  void *module, *function;         /* CUDA only */
  uint32_t max_blocks;             /* CUDA only */
  uint64_t params[EXPORTED_MAX_PARAMS]; /* the kernels' parameter block */
} exported_state;

static inline void exported_destroy(void *state) {
  exported_state *s = (exported_state *)state;
  if (s == NULL) return;
  if (s->module != NULL && DLOP_HOST_HAS(dlop_plugin_host(), cuda_module_unload))
    dlop_plugin_host()->cuda_module_unload(s->module);
  free(s);
}

/* The run's tensors against the node's types and shapes, then the loop: the outputs first (the
 * first one gives the shape; the others have it, checked), then the inputs broadcast to it. */
static inline int exported_prepare(const exported_state *s, const dlop_run_args *args,
                                   dlop_strided_loop *loop) {
  const exported_op *e = s->op;
  dlop_tensor rest[EXPORTED_MAX_OPERANDS];
  int32_t k, status;
  if (args->num_inputs != e->num_inputs || args->num_outputs != e->num_outputs) {
    dlop_set_error(args->error, args->error_size, "%s: run with %d inputs and %d outputs, expected %d and %d",
                   e->name, (int)args->num_inputs, (int)args->num_outputs, (int)e->num_inputs,
                   (int)e->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors(e->name, "input", args->inputs, e->num_inputs, s->inputs, s->device,
                              args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors(e->name, "output", args->outputs, e->num_outputs, s->outputs,
                                s->device, args->error, args->error_size);
  for (k = 0; k < e->num_outputs && status == DLOP_OK; k++)
    status = dlop_check_broadcast_output(e->name, args->inputs, e->num_inputs, &args->outputs[k],
                                         args->error, args->error_size);
  if (status != DLOP_OK) return status;
  for (k = 1; k < e->num_outputs; k++) rest[k - 1] = args->outputs[k];
  for (k = 0; k < e->num_inputs; k++) rest[e->num_outputs - 1 + k] = args->inputs[k];
  return dlop_strided_loop_setup(loop, &args->outputs[0], rest, e->num_outputs - 1 + e->num_inputs,
                                 1, e->name, args->error, args->error_size);
}

static inline int exported_run_cpu(void *state, const dlop_run_args *args) {
  const exported_state *s = (const exported_state *)state;
  dlop_elementwise_cpu_context context;
  dlop_strided_loop loop;
  int status = exported_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  context.loop = &loop;
  context.kernel = s->cpu;
  context.params = s->params;
  return dlop_strided_loop_run(dlop_plugin_host(), &loop, DLOP_ELEMENTWISE_CPU_GRAIN,
                               dlop_elementwise_cpu_chunk, &context, s->op->name, args->error,
                               args->error_size);
}

/* One launch of the op's strided kernel: (n, layout, pointers, parameter block). */
static inline int exported_run_cuda(void *state, const dlop_run_args *args) {
  const exported_state *s = (const exported_state *)state;
  dlop_strided_loop loop;
  exported_pointers pointers;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {DLOP_CUDA_ELEMENTWISE_BLOCK, 1, 1};
  void *kernel_args[4];
  int32_t k;
  int status = exported_prepare(s, args, &loop);
  if (status != DLOP_OK || loop.numel == 0) return status;
  if (args->stream == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: no CUDA stream given", s->op->name);
    return DLOP_INVALID_ARGUMENT;
  }
  memset(&pointers, 0, sizeof pointers);
  for (k = 0; k < loop.layout.num_operands; k++) pointers.p[k] = loop.base[k];
  grid[0] = dlop_cuda_grid_size(loop.numel, block[0], s->max_blocks);
  kernel_args[0] = &loop.numel;
  kernel_args[1] = &loop.layout;
  kernel_args[2] = &pointers;
  kernel_args[3] = (void *)s->params;
  return dlop_plugin_host()->cuda_launch(s->function, grid, block, 0, args->stream, kernel_args,
                                         args->error, args->error_size);
}

static inline int exported_prepare_cuda(exported_state *s, const dlop_thunk_args *args) {
  const dlop_host_api *host = dlop_plugin_host();
  const exported_op *e = s->op;
  char name[128];
  int status;
  if (e->cuda_fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)",
                   e->name);
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function) ||
      !DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(args->error, args->error_size, "%s: the host offers no CUDA module loading and launch",
                   e->name);
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->max_blocks, e->name, args->error,
                                args->error_size);
  if (status == DLOP_OK)
    status = host->cuda_module_load(args->device.id, e->cuda_fatbin, &s->module, args->error,
                                    args->error_size);
  snprintf(name, sizeof name, "%s_%s", e->cuda_prefix, dlop_dtype_name((dlop_dtype)args->inputs[0].dtype));
  if (status == DLOP_OK)
    status = host->cuda_module_function(s->module, name, &s->function, args->error, args->error_size);
  return status;
}

static inline int exported_make_thunk(const dlop_thunk_args *args) {
  const exported_op *e = exported_of(args->op);
  exported_state *s;
  int32_t k, dtype = args->num_inputs > 0 ? args->inputs[0].dtype : -1;
  int status = DLOP_OK;
  if (args->num_inputs != e->num_inputs || args->num_outputs != e->num_outputs) {
    dlop_set_error(args->error, args->error_size, "%s: make_thunk with %d inputs and %d outputs, expected %d and %d",
                   e->name, (int)args->num_inputs, (int)args->num_outputs, (int)e->num_inputs,
                   (int)e->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  if (args->device.type != DLOP_DEVICE_CPU && args->device.type != DLOP_DEVICE_CUDA) {
    dlop_set_error(args->error, args->error_size, "%s: device type %d is not supported (cpu or cuda)",
                   e->name, (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  for (k = 0; k < e->num_inputs + e->num_outputs; k++) {
    int32_t d = k < e->num_inputs ? args->inputs[k].dtype : args->outputs[k - e->num_inputs].dtype;
    if (d != dtype || dtype < 0 || dtype >= DLOP_DTYPE_COUNT || !(e->dtypes & DLOP_DTYPE_BIT(dtype))) {
      dlop_set_error(args->error, args->error_size, "%s: no kernel for operand dtype %s with input %s of dtype %s",
                     e->name, d >= 0 && d < DLOP_DTYPE_COUNT ? dlop_dtype_name((dlop_dtype)d) : "?",
                     e->inputs[0], dtype >= 0 && dtype < DLOP_DTYPE_COUNT ? dlop_dtype_name((dlop_dtype)dtype) : "?");
      return DLOP_UNSUPPORTED;
    }
  }
  if (args->num_params > EXPORTED_MAX_PARAMS) {
    dlop_set_error(args->error, args->error_size, "%s: %d parameters, at most %d fit the block",
                   e->name, (int)args->num_params, EXPORTED_MAX_PARAMS);
    return DLOP_INVALID_ARGUMENT;
  }
  s = (exported_state *)calloc(1, sizeof *s);
  if (s == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: out of memory for the thunk state", e->name);
    return DLOP_OUT_OF_MEMORY;
  }
  s->op = e;
  s->device = args->device;
  memcpy(s->inputs, args->inputs, sizeof(dlop_type) * (size_t)e->num_inputs);
  memcpy(s->outputs, args->outputs, sizeof(dlop_type) * (size_t)e->num_outputs);
  /* the host filled in defaults and checked kinds: a double or an int64_t per parameter */
  for (k = 0; k < args->num_params; k++)
    memcpy(&s->params[k], args->params[k].kind == DLOP_PARAM_FLOAT ? (const void *)&args->params[k].u.f
                                                                  : (const void *)&args->params[k].u.i, 8);
  if (args->device.type == DLOP_DEVICE_CUDA) {
    status = exported_prepare_cuda(s, args);
  } else {
    s->cpu = e->cpu_kernels[dtype];
    if (s->cpu == NULL) {
      dlop_set_error(args->error, args->error_size, "%s: no CPU kernel for dtype %s", e->name,
                     dlop_dtype_name((dlop_dtype)dtype));
      status = DLOP_UNSUPPORTED;
    }
  }
  if (status != DLOP_OK) {
    exported_destroy(s);
    return status;
  }
  args->thunk->state = s;
  args->thunk->run = args->device.type == DLOP_DEVICE_CUDA ? exported_run_cuda : exported_run_cpu;
  args->thunk->destroy = exported_destroy;
  args->thunk->workspace_bytes = 0;
  return DLOP_OK;
}

/* ---- float16 and bfloat16 on the CPU: loaded exactly, stored rounded to nearest even, a NaN
 * as the canonical quiet NaN with its sign (what dlop's own generated kernels store) ---------- */

static inline float exported_load_float16(uint16_t h) { return dlop_half_to_float(h); }
static inline float exported_load_bfloat16(uint16_t b) { return dlop_bfloat16_to_float(b); }
static inline uint16_t exported_store_float16(float f) {
  if (f != f) return (uint16_t)(0x7E00u | ((dlop_float_bits(f) >> 16) & 0x8000u));
  return dlop_float_to_half(f);
}
static inline uint16_t exported_store_bfloat16(float f) {
  if (f != f) return (uint16_t)(0x7FC0u | ((dlop_float_bits(f) >> 16) & 0x8000u));
  return dlop_float_to_bfloat16(f);
}
#define EXPORTED_SAME(x) (x)

/* In <op>_body.h: static inline on the CPU, a device function under nvcc. */
#define EXPORTED_FN static inline

/* A CPU kernel of op PREFIX for one dtype: its element function PREFIX_element_<COMPUTE> on each
 * element of a run of the kit's loop, operands loaded and stored through LOAD and STORE. The
 * per-op ARGS and OUTS macros (in the op's .c) give the element function's arguments. */
#define EXPORTED_CPU_KERNEL(NAME, ELEMENT, STORAGE, COMPUTE, LOAD, STORE, NUM_OUTPUTS, INS, OUTS) \
  static void NAME(char *const *dlop_p, const int64_t *dlop_s, int64_t dlop_n, const void *dlop_block) { \
    int64_t dlop_i;                                                                         \
    for (dlop_i = 0; dlop_i < dlop_n; dlop_i++) {                                           \
      COMPUTE dlop_out[NUM_OUTPUTS];                                                        \
      ELEMENT(INS(STORAGE, LOAD) dlop_out, dlop_block);                                     \
      OUTS(STORAGE, STORE)                                                                  \
    }                                                                                       \
  }
/* Input k (operand NUM_OUTPUTS + k) of element dlop_i, and output k's store. */
#define EXPORTED_IN(STORAGE, LOAD, OPERAND) LOAD(((const STORAGE *)dlop_p[OPERAND])[dlop_i * dlop_s[OPERAND]])
#define EXPORTED_OUT(STORAGE, STORE, K) ((STORAGE *)dlop_p[K])[dlop_i * dlop_s[K]] = STORE(dlop_out[K]);

#endif
'''

CUDA_CUH = r'''/* exported_cuda.cuh — what the CUDA kernels of every op of this plugin share (written by
 * dlop.export_plugin; edit freely): float16 and bfloat16 loaded into float and stored rounded
 * once (a NaN canonical, as on the CPU), and the strided kernel of an op for one dtype over the
 * kit's loop layout, launched by exported_run_cuda (exported_elementwise.h). */
#ifndef EXPORTED_CUDA_CUH
#define EXPORTED_CUDA_CUH

#include <math.h>

#include <dlop/kit/cuda_kernel_util.cuh>

typedef struct exported_pointers {
  char *p[DLOP_KERNEL_MAX_OPERANDS];
} exported_pointers;

__device__ __forceinline__ float exported_load_float16(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float exported_load_bfloat16(uint16_t b) {
  return __uint_as_float((uint32_t)b << 16);
}
__device__ __forceinline__ uint16_t exported_store_float16(float f) {
  if (f != f) return (uint16_t)(0x7E00u | ((__float_as_uint(f) >> 16) & 0x8000u));
  return __half_as_ushort(__float2half_rn(f));
}
__device__ __forceinline__ uint16_t exported_store_bfloat16(float f) {
  if (f != f) return (uint16_t)(0x7FC0u | ((__float_as_uint(f) >> 16) & 0x8000u));
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
#define EXPORTED_SAME(x) (x)

/* In <op>_body.h: a device function under nvcc. */
#define EXPORTED_FN static __device__ __forceinline__

/* The kernel NAME of an op for one dtype: each element of the loop through the op's element
 * function, as the CPU kernel does (EXPORTED_CPU_KERNEL); NAME##_at does one element. */
#define EXPORTED_CUDA_KERNEL(NAME, PARAMS, ELEMENT, STORAGE, COMPUTE, LOAD, STORE, NUM_OUTPUTS, INS, OUTS) \
  static __device__ __forceinline__ void NAME##_at(char *const *dlop_p, const int64_t *dlop_off,  \
                                                    const PARAMS *dlop_params) {                  \
    COMPUTE dlop_out[NUM_OUTPUTS];                                                                \
    ELEMENT(INS(STORAGE, LOAD) dlop_out, dlop_params);                                            \
    OUTS(STORAGE, STORE)                                                                          \
  }                                                                                               \
  extern "C" __global__ void NAME(int64_t dlop_n, dlop_nd_offsets dlop_layout,                   \
                                  exported_pointers dlop_pointers, PARAMS dlop_params) {         \
    DLOP_CUDA_STRIDED_LOOP(dlop_n, dlop_layout, NAME##_at(dlop_pointers.p, off, &dlop_params))    \
  }
/* Input k (operand NUM_OUTPUTS + k) of the element at dlop_off, and output k's store. */
#define EXPORTED_IN(STORAGE, LOAD, OPERAND) LOAD(((const STORAGE *)dlop_p[OPERAND])[dlop_off[OPERAND]])
#define EXPORTED_OUT(STORAGE, STORE, K) ((STORAGE *)dlop_p[K])[dlop_off[K]] = STORE(dlop_out[K]);

#endif
'''
