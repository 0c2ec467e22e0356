/* fusion_plan.c — which nodes of a compiled function's schedule become one fused kernel. In
 * schedule order, each fusable node starts a group and absorbs the groups of the nodes that
 * produce its inputs (chains, and trees where branches meet), one at a time, while the union
 * stays convex — no path from a member through a node outside the group back into it, which
 * would make the group wait for itself — and within the operand and member limits. Groups of
 * one node are left alone: their op's own kernel is as good. Only decides; function_fuse.c
 * changes the schedule. */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

typedef struct plan_state {
  const dlop_function *function;
  int32_t num_nodes;
  int32_t *producer;     /* per slot: the node writing it, or -1 */
  int32_t *edge_start;   /* per node: its successors are edges[edge_start[n] .. edge_start[n+1]) */
  int32_t *edges;
  char *read_outside;    /* per slot: a function output (read after the run) */
  int32_t *group;        /* per node: tentative group id, or -1 */
  char *in_merge;        /* per node: in the union being tried */
  char *reached;         /* per node: reached from the union through nodes outside it */
  int32_t *queue;
} plan_state;

/* A constant of one element: the group writes it into the kernel's code, so it costs no operand. */
int dlop__fusion_is_literal_slot(const dlop_function *function, int32_t slot) {
  if (slot < function->num_inputs || slot >= function->first_node_slot) return 0;
  const dlop_type *type = &function->slot_types[slot];
  for (int32_t d = 0; d < type->ndim; d++)
    if (type->shape[d] != 1) return 0;
  return 1;
}

/* Successor lists (node -> the nodes reading one of its outputs), from the slots' producers. */
static int build_edges(plan_state *state) {
  const dlop_function *function = state->function;
  int32_t n, j, total = 0;
  for (n = 0; n < state->num_nodes; n++) total += function->nodes[n].num_inputs;
  state->edges = malloc(sizeof(int32_t) * ((size_t)total + 1));
  if (state->edges == NULL) return DLOP_OUT_OF_MEMORY;
  for (n = 0; n <= state->num_nodes; n++) state->edge_start[n] = 0;
  for (n = 0; n < state->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    for (j = 0; j < node->num_inputs; j++) {
      int32_t p = state->producer[node->input_slots[j]];
      if (p >= 0) state->edge_start[p + 1]++;
    }
  }
  for (n = 0; n < state->num_nodes; n++) state->edge_start[n + 1] += state->edge_start[n];
  int32_t *fill = state->queue; /* scratch: next free edge per node */
  for (n = 0; n < state->num_nodes; n++) fill[n] = state->edge_start[n];
  for (n = 0; n < state->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    for (j = 0; j < node->num_inputs; j++) {
      int32_t p = state->producer[node->input_slots[j]];
      if (p >= 0) state->edges[fill[p]++] = n;
    }
  }
  return DLOP_OK;
}

/* Operands the union would take: the distinct slots its members read from outside (one-element
 * constants excepted) and the member outputs read outside it (by other nodes or after the run).
 * An upper bound: a reader that joins later makes its operand internal. */
static int32_t count_operands(const plan_state *state, int32_t last) {
  const dlop_function *function = state->function;
  int32_t count = 0, n, j, k, e;
  for (n = 0; n <= last; n++) {
    if (!state->in_merge[n]) continue;
    const dlop__function_node *node = &function->nodes[n];
    for (j = 0; j < node->num_inputs; j++) {
      int32_t slot = node->input_slots[j], p = state->producer[slot], seen = 0;
      if ((p >= 0 && state->in_merge[p]) || dlop__fusion_is_literal_slot(function, slot)) continue;
      /* once per slot: was it read by an earlier input or member? */
      for (int32_t m = 0; m <= n && !seen; m++) {
        if (!state->in_merge[m]) continue;
        const dlop__function_node *other = &function->nodes[m];
        int32_t limit = m == n ? j : other->num_inputs;
        for (k = 0; k < limit && !seen; k++) seen = other->input_slots[k] == slot;
      }
      count += !seen;
    }
    for (j = 0; j < node->num_outputs; j++) {
      int32_t slot = node->output_slots[j], outside = state->read_outside[slot];
      for (e = state->edge_start[n]; e < state->edge_start[n + 1] && !outside; e++) {
        const dlop__function_node *reader = &function->nodes[state->edges[e]];
        if (state->in_merge[state->edges[e]]) continue;
        for (k = 0; k < reader->num_inputs && !outside; k++)
          outside = reader->input_slots[k] == slot;
      }
      count += outside;
    }
  }
  return count;
}

/* Whether the union (in_merge, newest member `last`) is convex: no node outside it that is
 * reached from a member feeds a member. Only nodes before `last` can lie on such a path. */
static int is_convex(plan_state *state, int32_t last) {
  const dlop_function *function = state->function;
  int32_t head = 0, tail = 0, n, e, j, convex = 1;
  memset(state->reached, 0, (size_t)state->num_nodes);
  for (n = 0; n <= last; n++)
    if (state->in_merge[n]) state->queue[tail++] = n;
  while (head < tail) {
    int32_t from = state->queue[head++];
    for (e = state->edge_start[from]; e < state->edge_start[from + 1]; e++) {
      int32_t to = state->edges[e];
      if (to >= last || state->in_merge[to] || state->reached[to]) continue;
      state->reached[to] = 1;
      state->queue[tail++] = to;
    }
  }
  for (n = 0; n <= last && convex; n++) {
    if (!state->in_merge[n]) continue;
    const dlop__function_node *node = &function->nodes[n];
    for (j = 0; j < node->num_inputs && convex; j++) {
      int32_t p = state->producer[node->input_slots[j]];
      if (p >= 0 && state->reached[p]) convex = 0;
    }
  }
  return convex;
}

/* Try to put group `older` into group `newer` (whose newest member is `last`). */
static int try_merge(plan_state *state, int32_t newer, int32_t older, int32_t last) {
  int32_t n, members = 0;
  for (n = 0; n <= last; n++) {
    state->in_merge[n] = state->group[n] == newer || state->group[n] == older;
    members += state->in_merge[n];
  }
  if (members > DLOP__FUSION_MAX_MEMBERS || count_operands(state, last) > DLOP__FUSION_MAX_OPERANDS ||
      !is_convex(state, last))
    return 0;
  for (n = 0; n <= last; n++)
    if (state->group[n] == older) state->group[n] = newer;
  return 1;
}

int dlop__fusion_plan(const dlop_function *function, const char *fusable, int32_t *group_of,
                      int32_t *num_groups) {
  plan_state state;
  int32_t n, j, count = 0, status = DLOP_OK;
  size_t nodes = (size_t)function->num_nodes + 1;
  memset(&state, 0, sizeof state);
  state.function = function;
  state.num_nodes = function->num_nodes;
  state.producer = malloc(sizeof(int32_t) * ((size_t)function->num_slots + 1));
  state.read_outside = calloc((size_t)function->num_slots + 1, 1);
  state.edge_start = malloc(sizeof(int32_t) * (nodes + 1));
  state.group = malloc(sizeof(int32_t) * nodes);
  state.in_merge = calloc(nodes, 1);
  state.reached = calloc(nodes, 1);
  state.queue = malloc(sizeof(int32_t) * nodes);
  *num_groups = 0;
  if (!state.producer || !state.read_outside || !state.edge_start || !state.group ||
      !state.in_merge || !state.reached || !state.queue) {
    status = DLOP_OUT_OF_MEMORY;
    goto done;
  }
  for (j = 0; j < function->num_slots; j++) state.producer[j] = -1;
  for (n = 0; n < function->num_nodes; n++)
    for (j = 0; j < function->nodes[n].num_outputs; j++)
      state.producer[function->nodes[n].output_slots[j]] = n;
  for (j = 0; j < function->num_outputs; j++) state.read_outside[function->output_slots[j]] = 1;
  status = build_edges(&state);
  if (status != DLOP_OK) goto done;

  for (n = 0; n < function->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    state.group[n] = -1;
    if (!fusable[n]) continue;
    state.group[n] = n; /* a group is named after its newest member while planning */
    for (j = 0; j < node->num_inputs; j++) {
      int32_t p = state.producer[node->input_slots[j]];
      if (p < 0 || state.group[p] < 0 || state.group[p] == n) continue;
      try_merge(&state, n, state.group[p], n);
    }
  }
  /* number the groups of two or more members by their first member */
  for (n = 0; n < function->num_nodes; n++) group_of[n] = -1;
  for (n = 0; n < function->num_nodes; n++) {
    int32_t id = state.group[n], size = 0;
    if (id < 0 || group_of[n] >= 0) continue;
    for (j = n; j < function->num_nodes; j++) size += state.group[j] == id;
    if (size < 2) continue;
    for (j = n; j < function->num_nodes; j++)
      if (state.group[j] == id) group_of[j] = count;
    count++;
  }
  *num_groups = count;
done:
  free(state.producer);
  free(state.read_outside);
  free(state.edge_start);
  free(state.edges);
  free(state.group);
  free(state.in_merge);
  free(state.reached);
  free(state.queue);
  return status == DLOP_OK ? DLOP_OK
                           : dlop__error(DLOP_OUT_OF_MEMORY, "out of memory planning fusion");
}
