/* graph_internal.h — the layout of graphs, variables and nodes, shared by graph.c (building),
 * graph_params.c (op parameters) and the function compiler (function*.c, explain.c).
 * Not part of the public ABI. */
#ifndef DLOP_GRAPH_INTERNAL_H
#define DLOP_GRAPH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef enum dlop__var_kind {
  DLOP__VAR_INPUT = 0,
  DLOP__VAR_CONSTANT = 1,
  DLOP__VAR_NODE_OUTPUT = 2
} dlop__var_kind;

typedef struct dlop__node dlop__node;

struct dlop_var {
  dlop_graph *graph;
  int32_t index; /* position in graph->vars */
  int32_t kind;  /* dlop__var_kind */
  char *name;
  dlop_type type;
  dlop__node *node; /* producer (DLOP__VAR_NODE_OUTPUT), else NULL */
  int32_t output_index;
  dlop_array *constant; /* retained (DLOP__VAR_CONSTANT), else NULL */
};

struct dlop__node {
  int32_t index; /* position in graph->nodes */
  const dlop_op_desc *op;
  dlop_param_value *params; /* op->num_params values, packed (one allocation) */
  int32_t num_params;
  int32_t num_inputs;
  int32_t num_outputs;
  dlop_var **inputs;
  dlop_var **outputs;
};

struct dlop_graph {
  dlop_var **vars;
  int32_t num_vars;
  int32_t vars_capacity;
  dlop__node **nodes;
  int32_t num_nodes;
  int32_t nodes_capacity;
  int64_t unnamed_count; /* suffix for generated names ("double.0") */
};

/* ---- parameters (graph_params.c) -------------------------------------------------------- */

/* Every declared parameter of op, in declaration order: the named ones given, the others at
 * their declared defaults. DLOP_INVALID_ARGUMENT for an unknown name, a repeated name or a
 * wrong kind, naming the op, the parameter and the declared ones. *values is one allocation
 * holding its strings and int lists (free it with free()). */
int dlop__params_resolve(const dlop_op_desc *op, const dlop_named_param *named, int32_t num_named,
                         dlop_param_value **values);
/* A deep copy of count values in one allocation (NULL and DLOP_OK for count 0). */
int dlop__params_pack(const dlop_param_value *source, int32_t count, dlop_param_value **copy);

/* ---- types (graph_types.c) -------------------------------------------------------------- */

/* "float32[3,?]" into buffer (always NUL-terminated). */
const char *dlop__type_format(const dlop_type *type, char *buffer, size_t size);
/* DLOP_OK when the type is well formed: a valid dtype, 0 <= ndim <= DLOP_MAX_NDIM, every dim
 * >= 0 or DLOP_DIM_UNKNOWN (or, with concrete set, every dim >= 0). */
int dlop__type_valid(const dlop_type *type, int concrete);
/* "float16, float32" for a mask of DLOP_DTYPE_BIT bits ("none" for 0) into buffer. */
void dlop__dtype_list(uint32_t mask, char *buffer, size_t size);

/* ---- a node's types (graph.c) ----------------------------------------------------------- */

/* make_node then infer_shape of op on static input types, both checked (valid types, infer_shape
 * agreeing with make_node, NumPy's size rule): fills outputs[0..num_outputs). What
 * dlop_graph_apply and dlop_op_call_create run. */
int dlop__infer_node_types(const dlop_op_desc *op, const dlop_param_value *params,
                           const dlop_type *inputs, int32_t num_inputs, dlop_type *outputs,
                           int32_t num_outputs);

#endif
