/* dlop/graph.h — the C graph API: typed variables, applying ops (types and shapes known at
 * once), compiling a function for a device, and running it. */
#ifndef DLOP_GRAPH_H
#define DLOP_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "op.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlop_graph dlop_graph;
typedef struct dlop_var dlop_var;           /* owned by its graph */
typedef struct dlop_function dlop_function; /* independent of the graph once compiled */

/* A parameter given by name when applying an op; the rest take their declared defaults. */
typedef struct dlop_named_param {
  const char *name;
  dlop_param_value value;
} dlop_named_param;

DLOP_API int dlop_graph_create(dlop_graph **graph);
DLOP_API void dlop_graph_destroy(dlop_graph *graph);

/* A graph input. shape may be NULL (every dimension unknown); DLOP_DIM_UNKNOWN marks one. */
DLOP_API int dlop_graph_input(dlop_graph *graph, const char *name, dlop_dtype dtype, int32_t ndim,
                              const int64_t *shape, dlop_var **var);
/* A constant: the array is retained and fed to every run (copied to the function's device
 * once, at compile time, when it lives elsewhere). */
DLOP_API int dlop_graph_constant(dlop_graph *graph, const char *name, dlop_array *value,
                                 dlop_var **var);

/* Apply a registered op: runs make_node and infer_shape now, so the outputs' dtypes and
 * shapes are known. Type and shape errors come back here, with the op's message. outputs may
 * be the inputs array itself (v = op(v): apply(g, op, &v, 1, ..., &v, 1)). On failure the graph
 * is unchanged and every output slot is set to NULL, except slots that are also input slots,
 * which keep their variable. */
DLOP_API int dlop_graph_apply(dlop_graph *graph, const char *op_name, dlop_var *const *inputs,
                              int32_t num_inputs, const dlop_named_param *params,
                              int32_t num_params, dlop_var **outputs, int32_t num_outputs);

DLOP_API const dlop_type *dlop_var_type(const dlop_var *var);
DLOP_API const char *dlop_var_name(const dlop_var *var);
/* The op that produced var, or NULL for inputs and constants. */
DLOP_API const dlop_op_desc *dlop_var_op(const dlop_var *var);

/* Compile the subgraph from inputs to outputs for one device: topological order, elementwise
 * fusion (dlop_function_compile_with_options below), make_thunk per node, and a buffer plan
 * that frees each intermediate after its last use so later nodes reuse its memory. Fails with DLOP_NO_DEVICE / DLOP_UNSUPPORTED (naming the op and
 * dtype) rather than running anything elsewhere. */
DLOP_API int dlop_function_compile(dlop_graph *graph, dlop_var *const *inputs, int32_t num_inputs,
                                   dlop_var *const *outputs, int32_t num_outputs,
                                   dlop_device device, dlop_function **function);
/* Options of dlop_function_compile_with_options. Start from DLOP_FUNCTION_OPTIONS_INIT (or
 * dlop_function_options_init), then change fields: struct_size says which fields the caller
 * knows, and fields added later take their defaults for a caller compiled before them. */
typedef struct dlop_function_options {
  uint32_t struct_size; /* sizeof(dlop_function_options) as the caller was compiled */
  /* 1 (the default): a CUDA function whose nodes are all declared DLOP_OP_CUDA_GRAPH_SAFE is
   * recorded as a CUDA graph on the second run with the same input shapes, strides and
   * alignments, and every later such run replays it with one graph launch. 0: node by node
   * always. dlop_function_explain says which and why. */
  int32_t cuda_graphs;
  /* 1 (the default): elementwise nodes whose ops declare a scalar body (ABI 1.2) are fused, each
   * group into one kernel the host generates and compiles. 0: every node runs its op's own
   * kernel (dlop_function_explain then says "fusion: off"), to compare. */
  int32_t fuse;
} dlop_function_options;

#define DLOP_FUNCTION_OPTIONS_INIT {sizeof(dlop_function_options), 1, 1}

/* Fill options with the defaults (DLOP_FUNCTION_OPTIONS_INIT). */
DLOP_API void dlop_function_options_init(dlop_function_options *options);

/* dlop_function_compile with options (NULL: the defaults). Fused by default: each group of
 * elementwise nodes runs as one kernel the host generates and compiles (the host's C compiler
 * on the CPU, NVRTC on CUDA), and their intermediate buffers disappear; without that compiler
 * the function runs unfused and dlop_function_explain says why; nothing moves to another
 * device. CUDA functions replay CUDA graphs where they can (cuda_graphs). An option out of
 * range or a struct_size too small for the first field is DLOP_INVALID_ARGUMENT, naming it. */
DLOP_API int dlop_function_compile_with_options(dlop_graph *graph, dlop_var *const *inputs,
                                                int32_t num_inputs, dlop_var *const *outputs,
                                                int32_t num_outputs, dlop_device device,
                                                const dlop_function_options *options,
                                                dlop_function **function);
/* Waits for the work of its runs still in flight, on the function's own stream and on the
 * caller streams runs were given (the last 8 distinct ones are remembered; an older one is
 * waited for when it is forgotten), then frees the thunks and constants. */
DLOP_API void dlop_function_destroy(dlop_function *function);

/* Run once. Inputs must be on the function's device (DLOP_DEVICE_MISMATCH otherwise) and
 * match the declared dtypes and static shapes. New output arrays are written to outputs[]
 * (the caller releases them). On CUDA the work is enqueued on stream (NULL: the function's
 * own stream) and the outputs record it; dlop_array_to_host waits for it. */
DLOP_API int dlop_function_run(dlop_function *function, dlop_array *const *inputs,
                               int32_t num_inputs, dlop_array **outputs, int32_t num_outputs,
                               dlop_stream *stream);

DLOP_API dlop_device dlop_function_device(const dlop_function *function);
/* The nodes of the function's schedule: a fused group counts once, a view node once. */
DLOP_API int32_t dlop_function_node_count(const dlop_function *function);
/* A readable listing: one line per node with op, input and output types, shapes and device;
 * each fused node with its group's members and the kernel they became, a line saying what
 * fusion did (or why it did not), and for a CUDA function whether it replays CUDA graphs (how
 * many recorded and replayed so far) or why not (the option, or the node that is not
 * capture-safe). */
DLOP_API int dlop_function_explain(const dlop_function *function, char *buffer, size_t size);

#ifdef __cplusplus
}
#endif

#endif
