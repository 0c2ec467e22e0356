/* function.c — compiling a subgraph for one device: the nodes needed between the given
 * inputs and outputs in topological order, a device and dtype check per node, constants moved
 * to the device once, elementwise fusion (function_fuse.c), make_thunk, a stream (CUDA), the
 * buffer plan and (CUDA) whether runs may replay CUDA graphs (cuda_graph_plan.c). View nodes (ABI
 * 1.1 view_map) get no thunk: they run as views of their inputs (function_view.c).
 * Compiling calls into the runner only to make and free its run state (function_run.c);
 * the runner calls nothing here. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "function_internal.h"
#include "fusion.h"

void dlop_function_destroy(dlop_function *function) {
  int32_t i;
  if (function == NULL) return;
  /* kernels still in flight may use the thunks' modules and state: let them finish first,
   * on the function's stream and on every caller stream a run was enqueued on */
  if (function->stream && dlop_stream_synchronize(function->stream) != DLOP_OK)
    dlop__warn("destroying a function: waiting for its stream failed: %s", dlop_last_error());
  for (i = 0; i < function->num_run_streams; i++) {
    if (dlop_stream_synchronize(function->run_streams[i]) != DLOP_OK)
      dlop__warn("destroying a function: waiting for a stream it ran on failed: %s",
                 dlop_last_error());
    dlop_stream_destroy(function->run_streams[i]);
  }
  pthread_mutex_destroy(&function->run_streams_lock);
  /* the graphs' arenas go back to the pool (their last launches are done: waited for above) */
  dlop__cuda_graphs_destroy(function->graphs);
  dlop__cuda_graphs_free_plan(function->graphs);
  dlop__function_free_runs(function);
  for (i = 0; i < function->num_nodes; i++) {
    dlop__function_node *node = &function->nodes[i];
    if (node->has_thunk) dlop__stage_destroy(&node->thunk);
    if (node->fused) dlop__function_free_fused(node);
    free(node->params);
    free(node->input_slots);
    free(node->output_slots);
    free(node->input_types);
    free(node->output_types);
    free(node->dead_slots);
    free(node->inplace_input);
    free(node->inplace_certain);
    free(node->fusion_note);
  }
  dlop__function_release_fusion(function); /* after the fused nodes' thunks */
  free(function->fusion_note);
  for (i = 0; i < function->num_constants; i++)
    if (function->constants[i]) dlop_array_release(function->constants[i]);
  for (i = 0; function->slot_names != NULL && i < function->num_slots; i++)
    free(function->slot_names[i]);
  if (function->stream) dlop_stream_destroy(function->stream);
  free(function->nodes);
  free(function->constants);
  free(function->slot_names);
  free(function->slot_types);
  free(function->output_slots);
  free(function);
}

dlop_device dlop_function_device(const dlop_function *function) {
  dlop_device none = {0, 0};
  return function ? function->device : none;
}

int32_t dlop_function_node_count(const dlop_function *function) {
  return function ? function->num_nodes : 0;
}

/* Scratch of one compilation: which nodes and constants are needed, each var's slot. */
typedef struct compile_state {
  dlop_graph *graph;
  int32_t *var_slot;     /* per graph var: slot, or -1 */
  char *node_needed;     /* per graph node */
  char *constant_needed; /* per graph var */
} compile_state;

static int check_compile_arguments(dlop_graph *graph, dlop_var *const *inputs, int32_t num_inputs,
                                   dlop_var *const *outputs, int32_t num_outputs,
                                   dlop_device device, dlop_function **function) {
  int32_t i, j;
  if (graph == NULL || function == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_function_compile: %s is NULL",
                       graph == NULL ? "graph" : "function");
  if (num_inputs < 0 || (num_inputs > 0 && inputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_function_compile: %d inputs but inputs is %s",
                       (int)num_inputs, inputs ? "set" : "NULL");
  if (num_outputs <= 0 || outputs == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_function_compile: a function needs at least one output (got %d, "
                       "outputs %s)",
                       (int)num_outputs, outputs ? "set" : "NULL");
  if (device.type != DLOP_DEVICE_CPU && device.type != DLOP_DEVICE_CUDA)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_function_compile: device type %d is neither cpu (%d) nor cuda (%d)",
                       (int)device.type, DLOP_DEVICE_CPU, DLOP_DEVICE_CUDA);
  for (i = 0; i < num_inputs; i++) {
    if (inputs[i] == NULL || inputs[i]->graph != graph)
      return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_function_compile: input %d is %s", (int)i,
                         inputs[i] ? "a variable of another graph" : "NULL");
    for (j = 0; j < i; j++)
      if (inputs[j] == inputs[i])
        return dlop__error(DLOP_INVALID_ARGUMENT,
                           "dlop_function_compile: '%s' is given twice as an input (%d and %d)",
                           inputs[i]->name, (int)j, (int)i);
  }
  for (i = 0; i < num_outputs; i++)
    if (outputs[i] == NULL || outputs[i]->graph != graph)
      return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_function_compile: output %d is %s", (int)i,
                         outputs[i] ? "a variable of another graph" : "NULL");
  return DLOP_OK;
}

/* Walk back from the outputs to the given inputs, marking needed nodes and constants. */
static int mark_needed(compile_state *state, dlop_var *const *outputs, int32_t num_outputs) {
  dlop_graph *graph = state->graph;
  int32_t capacity = num_outputs + 16, top = 0, i;
  dlop_var **stack = malloc(sizeof(dlop_var *) * (size_t)capacity);
  int status = DLOP_OK;
  if (stack == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling");
  for (i = 0; i < num_outputs; i++) stack[top++] = outputs[i];
  while (top > 0 && status == DLOP_OK) {
    dlop_var *var = stack[--top];
    if (state->var_slot[var->index] >= 0) continue; /* a listed input */
    if (var->kind == DLOP__VAR_INPUT) {
      char text[96];
      status = dlop__error(DLOP_INVALID_ARGUMENT,
                           "graph input '%s' (%s) is needed to compute the outputs but is not "
                           "among the function's inputs",
                           var->name, dlop__type_format(&var->type, text, sizeof text));
    } else if (var->kind == DLOP__VAR_CONSTANT) {
      state->constant_needed[var->index] = 1;
    } else if (!state->node_needed[var->node->index]) {
      dlop__node *node = var->node;
      state->node_needed[node->index] = 1;
      if (top + node->num_inputs > capacity) {
        capacity = (top + node->num_inputs) * 2;
        dlop_var **grown = realloc(stack, sizeof(dlop_var *) * (size_t)capacity);
        if (grown == NULL) {
          status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling");
          break;
        }
        stack = grown;
      }
      for (i = 0; i < node->num_inputs; i++) stack[top++] = node->inputs[i];
    }
  }
  (void)graph;
  free(stack);
  return status;
}

static int new_slot(dlop_function *function, dlop_var *var) {
  int32_t slot = function->num_slots++;
  function->slot_names[slot] = strdup(var->name);
  function->slot_types[slot] = var->type;
  return function->slot_names[slot] ? slot : -1;
}

/* Slots for inputs, needed constants and needed nodes' outputs; the schedule's nodes. */
static int assign_slots(dlop_function *function, compile_state *state, dlop_var *const *inputs,
                        int32_t num_inputs) {
  dlop_graph *graph = state->graph;
  int32_t i, j, n = 0;
  function->slot_names = calloc((size_t)graph->num_vars + 1, sizeof(char *));
  function->slot_types = calloc((size_t)graph->num_vars + 1, sizeof(dlop_type));
  function->constants = calloc((size_t)graph->num_vars + 1, sizeof(dlop_array *));
  for (i = 0; i < graph->num_nodes; i++) n += state->node_needed[i];
  function->nodes = calloc((size_t)n + 1, sizeof(dlop__function_node));
  if (!function->slot_names || !function->slot_types || !function->constants || !function->nodes)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling");
  for (i = 0; i < num_inputs; i++)
    if (new_slot(function, inputs[i]) < 0) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
  function->num_inputs = num_inputs;
  for (i = 0; i < graph->num_vars; i++) {
    dlop_var *var = graph->vars[i];
    if (!state->constant_needed[i]) continue;
    state->var_slot[i] = new_slot(function, var);
    if (state->var_slot[i] < 0) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
    function->constants[function->num_constants++] = var->constant; /* retained later */
  }
  function->first_node_slot = function->num_slots;
  /* graph nodes are created after their inputs, so graph order is a topological order */
  for (i = 0; i < graph->num_nodes; i++) {
    dlop__node *node = graph->nodes[i];
    dlop__function_node *out;
    if (!state->node_needed[i]) continue;
    out = &function->nodes[function->num_nodes++];
    out->op = node->op;
    out->index = function->num_nodes - 1;
    out->num_inputs = node->num_inputs;
    out->num_outputs = node->num_outputs;
    out->input_slots = malloc(sizeof(int32_t) * (size_t)(node->num_inputs + 1));
    out->output_slots = malloc(sizeof(int32_t) * (size_t)(node->num_outputs + 1));
    out->input_types = malloc(sizeof(dlop_type) * (size_t)(node->num_inputs + 1));
    out->output_types = malloc(sizeof(dlop_type) * (size_t)(node->num_outputs + 1));
    if (!out->input_slots || !out->output_slots || !out->input_types || !out->output_types)
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling");
    if (dlop__params_pack(node->params, node->num_params, &out->params) != DLOP_OK)
      return DLOP_OUT_OF_MEMORY;
    out->num_params = node->num_params;
    for (j = 0; j < node->num_inputs; j++) {
      out->input_slots[j] = state->var_slot[node->inputs[j]->index];
      out->input_types[j] = node->inputs[j]->type;
    }
    for (j = 0; j < node->num_outputs; j++) {
      dlop_var *var = node->outputs[j];
      /* an output the caller feeds as an input still gets a slot of its own, never read */
      int32_t slot = new_slot(function, var);
      if (slot < 0) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
      if (state->var_slot[var->index] < 0) state->var_slot[var->index] = slot;
      out->output_slots[j] = slot;
      out->output_types[j] = var->type;
    }
    if (node->num_inputs > function->max_node_inputs) function->max_node_inputs = node->num_inputs;
    if (node->num_outputs > function->max_node_outputs)
      function->max_node_outputs = node->num_outputs;
  }
  return DLOP_OK;
}

/* The op declares this device and every input dtype there. */
static int check_supported(const dlop__function_node *node, dlop_device device,
                           const char *device_name) {
  uint32_t mask = dlop_op_dtypes(node->op, (dlop_device_type)device.type);
  char list[256];
  int32_t i;
  if (mask == 0) {
    const char *other = device.type == DLOP_DEVICE_CUDA ? "cpu" : "cuda";
    dlop__dtype_list(dlop_op_dtypes(node->op,
                              device.type == DLOP_DEVICE_CUDA ? DLOP_DEVICE_CPU : DLOP_DEVICE_CUDA),
               list, sizeof list);
    return dlop__error(DLOP_UNSUPPORTED,
                       "node #%d %s: op '%s' has no kernel for %s (it supports %s with: %s)",
                       (int)node->index, node->op->name, node->op->name, device_name, other, list);
  }
  for (i = 0; i < node->num_inputs; i++) {
    int32_t dtype = node->input_types[i].dtype;
    if (mask & DLOP_DTYPE_BIT(dtype)) continue;
    dlop__dtype_list(mask, list, sizeof list);
    return dlop__error(DLOP_UNSUPPORTED,
                       "node #%d %s: op '%s' does not support %s (input %d) on %s; it supports "
                       "there: %s",
                       (int)node->index, node->op->name, node->op->name,
                       dlop_dtype_name((dlop_dtype)dtype), (int)i, device_name, list);
  }
  return DLOP_OK;
}

/* A view node (ABI 1.1) gets no thunk: its outputs are laid out over its inputs by make_view
 * at run time. Its static types must already agree with that: each output has the dtype of the
 * input it views. */
static int prepare_view(dlop__function_node *node) {
  char have[96], want[96];
  node->is_view = 1;
  for (int32_t o = 0; o < node->num_outputs; o++) {
    const dlop_type *input = &node->input_types[node->op->view_map[o]];
    if (node->output_types[o].dtype != input->dtype)
      return dlop__error(DLOP_PLUGIN_ERROR,
                         "node #%d %s: output %d is %s but it is a view of input %d, which is %s: "
                         "a view has its input's dtype (make_node is wrong)",
                         (int)node->index, node->op->name, (int)o,
                         dlop__type_format(&node->output_types[o], have, sizeof have),
                         (int)node->op->view_map[o], dlop__type_format(input, want, sizeof want));
  }
  return DLOP_OK;
}

static int make_thunk(dlop__function_node *node, dlop_device device) {
  if (node->fused) return DLOP_OK; /* the host made its thunk with its kernel */
  if (node->op->view_map != NULL) return prepare_view(node);
  dlop__stage_node stage = dlop__function_stage_node(node, node->index);
  int status = dlop__stage_make_thunk(&stage, node->input_types, node->output_types, device,
                                      &node->thunk);
  /* a failed make_thunk may have set state; never destroy what it did not hand over */
  if (status != DLOP_OK) return status;
  node->has_thunk = 1;
  if (node->thunk.run == NULL)
    return dlop__error(DLOP_PLUGIN_ERROR, "node #%d %s: make_thunk succeeded but left run NULL",
                       (int)node->index, node->op->name);
  return DLOP_OK;
}

/* Constants live on the function's device, copied once, with no write pending. On entry
 * constants[] holds the graph's (not retained) arrays; on return every entry is retained or
 * NULL, so dlop_function_destroy can release them. */
static int place_constants(dlop_function *function, const char *device_name) {
  int32_t i;
  int status = DLOP_OK;
  char where[32];
  for (i = 0; i < function->num_constants; i++) {
    dlop_array *value = function->constants[i];
    dlop_device at = dlop_array_device(value);
    dlop_array *placed = NULL;
    function->constants[i] = NULL;
    if (status != DLOP_OK) continue;
    if (at.type == function->device.type && at.id == function->device.id) {
      dlop_array_retain(value);
      placed = value;
    } else {
      status = dlop_array_copy_to(value, function->device, &placed);
      if (status != DLOP_OK) {
        char message[1024];
        dlop__format(message, sizeof message, "%s", dlop_last_error());
        status = dlop__error(status, "constant '%s' could not be copied from %s to %s: %s",
                             function->slot_names[function->num_inputs + i],
                             dlop_device_format(at, where, sizeof where), device_name, message);
        continue;
      }
    }
    function->constants[i] = placed;
    status = dlop_array_synchronize(placed);
  }
  return status;
}

void dlop_function_options_init(dlop_function_options *options) {
  if (options == NULL) return;
  dlop_function_options defaults = DLOP_FUNCTION_OPTIONS_INIT;
  *options = defaults;
}

/* The caller's options over the defaults: only the fields its struct_size covers. */
static int read_options(const dlop_function_options *given, dlop_function_options *options) {
  dlop_function_options_init(options);
  if (given == NULL) return DLOP_OK;
  size_t cuda_graphs_end = offsetof(dlop_function_options, cuda_graphs) + sizeof(int32_t);
  size_t fuse_end = offsetof(dlop_function_options, fuse) + sizeof(int32_t);
  if (given->struct_size < cuda_graphs_end)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_function_compile_with_options: options.struct_size is %u, too small "
                       "for any option (expected sizeof(dlop_function_options) = %zu; start from "
                       "DLOP_FUNCTION_OPTIONS_INIT)",
                       (unsigned)given->struct_size, sizeof(dlop_function_options));
  options->cuda_graphs = given->cuda_graphs;
  if (options->cuda_graphs != 0 && options->cuda_graphs != 1)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_function_compile_with_options: options.cuda_graphs is %d (expected 0 "
                       "or 1)",
                       (int)options->cuda_graphs);
  if (given->struct_size < fuse_end) return DLOP_OK; /* a caller compiled before fuse: default */
  options->fuse = given->fuse;
  if (options->fuse != 0 && options->fuse != 1)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_function_compile_with_options: options.fuse is %d (expected 0 or 1)",
                       (int)options->fuse);
  return DLOP_OK;
}

int dlop_function_compile(dlop_graph *graph, dlop_var *const *inputs, int32_t num_inputs,
                          dlop_var *const *outputs, int32_t num_outputs, dlop_device device,
                          dlop_function **function) {
  return dlop_function_compile_with_options(graph, inputs, num_inputs, outputs, num_outputs,
                                            device, NULL, function);
}

int dlop_function_compile_with_options(dlop_graph *graph, dlop_var *const *inputs,
                                       int32_t num_inputs, dlop_var *const *outputs,
                                       int32_t num_outputs, dlop_device device,
                                       const dlop_function_options *given,
                                       dlop_function **function) {
  compile_state state;
  dlop_function *result;
  dlop_function_options options;
  char device_name[32];
  int32_t i;
  int status =
      check_compile_arguments(graph, inputs, num_inputs, outputs, num_outputs, device, function);
  if (status != DLOP_OK) return status;
  *function = NULL;
  status = read_options(given, &options);
  if (status != DLOP_OK) return status;
  dlop_device_format(device, device_name, sizeof device_name);

  /* never fall back to another device: a missing GPU is the caller's error to see */
  status = dlop_device_check(device);
  if (status != DLOP_OK) {
    char reason[1024];
    dlop__format(reason, sizeof reason, "%s", dlop_last_error());
    return dlop__error(DLOP_NO_DEVICE, "cannot compile a function for %s: %s", device_name, reason);
  }

  memset(&state, 0, sizeof state);
  state.graph = graph;
  state.var_slot = malloc(sizeof(int32_t) * (size_t)(graph->num_vars + 1));
  state.node_needed = calloc((size_t)graph->num_nodes + 1, 1);
  state.constant_needed = calloc((size_t)graph->num_vars + 1, 1);
  result = calloc(1, sizeof(dlop_function));
  if (result) pthread_mutex_init(&result->run_streams_lock, NULL);
  if (!state.var_slot || !state.node_needed || !state.constant_needed || !result) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling a function");
    goto done;
  }
  result->device = device;
  for (i = 0; i < graph->num_vars; i++) state.var_slot[i] = -1;
  for (i = 0; i < num_inputs; i++) state.var_slot[inputs[i]->index] = i;

  status = mark_needed(&state, outputs, num_outputs);
  if (status == DLOP_OK) status = assign_slots(result, &state, inputs, num_inputs);
  if (status != DLOP_OK) {
    result->num_constants = 0; /* not retained yet */
    goto done;
  }
  result->output_slots = malloc(sizeof(int32_t) * (size_t)num_outputs);
  if (result->output_slots == NULL) {
    result->num_constants = 0;
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling a function");
    goto done;
  }
  result->num_outputs = num_outputs;
  for (i = 0; i < num_outputs; i++) result->output_slots[i] = state.var_slot[outputs[i]->index];

  for (i = 0; status == DLOP_OK && i < result->num_nodes; i++)
    status = check_supported(&result->nodes[i], device, device_name);
  if (status == DLOP_OK) {
    status = place_constants(result, device_name);
  } else {
    result->num_constants = 0; /* not retained yet */
  }
  if (status == DLOP_OK)
    status = dlop__function_fuse(result, options.fuse);
  for (i = 0; status == DLOP_OK && i < result->num_nodes; i++)
    status = make_thunk(&result->nodes[i], device);
  if (status == DLOP_OK && device.type == DLOP_DEVICE_CUDA) {
    status = dlop_stream_create(device, &result->stream);
    if (status != DLOP_OK) {
      char reason[1024];
      dlop__format(reason, sizeof reason, "%s", dlop_last_error());
      status = dlop__error(status, "cannot create a stream on %s for the function: %s", device_name,
                           reason);
    }
  }
  if (status == DLOP_OK) status = dlop__function_plan_buffers(result);
  if (status == DLOP_OK) status = dlop__function_prepare_runs(result);
  if (status == DLOP_OK)
    status = dlop__cuda_graphs_create(result, options.cuda_graphs, &result->graphs);

done:
  free(state.var_slot);
  free(state.node_needed);
  free(state.constant_needed);
  if (status != DLOP_OK) {
    dlop_function_destroy(result);
    return status;
  }
  *function = result;
  return DLOP_OK;
}
