/* dlop/op_call.h — one op prepared once for one signature and device, then run on memory and a
 * stream that the caller owns: what a framework adapter (an XLA FFI handler, a PyTorch custom
 * op) needs to run a plugin's kernel on the framework's own buffers, without a graph, without
 * allocating outputs and without copies (docs/runtime.md, "Op calls"). */
#ifndef DLOP_OP_CALL_H
#define DLOP_OP_CALL_H

#include <stdint.h>

#include "export.h"
#include "graph.h"
#include "op.h"
#include "runtime.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlop_op_call dlop_op_call;

/* Prepare the loaded op op_name for inputs of these static types (DLOP_DIM_UNKNOWN where a
 * dim is not known) with params (by name; the others take their declared defaults) on device:
 * the parameters are resolved, make_node and infer_shape run (a type error is the op's own
 * message), the device's dtypes are checked (DLOP_UNSUPPORTED naming the op, dtype and device)
 * and make_thunk runs for the device. Ops whose outputs are views of an input (view_map) have
 * no kernel to run into a caller's memory: DLOP_UNSUPPORTED. The call is immutable afterwards
 * and may be run from several threads at once. */
DLOP_API int dlop_op_call_create(const char *op_name, const dlop_type *inputs, int32_t num_inputs,
                                 const dlop_named_param *params, int32_t num_params,
                                 dlop_device device, dlop_op_call **call);
/* Destroy the thunk (NULL is fine). The caller makes sure no run is in flight: on CUDA, its
 * streams have finished the work enqueued by dlop_op_call_run. */
DLOP_API void dlop_op_call_destroy(dlop_op_call *call);

DLOP_API const dlop_op_desc *dlop_op_call_op(const dlop_op_call *call);
DLOP_API dlop_device dlop_op_call_device(const dlop_op_call *call);
DLOP_API int32_t dlop_op_call_num_outputs(const dlop_op_call *call);
/* Input index's type as created (NULL for an index out of range). */
DLOP_API const dlop_type *dlop_op_call_input_type(const dlop_op_call *call, int32_t index);
/* Output index's type from make_node and infer_shape on the static input types (NULL for an
 * index out of range). */
DLOP_API const dlop_type *dlop_op_call_output_type(const dlop_op_call *call, int32_t index);
/* The thunk's scratch on each run, in bytes (0 for none): a run allocates it from dlop's pool. */
DLOP_API size_t dlop_op_call_workspace_bytes(const dlop_op_call *call);

/* The concrete output types (num_outputs of them) for inputs of concrete shapes: what the
 * caller allocates before dlop_op_call_run. Inputs must match the created types (dtype, ndim,
 * every static dim). */
DLOP_API int dlop_op_call_infer_shapes(const dlop_op_call *call, const dlop_type *inputs,
                                       int32_t num_inputs, dlop_type *outputs,
                                       int32_t num_outputs);

/* Run the thunk once: inputs (any strides; copied C-contiguous first only when the op declares
 * DLOP_OP_NEEDS_CONTIGUOUS_INPUTS) and outputs (C-contiguous, of the types
 * dlop_op_call_infer_shapes gives for these inputs) on the call's device, every dtype and
 * shape checked (DLOP_TYPE_ERROR / DLOP_SHAPE_ERROR / DLOP_DEVICE_MISMATCH naming the tensor).
 * An output may share memory with an input only where the op's inplace_map allows it and with
 * the input's very layout; any other overlap is DLOP_INVALID_ARGUMENT. On CUDA the work is
 * enqueued on stream (a dlop stream of the call's device: dlop_stream_create, or
 * dlop_stream_wrap for the caller's own CUstream) and nothing waits for it; the caller keeps
 * the tensors' memory alive until that work is done. On the CPU stream may be NULL and the run
 * has finished on return. The caller's current CUDA context is left as it was. */
DLOP_API int dlop_op_call_run(const dlop_op_call *call, const dlop_tensor *inputs,
                              int32_t num_inputs, const dlop_tensor *outputs,
                              int32_t num_outputs, dlop_stream *stream);

#ifdef __cplusplus
}
#endif

#endif
