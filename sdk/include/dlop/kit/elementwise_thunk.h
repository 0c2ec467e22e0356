/* dlop/kit/elementwise_thunk.h — make_thunk for an elementwise op (1 to 3 inputs, one output, one
 * dtype throughout) from a small const spec: checks, CPU thunk, CUDA thunk that loads the
 * plugin's embedded fatbin and launches its kernels. Header-only; plugin C code only. */
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

/* The plugin's C kernel: runs over a loop set up with the output first, then the inputs. */
typedef int (*dlop_elementwise_cpu_fn)(const dlop_strided_loop *loop, dlop_dtype dtype,
                                       char *error, size_t error_size);

/* What an elementwise op tells the helper. The CUDA kernels, for each dtype in cuda_dtypes,
 * are "<cuda_kernel_prefix>_contiguous_<dtype>", "_rows_<dtype>" and "_strided_<dtype>" with
 * the signatures dlop_cuda_elementwise (cuda_launch.h) describes, dtype as dlop_dtype_name. */
typedef struct dlop_elementwise_spec {
  const char *op_name;                /* starts every message: "exp: ..." */
  const dlop_host_api *(*host)(void); /* the table the plugin got in dlop_plugin_init */
  int32_t num_inputs;                 /* 1 to DLOP_ELEMENTWISE_MAX_INPUTS */
  /* 0: every input has the output's shape; 1: the output has the inputs' broadcast shape */
  int32_t broadcast;
  uint32_t cpu_dtypes, cuda_dtypes; /* DLOP_DTYPE_BIT masks, as in the op descriptor */
  dlop_elementwise_cpu_fn cpu_run;
  const unsigned char *cuda_fatbin; /* DLOP_FATBIN(symbol): NULL when built without CUDA */
  const char *cuda_kernel_prefix;   /* "dlop_exp" */
  /* 16-byte vectors one thread of the contiguous kernel handles (its unroll), 1 or more */
  int32_t cuda_contiguous_vectors;
} dlop_elementwise_spec;

/* One thunk: the types it was made for and, on CUDA, its module and kernels. */
typedef struct dlop_elementwise_state {
  const dlop_elementwise_spec *spec;
  dlop_type inputs[DLOP_ELEMENTWISE_MAX_INPUTS];
  dlop_type output;
  dlop_device device;
  void *module;                  /* CUDA only */
  dlop_cuda_elementwise kernels; /* CUDA only: CUfunctions and launch sizes */
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
  return dlop_strided_loop_init(loop, &args->outputs[0], args->inputs, spec->num_inputs,
                                spec->op_name, args->error, args->error_size);
}

static inline int dlop_elementwise_run_cpu(void *state, const dlop_run_args *args) {
  const dlop_elementwise_state *s = (const dlop_elementwise_state *)state;
  dlop_strided_loop loop;
  int status = dlop_elementwise_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return s->spec->cpu_run(&loop, (dlop_dtype)s->inputs[0].dtype, args->error, args->error_size);
}

static inline int dlop_elementwise_run_cuda(void *state, const dlop_run_args *args) {
  const dlop_elementwise_state *s = (const dlop_elementwise_state *)state;
  dlop_strided_loop loop;
  int status = dlop_elementwise_prepare(s, args, &loop);
  if (status != DLOP_OK) return status;
  return dlop_cuda_launch_elementwise(s->spec->host(), &loop, &s->kernels, args->stream,
                                      s->spec->op_name, args->error, args->error_size);
}

/* Looks up "<prefix>_<kind>_<dtype>" in the thunk's module. */
static inline int dlop_elementwise_cuda_function(const dlop_elementwise_state *s, const char *kind,
                                                 void **function, const dlop_thunk_args *args) {
  const dlop_elementwise_spec *spec = s->spec;
  char name[128];
  int written = snprintf(name, sizeof name, "%s_%s_%s", spec->cuda_kernel_prefix, kind,
                         dlop_dtype_name((dlop_dtype)s->inputs[0].dtype));
  if (written < 0 || (size_t)written >= sizeof name) {
    dlop_set_error(args->error, args->error_size,
                   "%s: CUDA kernel name prefix \"%s\" is too long (names must fit %zu bytes)",
                   spec->op_name, spec->cuda_kernel_prefix, sizeof name);
    return DLOP_INVALID_ARGUMENT;
  }
  return spec->host()->cuda_module_function(s->module, name, function, args->error,
                                            args->error_size);
}

/* Loads the fatbin on the thunk's device and finds the dtype's three kernels. */
static inline int dlop_elementwise_prepare_cuda(dlop_elementwise_state *s,
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
  status = dlop_cuda_max_blocks(host, args->device.id, &s->kernels.max_blocks, spec->op_name,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  status = host->cuda_module_load(args->device.id, spec->cuda_fatbin, &s->module, args->error,
                                  args->error_size);
  if (status == DLOP_OK)
    status = dlop_elementwise_cuda_function(s, "contiguous", &s->kernels.contiguous, args);
  if (status == DLOP_OK) status = dlop_elementwise_cuda_function(s, "rows", &s->kernels.rows, args);
  if (status == DLOP_OK)
    status = dlop_elementwise_cuda_function(s, "strided", &s->kernels.strided, args);
  if (status != DLOP_OK) return status;
  s->kernels.contiguous_elements =
      (int32_t)(spec->cuda_contiguous_vectors * 16 / dlop_dtype_size((dlop_dtype)s->inputs[0].dtype));
  return DLOP_OK;
}

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

/* make_thunk of an elementwise op: call it from the op's make_thunk with the op's spec (which
 * must outlive the thunks: a static const). */
static inline int dlop_elementwise_make_thunk(const dlop_elementwise_spec *spec,
                                              const dlop_thunk_args *args) {
  dlop_elementwise_state *s;
  uint32_t dtypes;
  int32_t i;
  int status = DLOP_OK, same_dtype = 1;
  if (spec == NULL || spec->op_name == NULL || spec->host == NULL || spec->cpu_run == NULL ||
      spec->num_inputs < 1 || spec->num_inputs > DLOP_ELEMENTWISE_MAX_INPUTS ||
      (spec->cuda_fatbin != NULL &&
       (spec->cuda_kernel_prefix == NULL || spec->cuda_contiguous_vectors < 1))) {
    dlop_set_error(args->error, args->error_size,
                   "%s: invalid dlop_elementwise_spec (needs op_name, host, cpu_run, 1 to %d "
                   "inputs, and with a fatbin a kernel prefix and 1 or more contiguous vectors)",
                   spec != NULL && spec->op_name != NULL ? spec->op_name : "elementwise thunk",
                   DLOP_ELEMENTWISE_MAX_INPUTS);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_elementwise_check_counts(spec, "make_thunk", args->num_inputs, args->num_outputs,
                                         args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (args->device.type == DLOP_DEVICE_CPU) dtypes = spec->cpu_dtypes;
  else if (args->device.type == DLOP_DEVICE_CUDA) dtypes = spec->cuda_dtypes;
  else {
    dlop_set_error(args->error, args->error_size, "%s: device type %d is not supported (cpu or cuda)",
                   spec->op_name, (int)args->device.type);
    return DLOP_UNSUPPORTED;
  }
  for (i = 1; i < spec->num_inputs; i++) same_dtype &= args->inputs[i].dtype == args->inputs[0].dtype;
  if (args->inputs[0].dtype < 0 || args->inputs[0].dtype >= DLOP_DTYPE_COUNT ||
      !(dtypes & DLOP_DTYPE_BIT(args->inputs[0].dtype)) || !same_dtype ||
      args->outputs[0].dtype != args->inputs[0].dtype) {
    char inputs[DLOP_ELEMENTWISE_MAX_INPUTS * 24 + 16];
    dlop_set_error(args->error, args->error_size, "%s: no kernel for %s and output dtype %s",
                   spec->op_name, dlop_elementwise_format_input_dtypes(args, inputs, sizeof inputs),
                   dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
    return DLOP_UNSUPPORTED;
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
  if (args->device.type == DLOP_DEVICE_CUDA) status = dlop_elementwise_prepare_cuda(s, args);
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

#ifdef __cplusplus
}
#endif

#endif
