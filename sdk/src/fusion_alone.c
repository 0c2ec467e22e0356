/* fusion_alone.c — one op's scalar body compiled on its own (fusion_alone.h). The nodes are laid
 * out as the function compiler would lay out a function of them side by side: every node input
 * a function input, every node output a function output, each node a fused group of its own.
 * From there the fusion pass's own steps run: the body query, the group build, the generator,
 * the compile and the thunk. Nothing here generates code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "fusion_alone.h"
#include "jit.h"

struct dlop__fusion_alone {
  dlop_function function;      /* the nodes as fusion reads them; fusion_module once compiled */
  int32_t count;
  dlop__fusion_group **groups; /* per node: its group, or NULL where it got no kernel */
  int *status;                 /* per node: DLOP_OK or the body query's status */
  char **message;              /* per node: the query's message, or NULL */
};

int dlop__fusion_alone_available(dlop_device device, char *why, size_t why_size) {
  return device.type == DLOP_DEVICE_CUDA ? dlop__nvrtc_available(why, why_size)
                                         : dlop__c_compiler_available(why, why_size);
}

/* Frees the nodes no group took (a group frees the node it holds). */
static void free_function(dlop__fusion_alone *alone) {
  dlop_function *f = &alone->function;
  for (int32_t k = 0; f->nodes != NULL && k < alone->count; k++) {
    if (alone->groups != NULL && alone->groups[k] != NULL) continue;
    free(f->nodes[k].params);
    free(f->nodes[k].input_slots);
    free(f->nodes[k].output_slots);
    free(f->nodes[k].input_types);
    free(f->nodes[k].output_types);
  }
  for (int32_t s = 0; f->slot_names != NULL && s < f->num_slots; s++) free(f->slot_names[s]);
  free(f->slot_names);
  free(f->slot_types);
  free(f->output_slots);
  free(f->nodes);
}

void dlop__fusion_alone_free(dlop__fusion_alone *alone) {
  if (alone == NULL) return;
  dlop__function_release_fusion(&alone->function);
  free_function(alone);
  for (int32_t k = 0; k < alone->count; k++) {
    if (alone->groups != NULL) dlop__fusion_group_free(alone->groups[k]);
    if (alone->message != NULL) free(alone->message[k]);
  }
  free(alone->groups);
  free(alone->status);
  free(alone->message);
  free(alone);
}

/* Slots: the nodes' inputs (node k's input i is slot k * num_inputs + i), then their outputs. */
static int lay_out(dlop__fusion_alone *alone, const dlop_op_desc *op,
                   const dlop_param_value *params, int32_t num_inputs,
                   const dlop__fusion_alone_node *nodes, dlop_device device) {
  dlop_function *f = &alone->function;
  int32_t count = alone->count, outputs = op->num_outputs;
  f->device = device;
  f->num_inputs = count * num_inputs;
  f->first_node_slot = f->num_inputs;
  f->num_slots = f->num_inputs + count * outputs;
  f->num_outputs = count * outputs;
  f->num_nodes = count;
  f->slot_names = calloc((size_t)f->num_slots + 1, sizeof(char *));
  f->slot_types = calloc((size_t)f->num_slots + 1, sizeof(dlop_type));
  f->output_slots = calloc((size_t)f->num_outputs + 1, sizeof(int32_t));
  f->nodes = calloc((size_t)count + 1, sizeof(dlop__function_node));
  if (!f->slot_names || !f->slot_types || !f->output_slots || !f->nodes)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory laying out scalar bodies");
  for (int32_t k = 0; k < count; k++) {
    dlop__function_node *node = &f->nodes[k];
    node->op = op;
    node->index = -1; /* in no function: messages name the op alone, not a "node #k" */
    node->num_params = op->num_params;
    node->num_inputs = num_inputs;
    node->num_outputs = outputs;
    node->input_slots = malloc(sizeof(int32_t) * ((size_t)num_inputs + 1));
    node->output_slots = malloc(sizeof(int32_t) * ((size_t)outputs + 1));
    node->input_types = malloc(sizeof(dlop_type) * ((size_t)num_inputs + 1));
    node->output_types = malloc(sizeof(dlop_type) * ((size_t)outputs + 1));
    int status = dlop__params_pack(params, op->num_params, &node->params);
    if (status != DLOP_OK) return status;
    if (!node->input_slots || !node->output_slots || !node->input_types || !node->output_types)
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory laying out scalar bodies");
    for (int32_t i = 0; i < num_inputs; i++) {
      int32_t slot = k * num_inputs + i;
      char name[48];
      snprintf(name, sizeof name, "node%d_in%d", (int)k, (int)i);
      node->input_slots[i] = slot;
      node->input_types[i] = nodes[k].inputs[i];
      f->slot_types[slot] = nodes[k].inputs[i];
      f->slot_names[slot] = strdup(name);
      if (f->slot_names[slot] == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
    }
    for (int32_t o = 0; o < outputs; o++) {
      int32_t slot = f->first_node_slot + k * outputs + o;
      char name[48];
      snprintf(name, sizeof name, "node%d_out%d", (int)k, (int)o);
      node->output_slots[o] = slot;
      node->output_types[o] = nodes[k].outputs[o];
      f->slot_types[slot] = nodes[k].outputs[o];
      f->slot_names[slot] = strdup(name);
      f->output_slots[k * outputs + o] = slot;
      if (f->slot_names[slot] == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
    }
  }
  return DLOP_OK;
}

/* Each node's body; group_of[k] numbers the nodes that got one (0, 1, ...: their kernels'
 * names), -1 for the others. */
static int query(dlop__fusion_alone *alone, dlop__fusion_member *members, int32_t *group_of,
                 int32_t *num_groups) {
  *num_groups = 0;
  for (int32_t k = 0; k < alone->count; k++) {
    int status = dlop__fusion_query_body(&alone->function.nodes[k], &members[k]);
    alone->status[k] = status;
    group_of[k] = -1;
    if (status == DLOP_OUT_OF_MEMORY) return status;
    if (status != DLOP_OK) {
      alone->message[k] = strdup(dlop_last_error());
      dlop__clear_error();
      if (alone->message[k] == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
      continue;
    }
    group_of[k] = (*num_groups)++;
  }
  return DLOP_OK;
}

static int build(dlop__fusion_alone *alone, dlop__fusion_member *members, int32_t *group_of,
                 int32_t num_groups, char *error, size_t error_size) {
  dlop_function *f = &alone->function;
  dlop__fusion_group **list = calloc((size_t)num_groups + 1, sizeof *list);
  int status = list == NULL ? dlop__error(DLOP_OUT_OF_MEMORY, "out of memory") : DLOP_OK;
  for (int32_t k = 0; k < alone->count && status == DLOP_OK; k++) {
    if (group_of[k] < 0) continue;
    status = dlop__fusion_group_build(f, group_of, group_of[k], members, &alone->groups[k]);
    if (status != DLOP_OK) break;
    dlop__fusion_group_prepare(alone->groups[k], f->device);
    list[group_of[k]] = alone->groups[k];
  }
  char *source = NULL;
  if (status == DLOP_OK)
    status = dlop__fusion_generate(f, list, num_groups,
                                   f->device.type == DLOP_DEVICE_CUDA ? DLOP__FUSION_TARGET_CUDA
                                                                      : DLOP__FUSION_TARGET_C,
                                   &source);
  if (status == DLOP_OK) {
    error[0] = '\0';
    status = dlop__fusion_compile_module(f, list, num_groups, source, error, error_size);
  } else {
    dlop__format(error, error_size, "%s", dlop_last_error());
  }
  free(source);
  free(list);
  return status;
}

int dlop__fusion_alone_compile(const dlop_op_desc *op, const dlop_param_value *params,
                               int32_t num_inputs, int32_t count,
                               const dlop__fusion_alone_node *nodes, dlop_device device,
                               dlop__fusion_alone **result, char *error, size_t error_size) {
  *result = NULL;
  error[0] = '\0';
  if (op->scalar_body == NULL || op->view_map != NULL || count < 1 || num_inputs < 0)
    return dlop__error(DLOP_INVALID_ARGUMENT, "%s: no scalar body to compile (%d nodes)",
                       op->name, (int)count);
  dlop__fusion_alone *alone = calloc(1, sizeof *alone);
  dlop__fusion_member *members = calloc((size_t)count + 1, sizeof *members);
  int32_t *group_of = calloc((size_t)count + 1, sizeof *group_of);
  int32_t num_groups = 0;
  int status = DLOP_OK;
  if (alone != NULL) {
    alone->count = count;
    alone->groups = calloc((size_t)count + 1, sizeof *alone->groups);
    alone->status = calloc((size_t)count + 1, sizeof *alone->status);
    alone->message = calloc((size_t)count + 1, sizeof *alone->message);
  }
  if (!alone || !members || !group_of || !alone->groups || !alone->status || !alone->message)
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling scalar bodies");
  if (status == DLOP_OK) status = lay_out(alone, op, params, num_inputs, nodes, device);
  if (status == DLOP_OK) status = query(alone, members, group_of, &num_groups);
  if (status == DLOP_OK && num_groups > 0)
    status = build(alone, members, group_of, num_groups, error, error_size);
  else if (status != DLOP_OK)
    dlop__format(error, error_size, "%s", dlop_last_error());
  for (int32_t k = 0; members != NULL && k < count; k++) dlop__fusion_member_free(&members[k]);
  free(members);
  free(group_of);
  if (status != DLOP_OK) {
    if (error[0] == '\0') dlop__format(error, error_size, "%s", dlop_last_error());
    dlop__fusion_alone_free(alone);
    return status;
  }
  *result = alone;
  return DLOP_OK;
}

int dlop__fusion_alone_kernel(const dlop__fusion_alone *alone, int32_t k, dlop_thunk *thunk,
                              uint32_t *flags, const char **message) {
  *message = NULL;
  *flags = 0;
  memset(thunk, 0, sizeof *thunk);
  if (k < 0 || k >= alone->count) {
    *message = "no such node";
    return DLOP_INVALID_ARGUMENT;
  }
  if (alone->groups[k] == NULL) {
    *message = alone->message[k] ? alone->message[k] : "(no message)";
    return alone->status[k];
  }
  dlop__fusion_group_thunk(alone->groups[k], thunk);
  *flags = alone->groups[k]->members[0].body_flags;
  return DLOP_OK;
}

