/* graph.c — the C graph: typed variables (inputs, constants, node outputs) and applying a
 * registered op, which runs make_node and infer_shape at once so every variable's dtype and
 * static shape (unknown dims included) is known while the graph is built. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "stage.h"

int dlop_graph_create(dlop_graph **graph) {
  if (graph == NULL) return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_graph_create: graph is NULL");
  *graph = calloc(1, sizeof(dlop_graph));
  if (*graph == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory creating a graph");
  return DLOP_OK;
}

static void free_var(dlop_var *var) {
  if (var == NULL) return;
  if (var->constant) dlop_array_release(var->constant);
  free(var->name);
  free(var);
}

static void free_node(dlop__node *node) {
  if (node == NULL) return;
  free(node->params);
  free(node->inputs);
  free(node->outputs);
  free(node);
}

void dlop_graph_destroy(dlop_graph *graph) {
  int32_t i;
  if (graph == NULL) return;
  for (i = 0; i < graph->num_vars; i++) free_var(graph->vars[i]);
  for (i = 0; i < graph->num_nodes; i++) free_node(graph->nodes[i]);
  free(graph->vars);
  free(graph->nodes);
  free(graph);
}

/* Make room for `more` variables and one node, so that adding them afterwards cannot fail. */
static int reserve(dlop_graph *graph, int32_t more_vars, int32_t more_nodes) {
  if (graph->num_vars + more_vars > graph->vars_capacity) {
    int32_t capacity = graph->vars_capacity ? graph->vars_capacity * 2 : 16;
    while (capacity < graph->num_vars + more_vars) capacity *= 2;
    dlop_var **vars = realloc(graph->vars, sizeof(dlop_var *) * (size_t)capacity);
    if (vars == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory growing a graph");
    graph->vars = vars;
    graph->vars_capacity = capacity;
  }
  if (graph->num_nodes + more_nodes > graph->nodes_capacity) {
    int32_t capacity = graph->nodes_capacity ? graph->nodes_capacity * 2 : 16;
    while (capacity < graph->num_nodes + more_nodes) capacity *= 2;
    dlop__node **nodes = realloc(graph->nodes, sizeof(dlop__node *) * (size_t)capacity);
    if (nodes == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory growing a graph");
    graph->nodes = nodes;
    graph->nodes_capacity = capacity;
  }
  return DLOP_OK;
}

/* A new variable, not yet added to the graph. name NULL: "<prefix>.<n>". */
static dlop_var *new_var(dlop_graph *graph, const char *name, const char *prefix, int32_t kind) {
  dlop_var *var = calloc(1, sizeof(dlop_var));
  char generated[160];
  if (var == NULL) return NULL;
  if (name == NULL) {
    snprintf(generated, sizeof generated, "%s.%lld", prefix, (long long)graph->unnamed_count++);
    name = generated;
  }
  var->name = strdup(name);
  if (var->name == NULL) {
    free(var);
    return NULL;
  }
  var->graph = graph;
  var->kind = kind;
  return var;
}

static void add_var(dlop_graph *graph, dlop_var *var) {
  var->index = graph->num_vars;
  graph->vars[graph->num_vars++] = var;
}

int dlop_graph_input(dlop_graph *graph, const char *name, dlop_dtype dtype, int32_t ndim,
                     const int64_t *shape, dlop_var **var) {
  dlop_var *input;
  int32_t i;
  if (graph == NULL || var == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_graph_input: %s is NULL",
                       graph == NULL ? "graph" : "var");
  *var = NULL;
  if ((int)dtype < 0 || (int)dtype >= DLOP_DTYPE_COUNT)
    return dlop__error(DLOP_INVALID_ARGUMENT, "input '%s': dtype %d is not a dlop dtype (0..%d)",
                       name ? name : "", (int)dtype, DLOP_DTYPE_COUNT - 1);
  if (ndim < 0 || ndim > DLOP_MAX_NDIM)
    return dlop__error(DLOP_INVALID_ARGUMENT, "input '%s': ndim %d is outside 0..%d",
                       name ? name : "", (int)ndim, DLOP_MAX_NDIM);
  for (i = 0; shape != NULL && i < ndim; i++)
    if (shape[i] < 0 && shape[i] != DLOP_DIM_UNKNOWN)
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "input '%s': dimension %d is %lld; use a size >= 0 or "
                         "DLOP_DIM_UNKNOWN (-1)",
                         name ? name : "", (int)i, (long long)shape[i]);
  if (shape != NULL) {
    /* a shape no array can have is refused now, not at the first run (unknown dims count as
     * 1: whatever they turn out to be cannot make it fit) */
    char what[192];
    dlop__format(what, sizeof what, "input '%s'", name ? name : "");
    int status = dlop__check_shape_size(what, shape, ndim, (int32_t)dtype, NULL);
    if (status != DLOP_OK) return status;
  }
  if (reserve(graph, 1, 0) != DLOP_OK) return DLOP_OUT_OF_MEMORY;
  input = new_var(graph, name, "input", DLOP__VAR_INPUT);
  if (input == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory adding an input");
  input->type.dtype = dtype;
  input->type.ndim = ndim;
  for (i = 0; i < ndim; i++) input->type.shape[i] = shape ? shape[i] : DLOP_DIM_UNKNOWN;
  add_var(graph, input);
  *var = input;
  return DLOP_OK;
}

int dlop_graph_constant(dlop_graph *graph, const char *name, dlop_array *value, dlop_var **var) {
  const dlop_tensor *tensor;
  dlop_var *constant;
  dlop_dtype dtype;
  int32_t i;
  if (graph == NULL || value == NULL || var == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_graph_constant: %s is NULL",
                       graph == NULL   ? "graph"
                       : value == NULL ? "value"
                                       : "var");
  *var = NULL;
  tensor = dlop_array_tensor(value);
  dtype = dlop_tensor_dtype(tensor);
  if (dtype == DLOP_DTYPE_INVALID)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "constant '%s': the array's DLPack dtype (code %u, %u bits, %u lanes) "
                       "is not a dlop dtype",
                       name ? name : "", tensor->dtype.code, tensor->dtype.bits,
                       tensor->dtype.lanes);
  if (tensor->ndim < 0 || tensor->ndim > DLOP_MAX_NDIM)
    return dlop__error(DLOP_INVALID_ARGUMENT, "constant '%s': ndim %d is outside 0..%d",
                       name ? name : "", (int)tensor->ndim, DLOP_MAX_NDIM);
  if (reserve(graph, 1, 0) != DLOP_OK) return DLOP_OUT_OF_MEMORY;
  constant = new_var(graph, name, "constant", DLOP__VAR_CONSTANT);
  if (constant == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory adding a constant");
  constant->type.dtype = dtype;
  constant->type.ndim = tensor->ndim;
  for (i = 0; i < tensor->ndim; i++) constant->type.shape[i] = tensor->shape[i];
  dlop_array_retain(value);
  constant->constant = value;
  add_var(graph, constant);
  *var = constant;
  return DLOP_OK;
}

static int check_apply_arguments(dlop_graph *graph, const char *op_name, dlop_var *const *inputs,
                                 int32_t num_inputs, dlop_var **outputs, int32_t num_outputs) {
  int32_t i;
  if (graph == NULL || op_name == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_graph_apply: %s is NULL",
                       graph == NULL ? "graph" : "op_name");
  if (num_inputs < 0 || (num_inputs > 0 && inputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': %d inputs but inputs is %s", op_name,
                       (int)num_inputs, inputs ? "set" : "NULL");
  if (num_outputs < 0 || (num_outputs > 0 && outputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': %d outputs but outputs is %s", op_name,
                       (int)num_outputs, outputs ? "set" : "NULL");
  for (i = 0; i < num_inputs; i++) {
    if (inputs[i] == NULL)
      return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': input %d is NULL", op_name, (int)i);
    if (inputs[i]->graph != graph)
      return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': input %d ('%s') belongs to another graph",
                         op_name, (int)i, inputs[i]->name);
  }
  return DLOP_OK;
}

static int check_arity(const dlop_op_desc *op, int32_t num_inputs, int32_t num_outputs) {
  if (op->num_inputs != DLOP_VARIADIC && op->num_inputs != num_inputs)
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s' takes %d input%s, got %d", op->name,
                       (int)op->num_inputs, op->num_inputs == 1 ? "" : "s", (int)num_inputs);
  if (op->num_outputs != num_outputs)
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s' has %d output%s, but room for %d was given",
                       op->name, (int)op->num_outputs, op->num_outputs == 1 ? "" : "s",
                       (int)num_outputs);
  return DLOP_OK;
}

int dlop__infer_node_types(const dlop_op_desc *op, const dlop_param_value *params,
                           const dlop_type *inputs, int32_t num_inputs, dlop_type *outputs,
                           int32_t num_outputs) {
  const dlop__stage_node node = {op, params, op->num_params, -1, num_inputs, num_outputs};
  char text[96];
  dlop_type *declared;
  int32_t i, d;
  int status;

  memset(outputs, 0, sizeof(dlop_type) * (size_t)num_outputs);
  status = dlop__stage_make_node(&node, inputs, outputs);
  if (status != DLOP_OK) return status;
  for (i = 0; i < num_outputs; i++) {
    if (dlop__type_valid(&outputs[i], 0) != DLOP_OK)
      return dlop__error(DLOP_PLUGIN_ERROR,
                         "%s: make_node returned an invalid type for output %d (dtype %d, "
                         "ndim %d; expected a dlop dtype, ndim 0..%d, dims >= 0 or unknown)",
                         op->name, (int)i, (int)outputs[i].dtype, (int)outputs[i].ndim,
                         DLOP_MAX_NDIM);
  }

  /* infer_shape sees make_node's dtype and ndim with every dim unknown; what it says must not
   * contradict the dims make_node already knew. */
  declared = malloc(sizeof(dlop_type) * (size_t)(num_outputs > 0 ? num_outputs : 1));
  if (declared == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory in %s", op->name);
  memcpy(declared, outputs, sizeof(dlop_type) * (size_t)num_outputs);
  for (i = 0; i < num_outputs; i++)
    for (d = 0; d < outputs[i].ndim; d++) outputs[i].shape[d] = DLOP_DIM_UNKNOWN;
  status = dlop__stage_infer_shape(&node, inputs, outputs);
  if (status != DLOP_OK) {
    free(declared);
    return status;
  }
  for (i = 0; i < num_outputs; i++) {
    if (outputs[i].dtype != declared[i].dtype || outputs[i].ndim != declared[i].ndim) {
      status = dlop__error(
          DLOP_PLUGIN_ERROR, "%s: infer_shape changed output %d from %s/%d dims to %s/%d dims",
          op->name, (int)i, dlop_dtype_name((dlop_dtype)declared[i].dtype), (int)declared[i].ndim,
          dlop_dtype_name((dlop_dtype)outputs[i].dtype), (int)outputs[i].ndim);
      break;
    }
    if (dlop__type_valid(&outputs[i], 0) != DLOP_OK) {
      status = dlop__error(DLOP_PLUGIN_ERROR,
                           "%s: infer_shape returned a negative dim for output %d (%s)", op->name,
                           (int)i, dlop__type_format(&outputs[i], text, sizeof text));
      break;
    }
    for (d = 0; d < outputs[i].ndim; d++) {
      int64_t before = declared[i].shape[d], after = outputs[i].shape[d];
      if (before != DLOP_DIM_UNKNOWN && after != DLOP_DIM_UNKNOWN && before != after) {
        status = dlop__error(DLOP_PLUGIN_ERROR,
                             "%s: infer_shape says dim %d of output %d is %lld but make_node "
                             "said %lld",
                             op->name, (int)d, (int)i, (long long)after, (long long)before);
        break;
      }
      if (after == DLOP_DIM_UNKNOWN) outputs[i].shape[d] = before;
    }
    if (status != DLOP_OK) break;
    /* a static shape no array can have (NumPy's size rule, unknown dims as 1) is a shape
     * error here, whatever the plugin's own rules checked */
    char what[160];
    if (dlop_shape_size(outputs[i].shape, outputs[i].ndim,
                        (int64_t)dlop_dtype_size((dlop_dtype)outputs[i].dtype), NULL,
                        NULL) == DLOP_SIZE_FITS)
      continue;
    dlop__format(what, sizeof what, "%s: output %d", op->name, (int)i);
    status = dlop__check_shape_size(what, outputs[i].shape, outputs[i].ndim, outputs[i].dtype, NULL);
    break;
  }
  free(declared);
  return status;
}

/* The node and its output variables, added to the graph only when all of it exists. */
static int add_node(dlop_graph *graph, const dlop_op_desc *op, dlop_param_value *params,
                    dlop_var *const *inputs, int32_t num_inputs, const dlop_type *types,
                    dlop_var **outputs, int32_t num_outputs) {
  dlop__node *node = calloc(1, sizeof(dlop__node));
  int32_t i;
  if (node == NULL || reserve(graph, num_outputs, 1) != DLOP_OK) goto out_of_memory;
  node->inputs = malloc(sizeof(dlop_var *) * (size_t)(num_inputs > 0 ? num_inputs : 1));
  node->outputs = calloc((size_t)(num_outputs > 0 ? num_outputs : 1), sizeof(dlop_var *));
  if (node->inputs == NULL || node->outputs == NULL) goto out_of_memory;
  for (i = 0; i < num_outputs; i++) {
    node->outputs[i] = new_var(graph, NULL, op->name, DLOP__VAR_NODE_OUTPUT);
    if (node->outputs[i] == NULL) goto out_of_memory;
    node->outputs[i]->type = types[i];
    node->outputs[i]->node = node;
    node->outputs[i]->output_index = i;
  }
  if (num_inputs > 0) memcpy(node->inputs, inputs, sizeof(dlop_var *) * (size_t)num_inputs);
  node->op = op;
  node->params = params;
  node->num_params = op->num_params;
  node->num_inputs = num_inputs;
  node->num_outputs = num_outputs;
  node->index = graph->num_nodes;
  graph->nodes[graph->num_nodes++] = node;
  for (i = 0; i < num_outputs; i++) {
    add_var(graph, node->outputs[i]);
    outputs[i] = node->outputs[i];
  }
  return DLOP_OK;

out_of_memory:
  if (node != NULL) {
    for (i = 0; node->outputs != NULL && i < num_outputs; i++) free_var(node->outputs[i]);
    node->params = NULL; /* the caller still owns params on failure */
    free_node(node);
  }
  return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory adding a '%s' node", op->name);
}

/* outputs may alias inputs (v = double(v)): inputs are read in full before outputs are set. */
static int apply(dlop_graph *graph, const char *op_name, dlop_var *const *inputs,
                 int32_t num_inputs, const dlop_named_param *params, int32_t num_params,
                 dlop_var **outputs, int32_t num_outputs) {
  const dlop_op_desc *op;
  dlop_param_value *values = NULL;
  dlop_type *types = NULL;
  int32_t i;
  int status = check_apply_arguments(graph, op_name, inputs, num_inputs, outputs, num_outputs);
  if (status != DLOP_OK) return status;

  op = dlop_find_op(op_name);
  if (op == NULL)
    return dlop__error(DLOP_NOT_FOUND,
                       "unknown op '%s': no loaded plugin provides it (%d ops loaded; load its "
                       "plugin with dlop_load_plugin or put it on DLOP_PLUGIN_PATH)",
                       op_name, dlop_op_count());
  status = check_arity(op, num_inputs, num_outputs);
  if (status != DLOP_OK) return status;
  status = dlop__params_resolve(op, params, num_params, &values);
  if (status != DLOP_OK) return status;

  /* input types then output types, one block */
  types = malloc(sizeof(dlop_type) * (size_t)(num_inputs + num_outputs + 1));
  if (types == NULL) {
    free(values);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory applying op '%s'", op->name);
  }
  for (i = 0; i < num_inputs; i++) types[i] = inputs[i]->type;
  status = dlop__infer_node_types(op, values, types, num_inputs, types + num_inputs, num_outputs);
  if (status == DLOP_OK)
    status =
        add_node(graph, op, values, inputs, num_inputs, types + num_inputs, outputs, num_outputs);
  if (status != DLOP_OK) free(values);
  free(types);
  return status;
}

int dlop_graph_apply(dlop_graph *graph, const char *op_name, dlop_var *const *inputs,
                     int32_t num_inputs, const dlop_named_param *params, int32_t num_params,
                     dlop_var **outputs, int32_t num_outputs) {
  int status = apply(graph, op_name, inputs, num_inputs, params, num_params, outputs, num_outputs);
  if (status != DLOP_OK && outputs != NULL) {
    /* Clear the output slots, except those that are also input slots (v = op(v)): the caller's
     * v must survive a failed apply. Addresses compared as integers: the arrays may differ. */
    uintptr_t first = (uintptr_t)inputs;
    uintptr_t end = first + (inputs && num_inputs > 0 ? (uintptr_t)num_inputs * sizeof *inputs : 0);
    for (int32_t i = 0; i < num_outputs; i++) {
      uintptr_t slot = (uintptr_t)&outputs[i];
      if (slot < first || slot >= end) outputs[i] = NULL;
    }
  }
  return status;
}

const dlop_type *dlop_var_type(const dlop_var *var) { return var ? &var->type : NULL; }

const char *dlop_var_name(const dlop_var *var) { return var ? var->name : NULL; }

const dlop_op_desc *dlop_var_op(const dlop_var *var) {
  return (var != NULL && var->node != NULL) ? var->node->op : NULL;
}
