/* source_elementwise_stages.c — the stages of an op defined by dlop_define_elementwise. Type
 * rule: inputs of one dtype the op declares, every output of that dtype; shape rule: NumPy
 * broadcasting. Its scalar body is the user's body wrapped in declarations of its names, so
 * compiled functions fuse it with its neighbours; its thunk, on either device, is the kernel
 * the fusion pass generates for a group of its node alone (fusion_alone.h), so the op has one
 * implementation, compiled by the device's run-time compiler behind the same cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlop/kit/broadcast.h>
#include <dlop/kit/kernel_error.h>
#include <dlop/kit/tensor_check.h>

#include "cuda_driver.h"
#include "fusion.h"
#include "fusion_alone.h"
#include "source_elementwise.h"

static const dlop__source_elementwise *source_of(const dlop_op_desc *op) {
  return (const dlop__source_elementwise *)op->op_data;
}

/* The inputs' broadcast type, after the arity and dtype checks of make_node. */
static int broadcast_inputs(const dlop__source_elementwise *source, const dlop_node_args *args,
                            dlop_type *out) {
  if (args->num_inputs != source->num_inputs || args->num_outputs != source->num_outputs) {
    dlop__format(args->error, args->error_size,
                 "%s: takes %d input%s and gives %d output%s, got %d input%s", source->name,
                 (int)source->num_inputs, source->num_inputs == 1 ? "" : "s",
                 (int)source->num_outputs, source->num_outputs == 1 ? "" : "s",
                 (int)args->num_inputs, args->num_inputs == 1 ? "" : "s");
    return DLOP_TYPE_ERROR;
  }
  *out = args->inputs[0];
  for (int32_t i = 1; i < args->num_inputs; i++) {
    dlop_type folded;
    char message[512];
    int status = dlop_broadcast_types(out, &args->inputs[i], &folded, message, sizeof message);
    if (status != DLOP_OK) {
      dlop__format(args->error, args->error_size, "%s: input %s: %s", source->name,
                   source->inputs[i], message);
      return status;
    }
    *out = folded;
  }
  return DLOP_OK;
}

static int make_node(const dlop_node_args *args) {
  const dlop__source_elementwise *source = source_of(args->op);
  for (int32_t i = 0; i < args->num_inputs && i < source->num_inputs; i++) {
    const dlop_type *t = &args->inputs[i];
    if (t->dtype < 0 || t->dtype >= DLOP_DTYPE_COUNT || !(source->dtypes & DLOP_DTYPE_BIT(t->dtype))) {
      char supported[160];
      dlop__format(args->error, args->error_size,
                   "%s: input %s has dtype %s, expected one of %s (cast it first)", source->name,
                   source->inputs[i], dlop_dtype_name((dlop_dtype)t->dtype),
                   dlop_format_dtypes(source->dtypes, supported, sizeof supported));
      return DLOP_TYPE_ERROR;
    }
    if (t->dtype != args->inputs[0].dtype) {
      dlop__format(args->error, args->error_size,
                   "%s: every input must have one dtype: %s is %s but %s is %s (cast one of them)",
                   source->name, source->inputs[0], dlop_dtype_name((dlop_dtype)args->inputs[0].dtype),
                   source->inputs[i], dlop_dtype_name((dlop_dtype)t->dtype));
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim < 0 || t->ndim > DLOP_MAX_NDIM) {
      dlop__format(args->error, args->error_size, "%s: input %s has rank %d, expected 0 to %d",
                   source->name, source->inputs[i], (int)t->ndim, DLOP_MAX_NDIM);
      return DLOP_TYPE_ERROR;
    }
  }
  dlop_type out;
  int status = broadcast_inputs(source, args, &out);
  if (status != DLOP_OK) return status;
  for (int32_t o = 0; o < args->num_outputs; o++) args->outputs[o] = out;
  return DLOP_OK;
}

static int infer_shape(const dlop_node_args *args) {
  const dlop__source_elementwise *source = source_of(args->op);
  dlop_type out;
  int status = broadcast_inputs(source, args, &out);
  if (status != DLOP_OK) return status;
  for (int32_t o = 0; o < args->num_outputs; o++) {
    if (args->outputs[o].ndim != out.ndim) {
      dlop__format(args->error, args->error_size,
                   "%s: inputs broadcast to rank %d but make_node gave output %s rank %d",
                   source->name, (int)out.ndim, source->outputs[o], (int)args->outputs[o].ndim);
      return DLOP_SHAPE_ERROR;
    }
    if (out.ndim > 0) memcpy(args->outputs[o].shape, out.shape, sizeof(int64_t) * (size_t)out.ndim);
  }
  return DLOP_OK;
}

/* float16 and bfloat16 are computed in float32 (the host converts), every other dtype in
 * itself. */
static int32_t compute_dtype(int32_t dtype) {
  return dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16 ? DLOP_FLOAT32 : dtype;
}

static int scalar_body(dlop_scalar_body_args *args) {
  const dlop__source_elementwise *source = source_of(args->op);
  int32_t dtype = args->inputs[0].dtype;
  int status = dlop__source_elementwise_code(source, compute_dtype(dtype), args->code_buffer,
                                             args->code_buffer_size);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "%s: the wrapped body does not fit in %zu bytes",
                 source->name, args->code_buffer_size);
    return DLOP_PLUGIN_ERROR;
  }
  args->code = args->code_buffer;
  /* it may call math functions: never promised bit for bit (no DLOP_SCALAR_BODY_EXACT); its
   * parameters are the kernel's run-time values, so one compile serves every value */
  args->flags = DLOP__SCALAR_BODY_RUNTIME_PARAMS;
  for (int32_t i = 0; i < args->num_inputs; i++) args->input_compute_dtypes[i] = compute_dtype(dtype);
  for (int32_t o = 0; o < args->num_outputs; o++)
    args->output_compute_dtypes[o] = compute_dtype(dtype);
  return DLOP_OK;
}

/* The thunk: the generated kernel's, the compiled group it belongs to, and the node's types,
 * which every run's tensors are checked against (the generated kernel trusts its caller, the
 * runtime; this thunk is an op's, which any host may run). */
#define SOURCE_MAX_OPERANDS 16 /* inputs and outputs together (dlop/source_ops.h) */
typedef struct source_thunk {
  dlop_thunk kernel;
  dlop__fusion_alone *alone;
  const char *name;
  dlop_device device;
  int32_t num_inputs, num_outputs;
  dlop_type inputs[SOURCE_MAX_OPERANDS], outputs[SOURCE_MAX_OPERANDS];
} source_thunk;

static int source_thunk_run(void *state, const dlop_run_args *args) {
  const source_thunk *thunk = state;
  if (args->num_inputs != thunk->num_inputs || args->num_outputs != thunk->num_outputs) {
    dlop__format(args->error, args->error_size, "%s: run with %d inputs and %d outputs, "
                 "expected %d and %d", thunk->name, (int)args->num_inputs,
                 (int)args->num_outputs, (int)thunk->num_inputs, (int)thunk->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  int status = dlop_check_tensors(thunk->name, "input", args->inputs, thunk->num_inputs,
                                  thunk->inputs, thunk->device, args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors(thunk->name, "output", args->outputs, thunk->num_outputs,
                                thunk->outputs, thunk->device, args->error, args->error_size);
  for (int32_t o = 0; o < thunk->num_outputs && status == DLOP_OK; o++)
    status = dlop_check_broadcast_output(thunk->name, args->inputs, args->num_inputs,
                                         &args->outputs[o], args->error, args->error_size);
  if (status != DLOP_OK) return status;
  return thunk->kernel.run(thunk->kernel.state, args);
}

static void source_thunk_destroy(void *state) {
  source_thunk *thunk = state;
  dlop__fusion_alone_free(thunk->alone);
  free(thunk);
}

static int make_thunk(const dlop_thunk_args *args) {
  const dlop__source_elementwise *source = source_of(args->op);
  int cuda = args->device.type == DLOP_DEVICE_CUDA;
  const char *compiler = cuda ? "NVRTC" : "the host's C compiler";
  char why[512];
  if (!dlop__fusion_alone_available(args->device, why, sizeof why)) {
    dlop__format(args->error, args->error_size,
                 "%s: an op defined from source is compiled at run time, and %s cannot be used "
                 "here: %s",
                 source->name, compiler, why);
    return DLOP_NOT_FOUND;
  }
  source_thunk *thunk = calloc(1, sizeof *thunk);
  if (thunk == NULL) {
    dlop__format(args->error, args->error_size, "%s: out of memory", source->name);
    return DLOP_OUT_OF_MEMORY;
  }
  dlop__fusion_alone_node node = {.inputs = args->inputs, .outputs = args->outputs};
  char *log = malloc(16384);
  if (log != NULL) log[0] = '\0'; /* the error path reads it whichever step failed */
  int status = log == NULL ? DLOP_OUT_OF_MEMORY : DLOP_OK;
  dlop__cuda_scope scope = {0};
  if (status == DLOP_OK && cuda) status = dlop__cuda_use_device(args->device.id, &scope);
  if (status == DLOP_OK) {
    status = dlop__fusion_alone_compile(args->op, args->params, args->num_inputs, 1, &node,
                                        args->device, &thunk->alone, log, 16384);
    if (cuda) status = dlop__cuda_restore_after(&scope, status);
  }
  uint32_t flags = 0;
  const char *message = NULL;
  if (status == DLOP_OK)
    status = dlop__fusion_alone_kernel(thunk->alone, 0, &thunk->kernel, &flags, &message);
  if (status != DLOP_OK) {
    if (log == NULL)
      dlop__format(args->error, args->error_size, "%s: out of memory", source->name);
    else if (status == DLOP_INVALID_ARGUMENT && log[0] != '\0')
      dlop__source_elementwise_log(source, compiler, log, args->error, args->error_size);
    else
      dlop__format(args->error, args->error_size, "%s", message ? message : log[0] ? log : dlop_last_error());
    free(log);
    dlop__fusion_alone_free(thunk->alone);
    free(thunk);
    return status;
  }
  free(log);
  thunk->name = source->name;
  thunk->device = args->device;
  thunk->num_inputs = args->num_inputs;
  thunk->num_outputs = args->num_outputs;
  memcpy(thunk->inputs, args->inputs, sizeof(dlop_type) * (size_t)thunk->num_inputs);
  memcpy(thunk->outputs, args->outputs, sizeof(dlop_type) * (size_t)thunk->num_outputs);
  args->thunk->state = thunk;
  args->thunk->run = source_thunk_run;
  args->thunk->destroy = source_thunk_destroy;
  args->thunk->workspace_bytes = thunk->kernel.workspace_bytes;
  return DLOP_OK;
}

int dlop__source_elementwise_is(const dlop_op_desc *op) {
  return op != NULL && op->scalar_body == scalar_body;
}

void dlop__source_elementwise_stages(dlop__source_elementwise *source) {
  source->op.make_node = make_node;
  source->op.infer_shape = infer_shape;
  source->op.make_thunk = make_thunk;
  source->op.scalar_body = scalar_body;
}
