/* function_fuse_reduce.c — the first step of the fusion pass: row groups first (fusion_row.c:
 * reductions over the last axis and the elementwise nodes reading their results, one fused
 * node for all of them, their nodes leaving the schedule); then every other reduction node whose
 * op declares a reduction body and whose input fusable nodes compute takes those nodes as its
 * kernel's input stage (fusion_reduce.c): the node is replaced by a fused node that reads what
 * the stage reads, and the stage's nodes nobody else reads any more leave the schedule. The
 * rest of the pass (function_fuse.c) then groups the elementwise nodes that remain, which no
 * longer feed those reductions. Until the module compiles, the old schedule is kept, so that
 * the function can run unfused after all. */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

static void set_note(dlop__function_node *node, const char *why) {
  char line[1280];
  dlop__format(line, sizeof line, "not fused: %s", why);
  free(node->fusion_note);
  node->fusion_note = strdup(line); /* a note lost to a failed strdup is only a note */
}

/* The reduction body of every node whose op declares one, for its types (reducible[n]); a body
 * the op does not give for these types is worth a note where a group computes the input. */
static int query_reductions(dlop_function *function, const char *fusable,
                            dlop__fusion_reduction *bodies, char *reducible, int32_t *declared) {
  *declared = 0;
  for (int32_t n = 0; n < function->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    if (node->op->reduce_body == NULL || node->op->view_map != NULL || node->num_inputs != 1 ||
        node->num_outputs != 1)
      continue;
    (*declared)++;
    int status = dlop__fusion_query_reduction(node, &bodies[n]);
    if (status == DLOP_UNSUPPORTED) {
      if (dlop__fusion_input_is_fusable(function, fusable, n))
        set_note(&function->nodes[n], dlop_last_error());
      dlop__clear_error();
      continue;
    }
    if (status != DLOP_OK) return status;
    reducible[n] = 1;
  }
  return DLOP_OK;
}

/* The nodes nothing reads once the reductions read their stages' inputs instead of their own:
 * readers counted per slot (function outputs count), then fusable nodes whose every output is
 * unread dropped, latest first, so that a chain drops whole. */
static int mark_dropped(const dlop_function *function, const char *fusable,
                        dlop__fusion_group *const *group_of_node,
                        dlop__fusion_group *const *row_at, char *dropped) {
  int32_t *reads = calloc((size_t)function->num_slots + 1, sizeof(int32_t));
  if (reads == NULL) return DLOP_OUT_OF_MEMORY;
  for (int32_t o = 0; o < function->num_outputs; o++) reads[function->output_slots[o]]++;
  for (int32_t n = 0; n < function->num_nodes; n++) {
    const dlop__fusion_group *group = group_of_node[n];
    if (row_at[n] != NULL) /* a row group's node, in the place of its first member */
      for (int32_t k = 0; k < row_at[n]->num_inputs; k++) reads[row_at[n]->input_slots[k]]++;
    if (dropped[n]) continue; /* a row group's member: the group reads what it read */
    if (group != NULL) {
      for (int32_t k = 0; k < group->num_inputs; k++) reads[group->input_slots[k]]++;
    } else {
      for (int32_t j = 0; j < function->nodes[n].num_inputs; j++)
        reads[function->nodes[n].input_slots[j]]++;
    }
  }
  for (int32_t n = function->num_nodes - 1; n >= 0; n--) {
    const dlop__function_node *node = &function->nodes[n];
    int32_t read = 0;
    if (!fusable[n]) continue;
    for (int32_t j = 0; j < node->num_outputs; j++) read += reads[node->output_slots[j]];
    if (read > 0) continue;
    dropped[n] = 1;
    for (int32_t j = 0; j < node->num_inputs; j++) reads[node->input_slots[j]]--;
  }
  free(reads);
  return DLOP_OK;
}

static void free_node_arrays(dlop__function_node *node) {
  free(node->params);
  free(node->input_slots);
  free(node->output_slots);
  free(node->input_types);
  free(node->output_types);
  free(node->fusion_note);
}

/* A group built but not in any schedule: its reduction's node still belongs to the old one (a
 * row group's nodes are copies: all its own). */
static void drop_group(dlop__fusion_group *group) {
  if (group == NULL) return;
  if (group->reduction != NULL) memset(&group->reduction->node, 0, sizeof group->reduction->node);
  dlop__fusion_group_free(group);
}

/* The schedule put back in a topological order once row groups took their first member's
 * place (a member's reader outside may come before it): Kahn's algorithm, the earliest ready
 * first, fusable and members moved alongside. */
static int reorder(dlop_function *function, char *fusable, dlop__fusion_member *members) {
  int32_t count = function->num_nodes, n, j, i;
  int32_t *producer = malloc(sizeof(int32_t) * ((size_t)function->num_slots + 1));
  int32_t *waiting = calloc((size_t)count + 1, sizeof(int32_t));
  char *placed = calloc((size_t)count + 1, 1), *flags = malloc((size_t)count + 1);
  dlop__function_node *nodes = calloc((size_t)count + 1, sizeof *nodes);
  dlop__fusion_member *bodies = calloc((size_t)count + 1, sizeof *bodies);
  int status = DLOP_OK;
  if (!producer || !waiting || !placed || !flags || !nodes || !bodies) {
    status = DLOP_OUT_OF_MEMORY;
    goto done;
  }
  for (i = 0; i < function->num_slots; i++) producer[i] = -1;
  for (n = 0; n < count; n++)
    for (j = 0; j < function->nodes[n].num_outputs; j++)
      producer[function->nodes[n].output_slots[j]] = n;
  for (n = 0; n < count; n++)
    for (j = 0; j < function->nodes[n].num_inputs; j++)
      waiting[n] += producer[function->nodes[n].input_slots[j]] >= 0;
  for (i = 0; i < count; i++) {
    for (n = 0; n < count && (placed[n] || waiting[n] > 0); n++) {
    }
    if (n == count) { /* convex groups leave no cycle: this is a bug */
      status = dlop__error(DLOP_INTERNAL, "fusion: the schedule with row groups has a cycle");
      goto done;
    }
    placed[n] = 1;
    nodes[i] = function->nodes[n];
    nodes[i].index = i;
    flags[i] = fusable[n];
    bodies[i] = members[n];
    for (int32_t m = 0; m < count; m++)
      for (j = 0; j < function->nodes[m].num_inputs; j++)
        if (producer[function->nodes[m].input_slots[j]] == n) waiting[m]--;
  }
  memcpy(function->nodes, nodes, sizeof *nodes * (size_t)count);
  memcpy(fusable, flags, (size_t)count);
  memcpy(members, bodies, sizeof *bodies * (size_t)count);
done:
  free(producer);
  free(waiting);
  free(placed);
  free(flags);
  free(nodes);
  free(bodies);
  return status;
}

/* The new schedule: the old one's nodes in order, each reduction with a stage as its fused
 * node, the dropped ones left out; fusable and members compacted alongside (i <= n always). */
static int rebuild(dlop_function *function, char *fusable, dlop__fusion_member *members,
                   dlop__fusion_group *const *group_of_node, dlop__fusion_group *const *row_at,
                   dlop__reduction_pass *pass) {
  int32_t count = function->num_nodes, i = 0;
  dlop__function_node *nodes = calloc((size_t)count + 1, sizeof(dlop__function_node));
  if (nodes == NULL) return DLOP_OUT_OF_MEMORY;
  for (int32_t n = 0; n < count; n++) {
    /* a row group's node takes its first member's place (that member is dropped: i <= n) */
    dlop__fusion_group *group = row_at[n] != NULL ? row_at[n] : group_of_node[n];
    if (row_at[n] != NULL || (!pass->dropped[n] && group != NULL)) {
      if (dlop__function_fused_node(group, &nodes[i]) != DLOP_OK) {
        for (int32_t j = 0; j < i; j++)
          if (nodes[j].fused) {
            free(nodes[j].input_slots);
            free(nodes[j].input_types);
            free(nodes[j].output_slots);
            free(nodes[j].output_types);
          }
        free(nodes);
        return DLOP_OUT_OF_MEMORY;
      }
      nodes[i].index = i;
      fusable[i] = 0;
      if (row_at[n] != NULL) { /* members[i] is empty already: its node was placed or freed */
        dlop__fusion_member_free(&members[n]);
        i++;
        continue;
      }
    } else if (pass->dropped[n]) {
      dlop__fusion_member_free(&members[n]);
      continue;
    } else {
      nodes[i] = function->nodes[n];
    }
    nodes[i].index = i;
    fusable[i] = group_of_node[n] == NULL && fusable[n];
    if (i != n) {
      members[i] = members[n];
      memset(&members[n], 0, sizeof members[n]);
    }
    i++;
  }
  pass->old_nodes = function->nodes;
  pass->old_count = count;
  function->nodes = nodes;
  function->num_nodes = i;
  function->max_node_inputs = function->max_node_outputs = 0;
  for (int32_t n = 0; n < i; n++) {
    if (nodes[n].num_inputs > function->max_node_inputs)
      function->max_node_inputs = nodes[n].num_inputs;
    if (nodes[n].num_outputs > function->max_node_outputs)
      function->max_node_outputs = nodes[n].num_outputs;
  }
  return DLOP_OK;
}

/* The row groups (fusion_row.c), prepared and numbered first: each one's node takes its first
 * member's place (row_at), its members are dropped and neither fuse nor reduce again. */
static int add_row_groups(dlop_function *function, char *fusable, dlop__fusion_member *members,
                          const dlop__fusion_reduction *bodies, char *reducible,
                          dlop__fusion_group **row_at, dlop__reduction_pass *pass) {
  int32_t count = function->num_nodes, num_groups = 0;
  int32_t *row_of = malloc(sizeof(int32_t) * ((size_t)count + 1));
  dlop__fusion_group **groups = NULL;
  if (row_of == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing rows");
  int status = dlop__fusion_row_groups(function, fusable, members, reducible, bodies, row_of,
                                       &groups, &num_groups);
  for (int32_t g = 0; g < num_groups && status == DLOP_OK; g++) {
    dlop__fusion_group_prepare(groups[g], function->device);
    pass->groups[pass->num_groups++] = groups[g];
  }
  for (int32_t n = 0; n < count && status == DLOP_OK; n++) {
    if (row_of[n] < 0) continue;
    if (row_at[n] == NULL && !pass->dropped[n]) {
      int first = 1;
      for (int32_t m = 0; m < n && first; m++) first = row_of[m] != row_of[n];
      if (first) row_at[n] = groups[row_of[n]];
    }
    pass->dropped[n] = 1;
    fusable[n] = 0;
    reducible[n] = 0;
  }
  free(groups);
  free(row_of);
  return status;
}

int dlop__function_fuse_reductions(dlop_function *function, char *fusable,
                                   dlop__fusion_member *members, dlop__reduction_pass *pass) {
  int32_t count = function->num_nodes, n;
  char why[1024];
  memset(pass, 0, sizeof *pass);
  dlop__fusion_reduction *bodies = calloc((size_t)count + 1, sizeof(dlop__fusion_reduction));
  dlop__fusion_group **group_of_node = calloc((size_t)count + 1, sizeof(dlop__fusion_group *));
  dlop__fusion_group **row_at = calloc((size_t)count + 1, sizeof(dlop__fusion_group *));
  char *reducible = calloc((size_t)count + 1, 1), *in_stage = calloc((size_t)count + 1, 1);
  pass->groups = calloc((size_t)count + 1, sizeof(dlop__fusion_group *));
  pass->dropped = calloc((size_t)count + 1, 1);
  int status = DLOP_OK;
  if (!bodies || !group_of_node || !row_at || !reducible || !in_stage || !pass->groups ||
      !pass->dropped) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing reductions");
    goto done;
  }
  status = query_reductions(function, fusable, bodies, reducible, &pass->declared);
  if (status == DLOP_OK) status = add_row_groups(function, fusable, members, bodies, reducible,
                                                 row_at, pass);
  for (n = 0; n < count && status == DLOP_OK; n++) {
    if (!reducible[n]) continue;
    status = dlop__fusion_reduction_stage(function, fusable, members, n, &bodies[n], in_stage, why,
                                          sizeof why);
    if (status != DLOP_OK) break;
    if (why[0] != '\0') set_note(&function->nodes[n], why);
    if (memchr(in_stage, 1, (size_t)count) == NULL) continue;
    status = dlop__fusion_reduction_group_build(function, in_stage, members, n, &bodies[n],
                                                pass->num_groups, &group_of_node[n]);
    if (status != DLOP_OK) break;
    /* prepared now: its fused node (rebuild below) takes its thunk, and a CUDA reduction's
     * workspace for partials, from the group's target */
    dlop__fusion_group_prepare(group_of_node[n], function->device);
    pass->groups[pass->num_groups++] = group_of_node[n];
  }
  if (status == DLOP_OK && pass->num_groups > 0) {
    int rows = 0;
    for (n = 0; n < count; n++) rows |= row_at[n] != NULL;
    status = mark_dropped(function, fusable, group_of_node, row_at, pass->dropped);
    if (status == DLOP_OK)
      status = rebuild(function, fusable, members, group_of_node, row_at, pass);
    if (status == DLOP_OK && rows) status = reorder(function, fusable, members);
    if (status != DLOP_OK)
      status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing reductions");
  }
  if (status != DLOP_OK) {
    for (int32_t g = 0; g < pass->num_groups; g++) drop_group(pass->groups[g]);
    pass->num_groups = 0;
  }
done:
  for (n = 0; bodies != NULL && n < count; n++) {
    free(bodies[n].combine);
    free(bodies[n].finalize);
  }
  free(bodies);
  free(group_of_node);
  free(row_at);
  free(reducible);
  free(in_stage);
  return status;
}

void dlop__reduction_pass_undo(dlop_function *function, dlop__reduction_pass *pass) {
  if (pass->old_nodes != NULL) {
    for (int32_t n = 0; n < function->num_nodes; n++) {
      dlop__function_node *node = &function->nodes[n];
      if (node->fused == NULL) continue;
      free(node->input_slots);
      free(node->input_types);
      free(node->output_slots);
      free(node->output_types);
    }
    free(function->nodes);
    function->nodes = pass->old_nodes;
    function->num_nodes = pass->old_count;
    function->max_node_inputs = function->max_node_outputs = 0;
    for (int32_t n = 0; n < pass->old_count; n++) {
      function->nodes[n].index = n;
      if (function->nodes[n].num_inputs > function->max_node_inputs)
        function->max_node_inputs = function->nodes[n].num_inputs;
      if (function->nodes[n].num_outputs > function->max_node_outputs)
        function->max_node_outputs = function->nodes[n].num_outputs;
    }
  }
  for (int32_t g = 0; g < pass->num_groups; g++) drop_group(pass->groups[g]);
  free(pass->groups);
  free(pass->dropped);
  memset(pass, 0, sizeof *pass);
}

void dlop__reduction_pass_keep(dlop__reduction_pass *pass) {
  for (int32_t n = 0; pass->old_nodes != NULL && n < pass->old_count; n++)
    if (pass->dropped[n]) free_node_arrays(&pass->old_nodes[n]);
  free(pass->old_nodes);
  free(pass->groups);
  free(pass->dropped);
  memset(pass, 0, sizeof *pass);
}
