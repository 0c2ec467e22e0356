/* function_internal.h — the layout of a compiled function, shared by the compiler
 * (function.c), fusion (function_fuse.c and fusion_*.c), the buffer plan (buffer_plan.c), the
 * runner (function_run.c, function_view.c) and explain.c. Calls go one way: function.c ->
 * function_fuse.c, buffer_plan.c and function_run.c (its run state), function_run.c ->
 * function_view.c; plugin code is reached through stage.h only. Not part of the public ABI. */
#ifndef DLOP_FUNCTION_INTERNAL_H
#define DLOP_FUNCTION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cuda_graph.h"
#include "graph_internal.h"
#include "stage.h"

#define DLOP__FUNCTION_MAX_RUN_STREAMS 8

/* Every value a run handles lives in a slot: the function's inputs first (0..num_inputs-1),
 * then its constants, then node outputs in schedule order (first_node_slot and up). Input and
 * constant slots are borrowed during a run; node-output slots are owned by the run. */
/* The last concrete input shapes a node's infer_shape saw and the output types it gave, so a
 * run with the same shapes skips infer_shape (it is pure, and params and dtypes are fixed per
 * node). Guarded by a try-lock: a run that finds it busy calls infer_shape instead of waiting. */
typedef struct dlop__shape_cache {
  atomic_flag lock;
  int valid;
  int64_t *input_dims;      /* each input's shape in turn (as many as the inputs' ndims) */
  dlop_type *output_types;  /* num_outputs types */
} dlop__shape_cache;

/* A fused group (fusion.h): its members, kernel and host-made op. */
typedef struct dlop__fusion_group dlop__fusion_group;

typedef struct dlop__function_node {
  const dlop_op_desc *op;
  int32_t index; /* position in the schedule: "#N" in messages and explain() */
  int32_t num_params;
  dlop_param_value *params; /* packed copy, owned: thunks may keep pointers into it */
  int32_t num_inputs;
  int32_t num_outputs;
  int32_t *input_slots;
  int32_t *output_slots;
  dlop_type *input_types;  /* static types, as compiled */
  dlop_type *output_types; /* static types, as compiled */
  dlop_thunk thunk;
  int has_thunk;
  /* A view op (view_map set, ABI 1.1): no thunk, nothing allocated; each output is a
   * dlop_array_view of an input, laid out by make_view at run time (function_view.c). */
  int is_view;
  /* A fused node (fusion.h): op is the group's host-made descriptor and the thunk runs the
   * kernel generated for its members; the node owns the group. NULL for any other node. */
  dlop__fusion_group *fused;
  /* Why fusion left this node as it is where that is worth saying (a reduction that reads its
   * input from memory though a group computes it): owned, shown by explain, or NULL. */
  char *fusion_note;
  /* Buffer plan: node-output slots whose last use is this node; released right after it so
   * later nodes reuse their memory from the pool. */
  int32_t *dead_slots;
  int32_t num_dead;
  /* In-place plan, per output: the input whose array it may take over (the op's inplace_map
   * entry, kept only when that input is an intermediate of this function that dies at this
   * node and is read once by it), or -1. The run still checks dtype, concrete shape, layout
   * and that no other slot holds the array before reusing it. */
  int32_t *inplace_input;
  /* per output: 1 when the static types already prove the reuse (explain says "in place") */
  char *inplace_certain;
  dlop__shape_cache shapes; /* allocated by dlop__function_prepare_runs */
} dlop__function_node;

struct dlop_function {
  dlop_device device;
  dlop_stream *stream; /* owned, non-default stream on CUDA; NULL on the CPU */
  int32_t num_slots;
  int32_t first_node_slot;
  char **slot_names;     /* owned copies of variable names */
  dlop_type *slot_types; /* static types */
  int32_t num_inputs;
  int32_t num_constants;
  dlop_array **constants; /* on the function's device, retained; slot num_inputs + i */
  int32_t num_outputs;
  int32_t *output_slots;
  int32_t num_nodes;
  dlop__function_node *nodes;
  int32_t max_node_inputs;
  int32_t max_node_outputs;
  /* What fusion did (function_fuse.c), one line for explain: owned, NULL before the pass. */
  char *fusion_note;
  int32_t fused_nodes;   /* nodes of the graph that run inside fused kernels */
  void *fusion_module;   /* the fused kernels' module: a dlop__c_module or a CUDA module */
  int fusion_module_is_cuda;
  /* Caller-supplied streams runs were enqueued on (retained; recorded by function_run.c),
   * waited for at destroy so that no kernel still uses the thunks or constants; the oldest is
   * waited for when full. */
  pthread_mutex_t run_streams_lock;
  dlop_stream *run_streams[DLOP__FUNCTION_MAX_RUN_STREAMS];
  int32_t num_run_streams;
  /* CUDA graphs (cuda_graph.h): what compile decided and the recordings; NULL on the CPU. */
  dlop__cuda_graphs *graphs;
};

/* A node as the gateway into plugin code sees it (stage.h); index is its "#N" in messages. */
static inline dlop__stage_node dlop__function_stage_node(const dlop__function_node *node,
                                                          int32_t index) {
  dlop__stage_node stage = {node->op, node->params, node->num_params, index, node->num_inputs,
                            node->num_outputs};
  return stage;
}

/* Output o of a view node: ask the op's make_view for strides and offset over input (the
 * array the view_map names, already gathered for the run), check them and make *view, a
 * dlop_array_view that keeps input's memory alive. When make_view asks for a C-contiguous
 * input, input is copied on stream (handle: its CUstream, NULL on the CPU) and asked again.
 * type is the output's concrete type from infer_shape; index is the node's "#N". */
int dlop__function_make_view(const dlop_function *function, const dlop__function_node *node,
                             int32_t index, int32_t o, dlop_array *input, const dlop_type *type,
                             dlop_stream *stream, void *handle, dlop_array **view);

/* Fill every node's dead_slots from the slots' last uses, and its in-place plan. */
int dlop__function_plan_buffers(dlop_function *function);

/* The nodes of one run of function, enqueued on capture_handle (a stream capturing into a CUDA
 * graph) while arrays record stream, the one the graph will be launched on; the outputs come
 * from the pool and never take over an intermediate's array, every other allocation goes to the
 * capture's arena (cuda_graph.h). Inputs are checked already and the context is current. */
int dlop__function_run_captured(dlop_function *function, dlop_array *const *inputs,
                                dlop_stream *stream, void *capture_handle, dlop_array **outputs);

/* After compiling: every node's shape cache (function_run.c). Freed by
 * dlop__function_free_runs, which is safe on a node whose cache was never made. */
int dlop__function_prepare_runs(dlop_function *function);
void dlop__function_free_runs(dlop_function *function);

#endif
