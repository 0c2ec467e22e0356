/* stage.h — the gateway into plugin code (stage.c, and the thunk's run inline at the end):
 * libdlop calls an op's stages (make_node, infer_shape, make_thunk, make_view, scalar_body,
 * reduce_body, runtime_info) and a thunk's run and destroy only through these, so every call gets its
 * arguments, error buffer, status mapping and message prefix the same way. Not part of the
 * public ABI. */
#ifndef DLOP_STAGE_H
#define DLOP_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* The node a stage is called for: its op, its resolved parameters (declaration order) and its
 * arity. index is the "#N" that messages name ("node #N op: ..."); -1 for a node that the graph
 * is still building, whose messages start "op: ". */
typedef struct dlop__stage_node {
  const dlop_op_desc *op;
  const dlop_param_value *params;
  int32_t num_params;
  int32_t index;
  int32_t num_inputs;
  int32_t num_outputs;
} dlop__stage_node;

/* Each call returns DLOP_OK, or the plugin's status mapped onto dlop's (an unknown or positive
 * code becomes DLOP_PLUGIN_ERROR) with dlop_last_error() set to the plugin's message, prefixed
 * with the node and op (the op's own "op: " prefix dropped, so it is not doubled). Checking
 * what the plugin handed back is left to the caller. */

/* make_node on static input types; outputs (num_outputs types) are zeroed by the caller. */
int dlop__stage_make_node(const dlop__stage_node *node, const dlop_type *inputs,
                          dlop_type *outputs);
/* infer_shape: outputs hold make_node's dtype and ndim (dims unknown), inputs static or
 * concrete shapes. */
int dlop__stage_infer_shape(const dlop__stage_node *node, const dlop_type *inputs,
                            dlop_type *outputs);
/* make_thunk for device; *thunk is cleared (struct_size set) before the call. On failure
 * nothing was handed over: never destroy it. */
int dlop__stage_make_thunk(const dlop__stage_node *node, const dlop_type *inputs,
                           const dlop_type *outputs, dlop_device device, dlop_thunk *thunk);
/* make_view of output over the layout input; type is the output's concrete type. strides
 * (DLOP_MAX_NDIM), *byte_offset and *needs_contiguous are zeroed before the call. */
int dlop__stage_make_view(const dlop__stage_node *node, int32_t output, const dlop_tensor *input,
                          const dlop_type *type, int64_t *strides, uint64_t *byte_offset,
                          int32_t *needs_contiguous);
/* scalar_body (ABI 1.2; the caller checks op->scalar_body is set) for the node's static types:
 * the op writes its statements into code_buffer (code_buffer_size bytes) or points at its own
 * text, and the compute dtypes into input_compute / output_compute, which are preset to the
 * storage dtypes. On success *result holds what the op filled in (code, prelude, prelude_name,
 * flags: pointers into code_buffer or the plugin's static storage). */
int dlop__stage_scalar_body(const dlop__stage_node *node, const dlop_type *inputs,
                            const dlop_type *outputs, char *code_buffer, size_t code_buffer_size,
                            int32_t *input_compute, int32_t *output_compute,
                            dlop_scalar_body_args *result);
/* reduce_body (ABI 1.2; the caller checks op->reduce_body is set) for the node's static input
 * and output types: accumulator_dtype and output_compute_dtype are preset to their dtypes,
 * code_buffer (code_buffer_size bytes) is the op's to write into. On success *result holds what
 * the op filled in (pointers into code_buffer or the plugin's static storage). */
int dlop__stage_reduce_body(const dlop__stage_node *node, const dlop_type *input,
                            const dlop_type *output, char *code_buffer, size_t code_buffer_size,
                            dlop_reduce_body_args *result);
/* runtime_info (ABI 1.2; the caller checks op->runtime_info is set) for a device type: the op's
 * "key: value" lines in text (text_size bytes, always NUL-terminated on return, empty on
 * failure). */
int dlop__stage_runtime_info(const dlop_op_desc *op, int32_t device_type, char *text,
                             size_t text_size);
/* The thunk's destroy, when it has one. */
void dlop__stage_destroy(const dlop_thunk *thunk);

/* Record a failed stage as dlop's error and return the mapped status (what each call here does
 * on failure; nothing else calls it): "node #N op: <stage><message>", or "op: <stage><message>"
 * for index -1, with silent standing in for a message the plugin did not write. */
int dlop__stage_failed(int status, const dlop_op_desc *op, int32_t index, const char *stage,
                       const char *error, const char *silent);

/* The message buffer each call hands the plugin. */
#define DLOP__STAGE_ERROR_SIZE 1024

/* The thunk's run on stream (a CUstream, NULL on the CPU), with workspace (NULL for none, else
 * thunk->workspace_bytes). Inline because it is the function run's hot path, once per node and
 * call: it costs what calling the thunk directly did (no allocation, no formatting on success). */
static inline int dlop__stage_run(const dlop__stage_node *node, const dlop_thunk *thunk,
                                  const dlop_tensor *inputs, const dlop_tensor *outputs,
                                  void *stream, void *workspace) {
  char error[DLOP__STAGE_ERROR_SIZE];
  dlop_run_args args = {
      .struct_size = sizeof(dlop_run_args), .inputs = inputs, .num_inputs = node->num_inputs,
      .num_outputs = node->num_outputs, .outputs = outputs, .stream = stream,
      .workspace = workspace, .workspace_bytes = workspace ? thunk->workspace_bytes : 0,
      .error = error, .error_size = sizeof error};
  error[0] = '\0';
  int status = thunk->run(thunk->state, &args);
  if (status == DLOP_OK) return DLOP_OK;
  return dlop__stage_failed(status, node->op, node->index, "", error,
                            "the thunk failed without a message");
}

#endif
