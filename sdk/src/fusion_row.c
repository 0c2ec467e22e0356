/* fusion_row.c — row groups: a reduction over the last axis with keepdims, whose result the
 * elementwise nodes over the same rows read broadcast back along that axis (a softmax's max and
 * sum, a layer norm's mean and variance), becomes one kernel with those nodes and every other
 * such reduction they connect to. The kernel reads each row of its inputs once and runs the
 * reductions one after another over it (fusion_row_source.c). Chosen from declarations only:
 * scalar bodies, reduction bodies, static types. The group holds copies of its nodes; the
 * schedule's nodes are dropped by the reduction pass (function_fuse_reduce.c), which puts the
 * row group's fused node in their place. */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

void dlop__fusion_row_free(dlop__fusion_row *row) {
  if (row == NULL) return;
  for (int32_t r = 0; r < row->num_reductions; r++) {
    dlop__fusion_reduction *body = &row->reductions[r].body;
    free(body->combine);
    free(body->finalize);
    free(body->node.params);
    free(body->node.input_slots);
    free(body->node.output_slots);
    free(body->node.input_types);
    free(body->node.output_types);
  }
  free(row->reductions);
  free(row->steps);
  free(row->value_per_row);
  free(row->input_per_row);
  free(row->cached);
  free(row);
}

/* ---- choosing the groups -------------------------------------------------------------------- */

/* A reduction of the last axis only, keeping it. */
static int is_row_reduction(const dlop__function_node *node, const dlop__fusion_reduction *body) {
  int32_t ndim = node->input_types[0].ndim;
  return ndim >= 1 && ndim <= 32 && body->axes == (1u << (ndim - 1)) && body->keepdims == 1;
}

/* A type over the rows of `rows`: the same rank and leading dims, the row's length or 1 last
 * (dims equal as static dims: unknown only where the rows' is unknown; the run checks the rest,
 * dlop__fusion_row_infer_shape and fusion_row_thunk.c). */
static int over_rows(const dlop_type *type, const dlop_type *rows, int full_only) {
  int32_t d = rows->ndim;
  if (type->ndim != d) return 0;
  for (int32_t k = 0; k + 1 < d; k++)
    if (type->shape[k] != rows->shape[k]) return 0;
  if (type->shape[d - 1] == rows->shape[d - 1]) return 1;
  return !full_only && type->shape[d - 1] == 1;
}

typedef struct plan_state {
  const dlop_function *function;
  const char *fusable, *reducible;
  const dlop__fusion_reduction *reductions;
  const int32_t *row_of;
  int32_t *producer; /* per slot */
  char *in;          /* per node: in the group being grown */
  char *after;       /* per node: scratch of convex() */
  const dlop_type *rows;
} plan_state;

static int candidate(const plan_state *s, int32_t n) {
  const dlop__function_node *node = &s->function->nodes[n];
  if (s->row_of[n] >= 0) return 0;
  if (s->reducible[n])
    return is_row_reduction(node, &s->reductions[n]) &&
           over_rows(&node->input_types[0], s->rows, 1);
  if (!s->fusable[n]) return 0;
  for (int32_t j = 0; j < node->num_outputs; j++)
    if (!over_rows(&node->output_types[j], s->rows, 0)) return 0;
  for (int32_t j = 0; j < node->num_inputs; j++)
    if (node->input_types[j].ndim > s->rows->ndim) return 0;
  return 1;
}

/* Whether node n reads a member's output or writes a slot a member reads. */
static int adjacent(const plan_state *s, int32_t n) {
  const dlop_function *f = s->function;
  for (int32_t j = 0; j < f->nodes[n].num_inputs; j++) {
    int32_t p = s->producer[f->nodes[n].input_slots[j]];
    if (p >= 0 && s->in[p]) return 1;
  }
  for (int32_t m = 0; m < f->num_nodes; m++) {
    if (!s->in[m]) continue;
    for (int32_t j = 0; j < f->nodes[m].num_inputs; j++)
      if (s->producer[f->nodes[m].input_slots[j]] == n) return 1;
  }
  return 0;
}

/* No path leaves the group and comes back: no member reads a node outside that depends on a
 * member (the schedule is topological, so one forward scan finds them). */
static int convex(plan_state *s) {
  const dlop_function *f = s->function;
  for (int32_t n = 0; n < f->num_nodes; n++) {
    s->after[n] = 0;
    for (int32_t j = 0; j < f->nodes[n].num_inputs; j++) {
      int32_t p = s->producer[f->nodes[n].input_slots[j]];
      if (p < 0) continue;
      if (s->in[n] && !s->in[p] && s->after[p]) return 0;
      if (!s->in[n] && (s->in[p] || s->after[p])) s->after[n] = 1;
    }
  }
  return 1;
}

/* The tensors the group would read and write, and its nodes. */
static void count_operands(const plan_state *s, int32_t *operands, int32_t *nodes) {
  const dlop_function *f = s->function;
  int32_t reads = 0, writes = 0, count = 0;
  for (int32_t n = 0; n < f->num_nodes; n++) {
    if (!s->in[n]) continue;
    count++;
    const dlop__function_node *node = &f->nodes[n];
    for (int32_t j = 0; j < node->num_inputs; j++) {
      int32_t slot = node->input_slots[j], p = s->producer[slot], seen = 0;
      if ((p >= 0 && s->in[p]) || dlop__fusion_is_literal_slot(f, slot)) continue;
      for (int32_t m = 0; m < n && !seen; m++) /* an earlier member reads it too */
        for (int32_t k = 0; s->in[m] && k < f->nodes[m].num_inputs && !seen; k++)
          seen = f->nodes[m].input_slots[k] == slot;
      for (int32_t k = 0; k < j && !seen; k++) seen = node->input_slots[k] == slot;
      reads += !seen;
    }
    for (int32_t j = 0; j < node->num_outputs; j++) {
      int32_t slot = node->output_slots[j], outside = 0, inside = 0;
      for (int32_t o = 0; o < f->num_outputs; o++) outside |= f->output_slots[o] == slot;
      for (int32_t m = 0; m < f->num_nodes && !outside; m++)
        for (int32_t k = 0; k < f->nodes[m].num_inputs; k++)
          if (f->nodes[m].input_slots[k] == slot) {
            if (s->in[m]) inside = 1;
            else outside = 1;
          }
      writes += outside || !inside;
    }
  }
  *operands = reads + writes;
  *nodes = count;
}

static int fits(plan_state *s) {
  int32_t operands, nodes;
  if (!convex(s)) return 0;
  count_operands(s, &operands, &nodes);
  return operands <= DLOP__FUSION_MAX_OPERANDS && nodes <= DLOP__FUSION_MAX_MEMBERS;
}

/* Whether a member over the whole rows reads a per-row value of the group (a reduction's
 * result, or what members compute from such results): a result broadcast back along the row,
 * which is what makes a row group worth its kernel. */
static int reads_a_result(const plan_state *s) {
  const dlop_function *f = s->function;
  for (int32_t n = 0; n < f->num_nodes; n++) {
    const dlop__function_node *node = &f->nodes[n];
    if (!s->in[n] || s->reducible[n] || !over_rows(&node->output_types[0], s->rows, 1)) continue;
    for (int32_t j = 0; j < node->num_inputs; j++) {
      int32_t slot = node->input_slots[j], p = s->producer[slot];
      const dlop_type *type = &f->slot_types[slot];
      if (p >= 0 && s->in[p] && type->ndim == s->rows->ndim && type->shape[type->ndim - 1] == 1)
        return 1;
    }
  }
  return 0;
}

static void set_note(dlop__function_node *node, const char *line) {
  free(node->fusion_note);
  node->fusion_note = strdup(line); /* a note lost to a failed strdup is only a note */
}

/* Grows the group of seed r: every candidate next to it joins while the group stays convex
 * and within the limits, until none does. */
static void grow(plan_state *s, int32_t r) {
  const dlop_function *f = s->function;
  int changed = 1;
  memset(s->in, 0, (size_t)f->num_nodes);
  s->in[r] = 1;
  while (changed) {
    changed = 0;
    for (int32_t n = 0; n < f->num_nodes; n++) {
      if (s->in[n] || !candidate(s, n) || !adjacent(s, n)) continue;
      s->in[n] = 1;
      if (fits(s))
        changed = 1;
      else
        s->in[n] = 0;
    }
  }
}

/* ---- building one ---------------------------------------------------------------------------- */

static int read_outside(const dlop_function *f, const int32_t *row_of, int32_t number,
                        int32_t slot, int *inside) {
  int outside = 0;
  *inside = 0;
  for (int32_t o = 0; o < f->num_outputs; o++) outside |= f->output_slots[o] == slot;
  for (int32_t n = 0; n < f->num_nodes; n++)
    for (int32_t j = 0; j < f->nodes[n].num_inputs; j++)
      if (f->nodes[n].input_slots[j] == slot) {
        if (row_of[n] == number) *inside = 1;
        else outside = 1;
      }
  return outside;
}

static void add_output(const dlop_function *f, dlop__fusion_group *group, int32_t value) {
  int32_t o = group->num_outputs++;
  group->output_slots[o] = group->value_slots[value];
  group->output_types[o] = f->slot_types[group->value_slots[value]];
  group->output_values[o] = value;
}

static int build(const dlop_function *f, const int32_t *row_of, int32_t number,
                 const dlop__fusion_member *bodies, const char *reducible,
                 const dlop__fusion_reduction *reductions, dlop__fusion_group **result) {
  int32_t n, members = 0, count = 0, reads = 0, writes = 0, r = 0, m = 0, j;
  int status = DLOP_OK;
  for (n = 0; n < f->num_nodes; n++) {
    if (row_of[n] != number) continue;
    count++;
    members += !reducible[n];
    reads += f->nodes[n].num_inputs;
    writes += f->nodes[n].num_outputs;
  }
  dlop__fusion_group *group = dlop__fusion_group_alloc(members, reads, writes);
  int32_t *value_of_slot = malloc(sizeof(int32_t) * ((size_t)f->num_slots + 1));
  dlop__fusion_row *row = calloc(1, sizeof *row);
  if (group != NULL) group->row = row;
  if (row != NULL) {
    row->reductions = calloc((size_t)(count - members) + 1, sizeof *row->reductions);
    row->steps = malloc(sizeof(int32_t) * ((size_t)count + 1));
    row->value_per_row = calloc((size_t)writes + 1, 1);
    row->input_per_row = calloc((size_t)reads + 1, 1);
    row->cached = calloc((size_t)writes + 1, 1);
  }
  if (!group || !value_of_slot || !row || !row->reductions || !row->steps || !row->value_per_row ||
      !row->input_per_row || !row->cached) {
    if (group == NULL) dlop__fusion_row_free(row);
    dlop__fusion_group_free(group);
    free(value_of_slot);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory building a row group");
  }
  group->number = number;
  for (n = 0; n < f->num_slots; n++) value_of_slot[n] = -1;
  /* the copies, in schedule order; the reductions' results are values first, so that the
   * members reading them find them (the kernel computes them before those members run) */
  for (n = 0; n < f->num_nodes && status == DLOP_OK; n++) {
    if (row_of[n] != number) continue;
    if (reducible[n]) {
      dlop__fusion_row_reduction *reduction = &row->reductions[r];
      if (row->num_reductions == 0) {
        row->ndim = f->nodes[n].input_types[0].ndim;
        row->length = f->nodes[n].input_types[0].shape[row->ndim - 1];
      }
      reduction->body = reductions[n];
      reduction->body.combine = strdup(reductions[n].combine);
      reduction->body.finalize = strdup(reductions[n].finalize);
      memset(&reduction->body.node, 0, sizeof reduction->body.node);
      row->num_reductions++;
      status = dlop__fusion_copy_node(&f->nodes[n], &reduction->body.node);
      if (!reduction->body.combine || !reduction->body.finalize) status = DLOP_OUT_OF_MEMORY;
      reduction->value = group->num_values++;
      group->value_slots[reduction->value] = f->nodes[n].output_slots[0];
      value_of_slot[f->nodes[n].output_slots[0]] = reduction->value;
      row->value_per_row[reduction->value] = 1;
      row->steps[row->num_steps++] = -1 - r++;
    } else {
      dlop__fusion_member *member = &group->members[m];
      group->num_members++;
      status = dlop__fusion_copy_node(&f->nodes[n], &member->node);
      if (status == DLOP_OK) status = dlop__fusion_copy_body(&bodies[n], &f->nodes[n], member);
      row->steps[row->num_steps++] = m++;
    }
  }
  if (status == DLOP_OK) status = dlop__fusion_connect_sources(f, group, value_of_slot);
  for (r = 0; r < row->num_reductions && status == DLOP_OK; r++) {
    dlop__fusion_row_reduction *reduction = &row->reductions[r];
    int32_t slot = reduction->body.node.input_slots[0];
    if (value_of_slot[slot] >= 0) {
      reduction->input.kind = DLOP__FUSION_FROM_VALUE;
      reduction->input.index = value_of_slot[slot];
    } else if (dlop__fusion_is_literal_slot(f, slot)) {
      reduction->input.kind = DLOP__FUSION_FROM_LITERAL;
      status = dlop__fusion_group_add_literal(f, group, slot, &reduction->input.index);
    } else {
      reduction->input.kind = DLOP__FUSION_FROM_INPUT;
      reduction->input.index = dlop__fusion_group_add_input(f, group, slot);
    }
  }
  free(value_of_slot);
  if (status != DLOP_OK) {
    dlop__fusion_group_free(group);
    return status == DLOP_OUT_OF_MEMORY
               ? dlop__error(DLOP_OUT_OF_MEMORY, "out of memory building a row group")
               : status;
  }
  /* per-row inputs: their last dim is 1; per-row values: computed from per-row ones alone */
  for (int32_t k = 0; k < group->num_inputs; k++) {
    const dlop_type *type = &group->input_types[k];
    group->row->input_per_row[k] =
        (char)(group->input_scalar[k] || type->ndim == 0 || type->shape[type->ndim - 1] == 1);
  }
  for (m = 0; m < group->num_members; m++) {
    const dlop__fusion_member *member = &group->members[m];
    int per_row = 1;
    for (j = 0; j < member->node.num_inputs; j++) {
      const dlop__fusion_source *source = &member->sources[j];
      if (source->kind == DLOP__FUSION_FROM_INPUT) per_row &= row->input_per_row[source->index];
      if (source->kind == DLOP__FUSION_FROM_VALUE) per_row &= row->value_per_row[source->index];
    }
    for (j = 0; j < member->node.num_outputs; j++)
      row->value_per_row[member->values[j]] = (char)per_row;
  }
  for (int32_t v = 0; v < group->num_values; v++) {
    int inside = 0;
    if (read_outside(f, row_of, number, group->value_slots[v], &inside) || !inside)
      add_output(f, group, v);
  }
  if (group->num_inputs + group->num_outputs > DLOP__FUSION_MAX_OPERANDS) {
    int32_t operands = group->num_inputs + group->num_outputs;
    dlop__fusion_group_free(group);
    return dlop__error(DLOP_INTERNAL,
                       "fusion: row group %d has %d operands, more than the %d planned",
                       (int)number, (int)operands, DLOP__FUSION_MAX_OPERANDS);
  }
  dlop__fusion_row_plan_buffers(group);
  *result = group;
  return DLOP_OK;
}

int dlop__fusion_row_groups(dlop_function *function, const char *fusable,
                            const dlop__fusion_member *bodies, const char *reducible,
                            const dlop__fusion_reduction *reductions, int32_t *row_of,
                            dlop__fusion_group ***groups, int32_t *num_groups) {
  int32_t count = function->num_nodes, number = 0, n;
  plan_state s;
  int status = DLOP_OK;
  memset(&s, 0, sizeof s);
  *groups = NULL;
  *num_groups = 0;
  for (n = 0; n < count; n++) row_of[n] = -1;
  s.function = function;
  s.fusable = fusable;
  s.reducible = reducible;
  s.reductions = reductions;
  s.row_of = row_of;
  s.producer = malloc(sizeof(int32_t) * ((size_t)function->num_slots + 1));
  s.in = calloc((size_t)count + 1, 1);
  s.after = calloc((size_t)count + 1, 1);
  *groups = calloc((size_t)count + 1, sizeof(dlop__fusion_group *));
  if (!s.producer || !s.in || !s.after || !*groups) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory choosing row groups");
    goto done;
  }
  for (n = 0; n < function->num_slots; n++) s.producer[n] = -1;
  for (n = 0; n < count; n++)
    for (int32_t j = 0; j < function->nodes[n].num_outputs; j++)
      s.producer[function->nodes[n].output_slots[j]] = n;
  for (int32_t r = 0; r < count; r++) {
    const dlop__function_node *node = &function->nodes[r];
    if (!reducible[r] || row_of[r] >= 0 || !is_row_reduction(node, &reductions[r])) continue;
    s.rows = &node->input_types[0];
    grow(&s, r);
    if (!reads_a_result(&s)) continue;
    int64_t length = s.rows->shape[s.rows->ndim - 1];
    if (length > DLOP__FUSION_ROW_LIMIT || length == 0) {
      char line[512];
      if (length == 0)
        dlop__format(line, sizeof line, "not a row group: its rows are empty");
      else
        dlop__format(line, sizeof line,
                     "not a row group: its rows have %lld elements, more than the %d a row "
                     "kernel keeps on chip",
                     (long long)length, DLOP__FUSION_ROW_LIMIT);
      set_note(&function->nodes[r], line);
      continue;
    }
    for (n = 0; n < count; n++)
      if (s.in[n]) row_of[n] = number;
    number++;
  }
  for (int32_t g = 0; g < number && status == DLOP_OK; g++) {
    status = build(function, row_of, g, bodies, reducible, reductions, &(*groups)[g]);
    if (status == DLOP_OK) (*num_groups)++;
  }
done:
  if (status != DLOP_OK && *groups != NULL) {
    for (int32_t g = 0; g < *num_groups; g++) dlop__fusion_group_free((*groups)[g]);
    free(*groups);
    *groups = NULL;
    *num_groups = 0;
    for (n = 0; n < count; n++) row_of[n] = -1;
  }
  free(s.producer);
  free(s.in);
  free(s.after);
  return status;
}
