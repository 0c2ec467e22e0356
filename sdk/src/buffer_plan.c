/* buffer_plan.c — which intermediates die after which node, and which outputs may take over
 * a dying input's array. Each node-output slot that is not a function output is released right
 * after its last reader (or its producer, when nothing reads it), so the pool hands its memory
 * to later nodes; an op that declares inplace_map writes over an input that dies at it, so a
 * chain of elementwise ops keeps one intermediate alive instead of two. */
#include <stdlib.h>

#include "function_internal.h"

/* The static types allow output o to reuse input i: same dtype and ndim, and no dimension known
 * on both sides with different values. *certain: every dimension known and equal. */
static int types_allow(const dlop_type *input, const dlop_type *output, char *certain) {
  int32_t d;
  *certain = 1;
  if (input->dtype != output->dtype || input->ndim != output->ndim) return 0;
  for (d = 0; d < output->ndim; d++) {
    if (input->shape[d] == DLOP_DIM_UNKNOWN || output->shape[d] == DLOP_DIM_UNKNOWN) {
      *certain = 0;
    } else if (input->shape[d] != output->shape[d]) {
      return 0;
    }
  }
  return 1;
}

/* Per output of node `index`: the input it may overwrite, or -1. Only an intermediate that
 * dies at this node (so no later node, no function output and no caller sees it), that this
 * node reads once (else another input tensor would change under the thunk) and that no other
 * output of this node has claimed. Function inputs and constants are never candidates. */
static int plan_inplace(const dlop_function *function, dlop__function_node *node, int32_t index,
                        const int32_t *last_use) {
  const int32_t *map = node->op->inplace_map;
  int32_t o, j;
  node->inplace_input = malloc(sizeof(int32_t) * (size_t)(node->num_outputs + 1));
  node->inplace_certain = calloc((size_t)node->num_outputs + 1, 1);
  if (node->inplace_input == NULL || node->inplace_certain == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory planning buffers");
  for (o = 0; o < node->num_outputs; o++) {
    int32_t input = map ? map[o] : -1, slot, reads = 0, claimed = 0;
    node->inplace_input[o] = -1;
    /* an index this node does not have (a variadic op called with fewer inputs): no reuse */
    if (input < 0 || input >= node->num_inputs) continue;
    slot = node->input_slots[input];
    if (slot < function->first_node_slot || last_use[slot] != index) continue;
    for (j = 0; j < node->num_inputs; j++) reads += node->input_slots[j] == slot;
    for (j = 0; j < o; j++) claimed += node->inplace_input[j] == input;
    if (reads != 1 || claimed) continue;
    if (!types_allow(&node->input_types[input], &node->output_types[o],
                     &node->inplace_certain[o]))
      continue;
    node->inplace_input[o] = input;
  }
  return DLOP_OK;
}

int dlop__function_plan_buffers(dlop_function *function) {
  int32_t *last_use = malloc(sizeof(int32_t) * (size_t)(function->num_slots + 1));
  int32_t *dead_count = calloc((size_t)function->num_nodes + 1, sizeof(int32_t));
  int32_t slot, i, j;
  int status = DLOP_OK;
  if (last_use == NULL || dead_count == NULL) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory planning buffers");
    goto done;
  }
  for (slot = 0; slot < function->num_slots; slot++) last_use[slot] = -1;
  for (i = 0; i < function->num_nodes; i++) {
    const dlop__function_node *node = &function->nodes[i];
    for (j = 0; j < node->num_outputs; j++) last_use[node->output_slots[j]] = i;
    for (j = 0; j < node->num_inputs; j++) last_use[node->input_slots[j]] = i;
  }
  /* outputs live until the run returns; inputs and constants are never the run's to free */
  for (i = 0; i < function->num_outputs; i++) last_use[function->output_slots[i]] = -1;
  for (slot = 0; slot < function->first_node_slot; slot++) last_use[slot] = -1;
  for (slot = function->first_node_slot; slot < function->num_slots; slot++)
    if (last_use[slot] >= 0) dead_count[last_use[slot]]++;
  for (i = 0; i < function->num_nodes; i++) {
    dlop__function_node *node = &function->nodes[i];
    node->dead_slots = malloc(sizeof(int32_t) * (size_t)(dead_count[i] + 1));
    if (node->dead_slots == NULL) {
      status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory planning buffers");
      goto done;
    }
    node->num_dead = 0;
    status = plan_inplace(function, node, i, last_use);
    if (status != DLOP_OK) goto done;
  }
  for (slot = function->first_node_slot; slot < function->num_slots; slot++) {
    if (last_use[slot] < 0) continue;
    dlop__function_node *node = &function->nodes[last_use[slot]];
    node->dead_slots[node->num_dead++] = slot;
  }
done:
  free(last_use);
  free(dead_count);
  return status;
}
