/* stage.h — the gateway into plugin code (stage.c): libdlop calls an op's stages (make_node,
 * infer_shape, make_thunk, make_view) and a thunk's run and destroy only through these, so
 * every call gets its arguments, error buffer, status mapping and message prefix the same way.
 * Not part of the public ABI. */
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
/* The thunk's run on stream (a CUstream, NULL on the CPU), with workspace (NULL for none, else
 * thunk->workspace_bytes). The function run's hot path: no allocation, no formatting on success. */
int dlop__stage_run(const dlop__stage_node *node, const dlop_thunk *thunk,
                    const dlop_tensor *inputs, const dlop_tensor *outputs, void *stream,
                    void *workspace);
/* The thunk's destroy, when it has one. */
void dlop__stage_destroy(const dlop_thunk *thunk);

#endif
