/* op_call.c — dlop_op_call: one op prepared for one signature and device (parameters resolved,
 * make_node, make_thunk), run on tensors the caller owns and on the caller's stream. The
 * framework adapters' path (XLA's FFI handler, PyTorch's custom ops): their buffers are the
 * thunk's inputs and outputs as they are, nothing is allocated but the thunk's workspace and
 * the contiguous copies an op may ask for. */
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "graph_internal.h"
#include "stage.h"

struct dlop_op_call {
  const dlop_op_desc *op;
  dlop_param_value *params; /* op->num_params values, one allocation */
  int32_t num_inputs;
  int32_t num_outputs;
  dlop_type *input_types;  /* as created (static) */
  dlop_type *output_types; /* make_node + infer_shape on them */
  dlop_device device;
  dlop_thunk thunk;
  int has_thunk;
};

static int same_device(dlop_device a, dlop_device b) { return a.type == b.type && a.id == b.id; }

/* The stage gateway's view of the call: index -1, so messages read "op: ...". */
static dlop__stage_node stage_node(const dlop_op_call *call) {
  dlop__stage_node node = {call->op, call->params, call->op->num_params, -1, call->num_inputs,
                           call->num_outputs};
  return node;
}

/* The op declares the device and every input dtype there. */
static int check_supported(const dlop_op_call *call, const char *device_name) {
  uint32_t mask = dlop_op_dtypes(call->op, (dlop_device_type)call->device.type);
  char list[256];
  if (mask == 0) {
    int cuda = call->device.type == DLOP_DEVICE_CUDA;
    dlop__dtype_list(dlop_op_dtypes(call->op, cuda ? DLOP_DEVICE_CPU : DLOP_DEVICE_CUDA), list,
                     sizeof list);
    return dlop__error(DLOP_UNSUPPORTED, "op '%s' has no kernel for %s (it supports %s with: %s)",
                       call->op->name, device_name, cuda ? "cpu" : "cuda", list);
  }
  for (int32_t i = 0; i < call->num_inputs; i++) {
    int32_t dtype = call->input_types[i].dtype;
    if (mask & DLOP_DTYPE_BIT(dtype)) continue;
    dlop__dtype_list(mask, list, sizeof list);
    return dlop__error(DLOP_UNSUPPORTED,
                       "op '%s' does not support %s (input %d) on %s; it supports there: %s",
                       call->op->name, dlop_dtype_name((dlop_dtype)dtype), (int)i, device_name,
                       list);
  }
  return DLOP_OK;
}

static int check_create_arguments(const char *op_name, const dlop_type *inputs,
                                  int32_t num_inputs, const dlop_named_param *params,
                                  int32_t num_params, dlop_op_call **call) {
  if (call == NULL) return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_op_call_create: call is NULL");
  *call = NULL;
  if (op_name == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_op_call_create: op_name is NULL");
  if (num_inputs < 0 || (num_inputs > 0 && inputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': %d inputs but inputs is %s", op_name,
                       (int)num_inputs, inputs ? "set" : "NULL");
  if (num_params < 0 || (num_params > 0 && params == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': %d parameters but params is %s", op_name,
                       (int)num_params, params ? "set" : "NULL");
  for (int32_t i = 0; i < num_inputs; i++)
    if (dlop__type_valid(&inputs[i], 0) != DLOP_OK)
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "op '%s': input %d's type is not valid (dtype %d, ndim %d; expected a "
                         "dlop dtype, ndim 0..%d, dims >= 0 or DLOP_DIM_UNKNOWN)",
                         op_name, (int)i, (int)inputs[i].dtype, (int)inputs[i].ndim,
                         DLOP_MAX_NDIM);
  return DLOP_OK;
}

int dlop_op_call_create(const char *op_name, const dlop_type *inputs, int32_t num_inputs,
                        const dlop_named_param *params, int32_t num_params, dlop_device device,
                        dlop_op_call **call) {
  char device_name[32];
  int status = check_create_arguments(op_name, inputs, num_inputs, params, num_params, call);
  if (status != DLOP_OK) return status;
  const dlop_op_desc *op = dlop_find_op(op_name);
  if (op == NULL)
    return dlop__error(DLOP_NOT_FOUND,
                       "unknown op '%s': no loaded plugin provides it (%d ops loaded; load its "
                       "plugin with dlop_load_plugin or put it on DLOP_PLUGIN_PATH)",
                       op_name, dlop_op_count());
  if (op->num_inputs != DLOP_VARIADIC && op->num_inputs != num_inputs)
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s' takes %d input%s, got %d", op->name,
                       (int)op->num_inputs, op->num_inputs == 1 ? "" : "s", (int)num_inputs);
  if (op->view_map != NULL)
    return dlop__error(DLOP_UNSUPPORTED,
                       "op '%s' is a view op (its outputs are views of an input, laid out by "
                       "make_view): it has no kernel that could write into a caller's output "
                       "memory, so it cannot be an op call; use it in a dlop graph, or the "
                       "framework's own view",
                       op->name);
  dlop_device_format(device, device_name, sizeof device_name);
  status = dlop_device_check(device);
  if (status != DLOP_OK) {
    char reason[1024];
    dlop__format(reason, sizeof reason, "%s", dlop_last_error());
    return dlop__error(DLOP_NO_DEVICE, "op '%s' cannot run on %s: %s", op->name, device_name,
                       reason);
  }

  dlop_op_call *result = calloc(1, sizeof *result);
  size_t types = (size_t)num_inputs + (size_t)op->num_outputs + 1;
  dlop_type *block = result ? calloc(types, sizeof(dlop_type)) : NULL;
  if (block == NULL) {
    free(result);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory preparing op '%s'", op->name);
  }
  result->op = op;
  result->device = device;
  result->num_inputs = num_inputs;
  result->num_outputs = op->num_outputs;
  result->input_types = block;
  result->output_types = block + num_inputs;
  if (num_inputs > 0) memcpy(result->input_types, inputs, sizeof(dlop_type) * (size_t)num_inputs);
  status = dlop__params_resolve(op, params, num_params, &result->params);
  if (status == DLOP_OK)
    status = dlop__infer_node_types(op, result->params, result->input_types, num_inputs,
                                    result->output_types, result->num_outputs);
  if (status == DLOP_OK) status = check_supported(result, device_name);
  if (status == DLOP_OK) {
    dlop__stage_node node = stage_node(result);
    result->thunk.struct_size = sizeof(dlop_thunk);
    status = dlop__stage_make_thunk(&node, result->input_types, result->output_types, device,
                                    &result->thunk);
    /* a failed make_thunk handed nothing over: never destroy it */
    if (status == DLOP_OK) result->has_thunk = 1;
    if (status == DLOP_OK && result->thunk.run == NULL)
      status = dlop__error(DLOP_PLUGIN_ERROR, "%s: make_thunk succeeded but left run NULL",
                           op->name);
  }
  if (status != DLOP_OK) {
    dlop_op_call_destroy(result);
    return status;
  }
  *call = result;
  return DLOP_OK;
}

void dlop_op_call_destroy(dlop_op_call *call) {
  if (call == NULL) return;
  if (call->has_thunk) dlop__stage_destroy(&call->thunk);
  free(call->params);
  free(call->input_types); /* the block holding the output types too */
  free(call);
}

const dlop_op_desc *dlop_op_call_op(const dlop_op_call *call) { return call ? call->op : NULL; }

dlop_device dlop_op_call_device(const dlop_op_call *call) {
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  return call ? call->device : cpu;
}

int32_t dlop_op_call_num_outputs(const dlop_op_call *call) { return call ? call->num_outputs : 0; }

const dlop_type *dlop_op_call_input_type(const dlop_op_call *call, int32_t index) {
  if (call == NULL || index < 0 || index >= call->num_inputs) return NULL;
  return &call->input_types[index];
}

const dlop_type *dlop_op_call_output_type(const dlop_op_call *call, int32_t index) {
  if (call == NULL || index < 0 || index >= call->num_outputs) return NULL;
  return &call->output_types[index];
}

size_t dlop_op_call_workspace_bytes(const dlop_op_call *call) {
  return call ? call->thunk.workspace_bytes : 0;
}

/* ---- concrete shapes ------------------------------------------------------------------- */

/* A concrete input type against the created one: same dtype and ndim, every static dim equal. */
static int check_input_type(const dlop_op_call *call, int32_t i, int32_t dtype, int32_t ndim,
                            const int64_t *shape) {
  const dlop_type *want = &call->input_types[i];
  char text[96];
  if (dtype != want->dtype)
    return dlop__error(DLOP_TYPE_ERROR, "op '%s': input %d is %s but the call was prepared for %s",
                       call->op->name, (int)i, dlop_dtype_name((dlop_dtype)dtype),
                       dlop__type_format(want, text, sizeof text));
  if (ndim != want->ndim)
    return dlop__error(DLOP_TYPE_ERROR,
                       "op '%s': input %d has %d dimension%s but the call was prepared for %s",
                       call->op->name, (int)i, (int)ndim, ndim == 1 ? "" : "s",
                       dlop__type_format(want, text, sizeof text));
  for (int32_t d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return dlop__error(DLOP_SHAPE_ERROR, "op '%s': input %d: dimension %d is %lld (negative)",
                         call->op->name, (int)i, (int)d, (long long)shape[d]);
    if (want->shape[d] != DLOP_DIM_UNKNOWN && want->shape[d] != shape[d])
      return dlop__error(DLOP_SHAPE_ERROR,
                         "op '%s': input %d: dimension %d is %lld but the call was prepared for %s",
                         call->op->name, (int)i, (int)d, (long long)shape[d],
                         dlop__type_format(want, text, sizeof text));
  }
  return DLOP_OK;
}

/* infer_shape on concrete inputs, checked against the static output types and NumPy's size
 * rule. inputs hold concrete shapes (zeros past ndim). */
static int infer_concrete(const dlop_op_call *call, const dlop_type *inputs, dlop_type *outputs) {
  char have[96], want[96];
  for (int32_t o = 0; o < call->num_outputs; o++) {
    memset(&outputs[o], 0, sizeof(dlop_type));
    outputs[o].dtype = call->output_types[o].dtype;
    outputs[o].ndim = call->output_types[o].ndim;
    for (int32_t d = 0; d < outputs[o].ndim; d++) outputs[o].shape[d] = DLOP_DIM_UNKNOWN;
  }
  dlop__stage_node node = stage_node(call);
  int status = dlop__stage_infer_shape(&node, inputs, outputs);
  for (int32_t o = 0; status == DLOP_OK && o < call->num_outputs; o++) {
    const dlop_type *got = &outputs[o], *declared = &call->output_types[o];
    int ok = got->dtype == declared->dtype && got->ndim == declared->ndim &&
             dlop__type_valid(got, 1) == DLOP_OK;
    for (int32_t d = 0; ok && d < declared->ndim; d++)
      if (declared->shape[d] != DLOP_DIM_UNKNOWN && declared->shape[d] != got->shape[d]) ok = 0;
    if (!ok)
      return dlop__error(DLOP_PLUGIN_ERROR,
                         "%s: infer_shape on concrete shapes gave output %d as %s, which "
                         "contradicts its static type %s",
                         call->op->name, (int)o, dlop__type_format(got, have, sizeof have),
                         dlop__type_format(declared, want, sizeof want));
    /* the message is formatted only for a size that does not fit (this runs on every call) */
    if (dlop_shape_size(got->shape, got->ndim, (int64_t)dlop_dtype_size((dlop_dtype)got->dtype),
                        NULL, NULL) == DLOP_SIZE_FITS)
      continue;
    char what[160];
    dlop__format(what, sizeof what, "%s: output %d", call->op->name, (int)o);
    status = dlop__check_shape_size(what, got->shape, got->ndim, got->dtype, NULL);
  }
  return status;
}

int dlop_op_call_infer_shapes(const dlop_op_call *call, const dlop_type *inputs,
                              int32_t num_inputs, dlop_type *outputs, int32_t num_outputs) {
  if (call == NULL || (num_inputs > 0 && inputs == NULL) || (num_outputs > 0 && outputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_op_call_infer_shapes: %s is NULL",
                       call == NULL ? "call" : inputs == NULL ? "inputs" : "outputs");
  if (num_inputs != call->num_inputs || num_outputs != call->num_outputs)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "op '%s': the call takes %d input%s and %d output%s, got %d and %d",
                       call->op->name, (int)call->num_inputs, call->num_inputs == 1 ? "" : "s",
                       (int)call->num_outputs, call->num_outputs == 1 ? "" : "s",
                       (int)num_inputs, (int)num_outputs);
  dlop_type *concrete = calloc((size_t)num_inputs + 1, sizeof(dlop_type));
  if (concrete == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory in %s", call->op->name);
  int status = DLOP_OK;
  for (int32_t i = 0; status == DLOP_OK && i < num_inputs; i++) {
    status = check_input_type(call, i, inputs[i].dtype, inputs[i].ndim, inputs[i].shape);
    if (status != DLOP_OK) break;
    concrete[i].dtype = inputs[i].dtype;
    concrete[i].ndim = inputs[i].ndim;
    memcpy(concrete[i].shape, inputs[i].shape, sizeof(int64_t) * (size_t)inputs[i].ndim);
  }
  if (status == DLOP_OK) status = infer_concrete(call, concrete, outputs);
  free(concrete);
  return status;
}

/* ---- running ---------------------------------------------------------------------------- */

/* Scratch of one run: small signatures live on the stack. */
#define LOCAL_TENSORS 8

/* The bytes [low, high) a tensor's elements cover, as addresses; empty for no element. */
static void address_range(const dlop_tensor *t, uintptr_t *low, uintptr_t *high) {
  int64_t from = 0, to = 0;
  int64_t size = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
  *low = *high = 0;
  if (dlop_tensor_numel(t) == 0) return;
  if (t->strides == NULL) {
    from = (int64_t)t->byte_offset;
    to = from + dlop_tensor_numel(t) * size;
  } else if (dlop_strided_extent(t->shape, t->strides, t->ndim, size, t->byte_offset, &from, &to,
                                 NULL) != 0) {
    return; /* checked before: cannot happen */
  }
  *low = (uintptr_t)t->data + (uintptr_t)from;
  *high = (uintptr_t)t->data + (uintptr_t)to;
}

static int same_layout(const dlop_tensor *a, const dlop_tensor *b) {
  if (dlop_tensor_base(a) != dlop_tensor_base(b) || a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return dlop_tensor_is_contiguous(a) && dlop_tensor_is_contiguous(b);
}

/* An output that shares memory with an input is allowed only where the op's inplace_map says
 * the thunk is correct when they alias, and then only as the very same layout. */
static int check_overlaps(const dlop_op_call *call, const dlop_tensor *inputs,
                          const dlop_tensor *outputs) {
  for (int32_t o = 0; o < call->num_outputs; o++) {
    uintptr_t out_low, out_high;
    address_range(&outputs[o], &out_low, &out_high);
    if (out_low == out_high) continue;
    for (int32_t i = 0; i < call->num_inputs; i++) {
      uintptr_t in_low, in_high;
      address_range(&inputs[i], &in_low, &in_high);
      if (in_low == in_high || in_high <= out_low || out_high <= in_low) continue;
      int allowed = call->op->inplace_map != NULL && call->op->inplace_map[o] == i;
      if (allowed && same_layout(&inputs[i], &outputs[o])) continue;
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "op '%s': output %d overlaps input %d in memory; %s",
                         call->op->name, (int)o, (int)i,
                         allowed ? "the op may write it in place, but only over the input's very "
                                   "layout (same address, shape, C-contiguous)"
                                 : "the op does not declare that output in place of that input "
                                   "(inplace_map): give the output memory of its own");
    }
  }
  return DLOP_OK;
}

/* A tensor the caller passed: on the call's device, a dtype and extent dlop can address. */
static int check_tensor(const dlop_op_call *call, const char *role, int32_t index,
                        const dlop_tensor *t) {
  char have[32], want[32];
  if (!same_device(t->device, call->device))
    return dlop__error(DLOP_DEVICE_MISMATCH, "op '%s': %s %d is on %s but the call runs on %s",
                       call->op->name, role, (int)index,
                       dlop_device_format(t->device, have, sizeof have),
                       dlop_device_format(call->device, want, sizeof want));
  if (t->ndim < 0 || t->ndim > DLOP_MAX_NDIM || (t->ndim > 0 && t->shape == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': %s %d has ndim %d%s (expected 0..%d)",
                       call->op->name, role, (int)index, (int)t->ndim,
                       t->ndim > 0 && t->shape == NULL ? " and no shape" : "", DLOP_MAX_NDIM);
  dlop_dtype dtype = dlop_tensor_dtype(t);
  if (dtype == DLOP_DTYPE_INVALID)
    return dlop__error(DLOP_TYPE_ERROR,
                       "op '%s': %s %d has a DLPack dtype dlop does not know (code %d, %d bits, "
                       "%d lanes)",
                       call->op->name, role, (int)index, (int)t->dtype.code, (int)t->dtype.bits,
                       (int)t->dtype.lanes);
  for (int32_t d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0)
      return dlop__error(DLOP_SHAPE_ERROR, "op '%s': %s %d: dimension %d is %lld (negative)",
                         call->op->name, role, (int)index, (int)d, (long long)t->shape[d]);
  /* one pass over the dims; the message is formatted only for a tensor that fails */
  int64_t size = (int64_t)dlop_dtype_size(dtype), low, high;
  if (dlop_tensor_size(t, size, NULL, NULL) == DLOP_SIZE_FITS) return DLOP_OK;
  char what[96];
  dlop__format(what, sizeof what, "op '%s': %s %d", call->op->name, role, (int)index);
  if (t->strides != NULL && dlop_tensor_numel(t) > 0 &&
      dlop__check_extent(what, t->shape, t->strides, t->ndim, size, t->byte_offset, &low,
                         &high) != DLOP_OK)
    return DLOP_INVALID_ARGUMENT;
  return dlop__check_shape_size(what, t->shape, t->ndim, (int32_t)dtype, NULL);
}

/* Outputs: C-contiguous, of exactly the types infer_shape gave for these inputs. */
static int check_outputs(const dlop_op_call *call, const dlop_tensor *outputs,
                         const dlop_type *types) {
  char have[96], want[96];
  for (int32_t o = 0; o < call->num_outputs; o++) {
    const dlop_tensor *t = &outputs[o];
    int status = check_tensor(call, "output", o, t);
    if (status != DLOP_OK) return status;
    dlop_type got = {(int32_t)dlop_tensor_dtype(t), t->ndim, {0}};
    memcpy(got.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    int same = got.dtype == types[o].dtype && got.ndim == types[o].ndim;
    for (int32_t d = 0; same && d < got.ndim; d++) same = got.shape[d] == types[o].shape[d];
    if (!same)
      return dlop__error(got.dtype == types[o].dtype ? DLOP_SHAPE_ERROR : DLOP_TYPE_ERROR,
                         "op '%s': output %d is %s but the op gives %s for these inputs",
                         call->op->name, (int)o, dlop__type_format(&got, have, sizeof have),
                         dlop__type_format(&types[o], want, sizeof want));
    if (!dlop_tensor_is_contiguous(t))
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "op '%s': output %d is not C-contiguous (thunks write outputs laid out "
                         "as the host allocates them); pass a contiguous buffer",
                         call->op->name, (int)o);
  }
  return DLOP_OK;
}

/* Contiguous copies of the inputs the op needs contiguous, into pool memory on the run's
 * stream; copies[i] holds the memory to free, handed[i] the tensor the thunk gets. */
static int make_contiguous(const dlop_op_call *call, const dlop_tensor *inputs,
                           dlop_tensor *handed, void **copies, dlop_stream *stream, void *handle) {
  for (int32_t i = 0; i < call->num_inputs; i++) {
    handed[i] = inputs[i];
    copies[i] = NULL;
    if (!(call->op->flags & DLOP_OP_NEEDS_CONTIGUOUS_INPUTS) ||
        dlop_tensor_is_contiguous(&inputs[i]))
      continue;
    int64_t numel = dlop_tensor_numel(&inputs[i]);
    size_t bytes = (size_t)numel * dlop_dtype_size(dlop_tensor_dtype(&inputs[i]));
    int status = dlop__memory_alloc_on(call->device, bytes ? bytes : 1, stream, &copies[i]);
    if (status == DLOP_OK) {
      handed[i].data = copies[i];
      handed[i].strides = NULL;
      handed[i].byte_offset = 0;
      status = dlop__tensor_copy(&inputs[i], &handed[i], handle);
    }
    if (status != DLOP_OK) {
      char reason[1024];
      dlop__format(reason, sizeof reason, "%s", dlop_last_error());
      return dlop__error(status, "op '%s': making input %d contiguous failed: %s",
                         call->op->name, (int)i, reason);
    }
  }
  return DLOP_OK;
}

static int check_run_arguments(const dlop_op_call *call, const dlop_tensor *inputs,
                               int32_t num_inputs, const dlop_tensor *outputs,
                               int32_t num_outputs, dlop_stream *stream) {
  char have[32], want[32];
  if (call == NULL) return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_op_call_run: call is NULL");
  if (num_inputs != call->num_inputs || num_outputs != call->num_outputs ||
      (num_inputs > 0 && inputs == NULL) || (num_outputs > 0 && outputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "op '%s': the call takes %d input%s and %d output%s, got %d and %d%s",
                       call->op->name, (int)call->num_inputs, call->num_inputs == 1 ? "" : "s",
                       (int)call->num_outputs, call->num_outputs == 1 ? "" : "s",
                       (int)num_inputs, (int)num_outputs,
                       (num_inputs > 0 && inputs == NULL) || (num_outputs > 0 && outputs == NULL)
                           ? " (an array of them is NULL)" : "");
  if (call->device.type == DLOP_DEVICE_CUDA && stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "op '%s': a run on %s needs a stream of that device (dlop_stream_create, "
                       "or dlop_stream_wrap for your own CUstream)",
                       call->op->name, dlop_device_format(call->device, want, sizeof want));
  if (stream != NULL && !same_device(dlop_stream_device(stream), call->device))
    return dlop__error(DLOP_DEVICE_MISMATCH, "op '%s': the stream is on %s but the call runs on %s",
                       call->op->name,
                       dlop_device_format(dlop_stream_device(stream), have, sizeof have),
                       dlop_device_format(call->device, want, sizeof want));
  return DLOP_OK;
}

/* Everything a run does once its arguments are checked and the context is current. */
static int run_checked(const dlop_op_call *call, const dlop_tensor *inputs,
                       const dlop_tensor *outputs, dlop_stream *stream, void *handle,
                       dlop_type *input_types, dlop_type *output_types, dlop_tensor *handed,
                       void **copies) {
  int status = DLOP_OK;
  for (int32_t i = 0; status == DLOP_OK && i < call->num_inputs; i++) {
    status = check_tensor(call, "input", i, &inputs[i]);
    if (status == DLOP_OK)
      status = check_input_type(call, i, (int32_t)dlop_tensor_dtype(&inputs[i]), inputs[i].ndim,
                                inputs[i].shape);
    if (status != DLOP_OK) break;
    memset(&input_types[i], 0, sizeof(dlop_type)); /* plugins see zeros past ndim */
    input_types[i].dtype = (int32_t)dlop_tensor_dtype(&inputs[i]);
    input_types[i].ndim = inputs[i].ndim;
    memcpy(input_types[i].shape, inputs[i].shape, sizeof(int64_t) * (size_t)inputs[i].ndim);
  }
  if (status == DLOP_OK) status = infer_concrete(call, input_types, output_types);
  if (status == DLOP_OK) status = check_outputs(call, outputs, output_types);
  if (status == DLOP_OK) status = check_overlaps(call, inputs, outputs);
  for (int32_t i = 0; i < call->num_inputs; i++) copies[i] = NULL;
  if (status == DLOP_OK) status = make_contiguous(call, inputs, handed, copies, stream, handle);
  void *workspace = NULL;
  if (status == DLOP_OK && call->thunk.workspace_bytes > 0)
    status = dlop__memory_alloc_on(call->device, call->thunk.workspace_bytes, stream, &workspace);
  if (status == DLOP_OK) {
    dlop__stage_node node = stage_node(call);
    status = dlop__stage_run(&node, &call->thunk, handed, outputs, handle, workspace);
  }
  /* freed after the work on the stream that used it (a wrapped stream records an event now) */
  if (workspace) dlop__memory_free_after(call->device, workspace, &stream, 1);
  for (int32_t i = 0; i < call->num_inputs; i++)
    if (copies[i]) dlop__memory_free_after(call->device, copies[i], &stream, 1);
  return status;
}

int dlop_op_call_run(const dlop_op_call *call, const dlop_tensor *inputs, int32_t num_inputs,
                     const dlop_tensor *outputs, int32_t num_outputs, dlop_stream *stream) {
  int status = check_run_arguments(call, inputs, num_inputs, outputs, num_outputs, stream);
  if (status != DLOP_OK) return status;
  /* One block of scratch: on the stack for small signatures. */
  size_t count = (size_t)num_inputs + (size_t)num_outputs + 1;
  dlop_type local_types[LOCAL_TENSORS];
  dlop_tensor local_handed[LOCAL_TENSORS];
  void *local_copies[LOCAL_TENSORS];
  dlop_type *types = local_types;
  dlop_tensor *handed = local_handed;
  void **copies = local_copies;
  if (count > LOCAL_TENSORS) {
    types = malloc(sizeof(dlop_type) * count);
    handed = malloc(sizeof(dlop_tensor) * count);
    copies = malloc(sizeof(void *) * count);
    if (types == NULL || handed == NULL || copies == NULL) {
      free(types);
      free(handed);
      free(copies);
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory running op '%s'", call->op->name);
    }
  }
  void *handle = stream ? dlop_stream_handle(stream) : NULL;
  dlop__cuda_scope scope = {NULL, 0};
  dlop__cuda_run_scope saved_run = {0, 0, NULL};
  int cuda = call->device.type == DLOP_DEVICE_CUDA;
  if (cuda) status = dlop__cuda_use_device(call->device.id, &scope);
  /* the context stays current for the thunk's launches and the pool's calls */
  int in_run = status == DLOP_OK && cuda;
  if (in_run) dlop__cuda_run_begin(call->device.id, (CUstream)handle, &saved_run);
  if (status == DLOP_OK)
    status = run_checked(call, inputs, outputs, cuda ? stream : NULL, handle, types,
                         types + num_inputs, handed, copies);
  if (in_run) dlop__cuda_run_end(&saved_run);
  if (count > LOCAL_TENSORS) {
    free(types);
    free(handed);
    free(copies);
  }
  return cuda ? dlop__cuda_restore_after(&scope, status) : status;
}
