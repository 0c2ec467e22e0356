/* buffer_plan.c — which intermediates die after which node. Each node-output slot that is not
 * a function output is released right after its last reader (or its producer, when nothing
 * reads it), so the pool hands its memory to later nodes: a chain of N ops keeps about two
 * intermediates alive instead of N. */
#include <stdlib.h>

#include "function_internal.h"

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
