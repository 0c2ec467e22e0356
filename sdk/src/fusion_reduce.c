/* fusion_reduce.c — reductions that take a fused group as their input stage: the reduction body
 * a node's op declares (asked through stage.h, checked, copied), the stage chosen for it (the
 * fusable nodes its input is computed from, which its kernel evaluates per element instead of
 * reading a buffer), and the group that holds copies of the stage and the reduction. The stage's
 * nodes stay in the schedule: whatever else reads them still can, and nodes nobody reads any
 * more are dropped by function_fuse.c. */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

void dlop__fusion_reduction_free(dlop__fusion_reduction *reduction) {
  if (reduction == NULL) return;
  free(reduction->combine);
  free(reduction->finalize);
  free(reduction->node.params);
  free(reduction->node.input_slots);
  free(reduction->node.output_slots);
  free(reduction->node.input_types);
  free(reduction->node.output_types);
  free(reduction);
}

/* The conversions the host emits for a reduction: an element into the accumulator (the same
 * dtype, a 16-bit float into float32, an integer or bool into int64), and finalize's result
 * into the output (the same dtype, or float32 into a 16-bit float). */
static int accumulator_allowed(int32_t input, int32_t accumulator) {
  if (accumulator == input) return 1;
  if (input == DLOP_FLOAT16 || input == DLOP_BFLOAT16) return accumulator == DLOP_FLOAT32;
  return accumulator == DLOP_INT64 && !dlop_dtype_is_float((dlop_dtype)input);
}

static const char *dtype_or_not(int32_t dtype) {
  return dtype >= 0 && dtype < DLOP_DTYPE_COUNT ? dlop_dtype_name((dlop_dtype)dtype)
                                                : "not a dtype";
}

static int popcount(uint32_t bits) {
  int count = 0;
  for (; bits; bits &= bits - 1) count++;
  return count;
}

/* A code string given, and NUL-terminated within the code buffer when it points into it. */
static int check_code(const dlop__function_node *node, const char *what, const char *code,
                      const char *buffer) {
  if (code == NULL || code[0] == '\0')
    return dlop__error(DLOP_PLUGIN_ERROR, "node #%d %s: reduce_body succeeded but gave no %s code",
                       (int)node->index, node->op->name, what);
  if (code >= buffer && code < buffer + DLOP__FUSION_CODE_SIZE &&
      memchr(code, '\0', (size_t)(buffer + DLOP__FUSION_CODE_SIZE - code)) == NULL)
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: reduce_body wrote %s code that is not NUL-terminated within "
                       "the %d-byte code buffer",
                       (int)node->index, node->op->name, what, DLOP__FUSION_CODE_SIZE);
  return DLOP_OK;
}

static int check_reduction(const dlop__function_node *node, const dlop_reduce_body_args *body,
                           const char *buffer) {
  const char *op = node->op->name;
  int index = (int)node->index;
  const dlop_type *input = &node->input_types[0], *output = &node->output_types[0];
  int status = check_code(node, "combine", body->combine, buffer);
  if (status == DLOP_OK) status = check_code(node, "finalize", body->finalize, buffer);
  if (status != DLOP_OK) return status;
  if (body->prelude != NULL && (body->prelude_name == NULL || body->prelude_name[0] == '\0'))
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: reduce_body gave a prelude but no prelude_name (the host "
                       "emits one prelude per name)",
                       index, op);
  if (!accumulator_allowed(input->dtype, body->accumulator_dtype))
    return dlop__error(
        DLOP_PLUGIN_ERROR,
        "node #%d %s: reduce_body gave the accumulator dtype %d (%s) for a %s "
        "input: the host loads an element as its own dtype, a float16 or bfloat16 "
        "as float32, an integer or bool as int64 (docs/abi.md, \"Reduction bodies\")",
        index, op, (int)body->accumulator_dtype, dtype_or_not(body->accumulator_dtype),
        dlop_dtype_name((dlop_dtype)input->dtype));
  if (!dlop__fusion_conversion_allowed(output->dtype, body->output_compute_dtype))
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: reduce_body gave the output compute dtype %d (%s) for a %s "
                       "output: the host stores only the output's own dtype, or float32 into a "
                       "float16 or bfloat16 output",
                       index, op, (int)body->output_compute_dtype,
                       dtype_or_not(body->output_compute_dtype),
                       dlop_dtype_name((dlop_dtype)output->dtype));
  if (input->ndim < 32 && (body->axes >> input->ndim) != 0)
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: reduce_body gave axes 0x%x for an input of rank %d: a bit "
                       "at or past the rank names no axis",
                       index, op, (unsigned)body->axes, (int)input->ndim);
  if (body->keepdims != 0 && body->keepdims != 1)
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: reduce_body gave keepdims %d (expected 0 or 1)", index, op,
                       (int)body->keepdims);
  int32_t rank = body->keepdims ? input->ndim : input->ndim - popcount(body->axes);
  if (rank != output->ndim)
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: reduce_body reduces %d of %d axes%s, which gives rank %d, but "
                       "make_node gave the output rank %d",
                       index, op, popcount(body->axes), (int)input->ndim,
                       body->keepdims ? " keeping them" : "", (int)rank, (int)output->ndim);
  return DLOP_OK;
}

int dlop__fusion_query_reduction(const dlop__function_node *node,
                                 dlop__fusion_reduction *reduction) {
  dlop_reduce_body_args body;
  char *buffer = malloc(DLOP__FUSION_CODE_SIZE);
  memset(reduction, 0, sizeof *reduction);
  if (buffer == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory asking for reduction bodies");
  dlop__stage_node stage = dlop__function_stage_node(node, node->index);
  int status = dlop__stage_reduce_body(&stage, &node->input_types[0], &node->output_types[0],
                                       buffer, DLOP__FUSION_CODE_SIZE, &body);
  if (status == DLOP_OK) status = check_reduction(node, &body, buffer);
  if (status == DLOP_OK) {
    reduction->axes = body.axes;
    reduction->keepdims = body.keepdims;
    reduction->accumulator = body.accumulator_dtype;
    reduction->output_compute = body.output_compute_dtype;
    reduction->identity = body.identity;
    reduction->combine = strdup(body.combine);
    reduction->finalize = strdup(body.finalize);
    reduction->prelude = body.prelude;
    reduction->prelude_name = body.prelude ? body.prelude_name : NULL;
    reduction->value = -1;
    if (reduction->combine == NULL || reduction->finalize == NULL) {
      free(reduction->combine);
      free(reduction->finalize);
      memset(reduction, 0, sizeof *reduction);
      status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
    }
  }
  free(buffer);
  return status;
}

/* ---- the stage ------------------------------------------------------------------------------ */

static int32_t producer_of(const dlop_function *function, int32_t slot) {
  for (int32_t n = 0; n < function->num_nodes; n++)
    for (int32_t j = 0; j < function->nodes[n].num_outputs; j++)
      if (function->nodes[n].output_slots[j] == slot) return n;
  return -1;
}

int dlop__fusion_input_is_fusable(const dlop_function *function, const char *fusable, int32_t r) {
  int32_t p = producer_of(function, function->nodes[r].input_slots[0]);
  return p >= 0 && fusable[p];
}

/* The stage being chosen for reduction r, with what each slot's readers are: so that asking
 * whether a node feeds the stage, is read elsewhere, or what the stage would read costs the
 * node's or the stage's own inputs and outputs, not the schedule's. */
typedef struct stage_state {
  const dlop_function *function;
  char *in_stage;
  int32_t *members; /* the members, latest first */
  int32_t num_members;
  int32_t *producer;      /* per slot: the node writing it, or -1 */
  int32_t *outside_reads; /* per slot: reads by nodes neither members nor r, outputs counted */
  char *member_reads;     /* per slot: a member reads it */
  char *mark;             /* per slot: scratch of count_inputs, all 0 between calls */
} stage_state;

static int stage_init(stage_state *s, const dlop_function *function, int32_t r, char *in_stage) {
  size_t slots = (size_t)function->num_slots + 1;
  memset(s, 0, sizeof *s);
  s->function = function;
  s->in_stage = in_stage;
  s->members = malloc(sizeof(int32_t) * DLOP__FUSION_MAX_MEMBERS);
  s->producer = malloc(sizeof(int32_t) * slots);
  s->outside_reads = calloc(slots, sizeof(int32_t));
  s->member_reads = calloc(slots, 1);
  s->mark = calloc(slots, 1);
  if (!s->members || !s->producer || !s->outside_reads || !s->member_reads || !s->mark)
    return DLOP_OUT_OF_MEMORY;
  for (int32_t k = 0; k < function->num_slots; k++) s->producer[k] = -1;
  for (int32_t o = 0; o < function->num_outputs; o++) s->outside_reads[function->output_slots[o]]++;
  for (int32_t n = 0; n < function->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    in_stage[n] = 0;
    for (int32_t j = 0; j < node->num_outputs; j++) s->producer[node->output_slots[j]] = n;
    for (int32_t j = 0; j < node->num_inputs && n != r; j++)
      s->outside_reads[node->input_slots[j]]++;
  }
  return DLOP_OK;
}

static void stage_free(stage_state *s) {
  free(s->members);
  free(s->producer);
  free(s->outside_reads);
  free(s->member_reads);
  free(s->mark);
}

static void join(stage_state *s, int32_t n) {
  const dlop__function_node *node = &s->function->nodes[n];
  s->in_stage[n] = 1;
  s->members[s->num_members++] = n;
  for (int32_t j = 0; j < node->num_inputs; j++) {
    s->member_reads[node->input_slots[j]] = 1;
    s->outside_reads[node->input_slots[j]]--;
  }
}

/* Undoes the last join (n's inputs are read by members only if another member reads them). */
static void leave(stage_state *s, int32_t n) {
  const dlop__function_node *node = &s->function->nodes[n];
  s->in_stage[n] = 0;
  s->num_members--;
  for (int32_t j = 0; j < node->num_inputs; j++) {
    int32_t slot = node->input_slots[j], still = 0;
    s->outside_reads[slot]++;
    for (int32_t m = 0; m < s->num_members && !still; m++) {
      const dlop__function_node *member = &s->function->nodes[s->members[m]];
      for (int32_t k = 0; k < member->num_inputs && !still; k++)
        still = member->input_slots[k] == slot;
    }
    s->member_reads[slot] = (char)still;
  }
}

/* The tensors the stage would read: distinct slots its members read that no member writes,
 * one-element constants aside. */
static int32_t count_inputs(stage_state *s) {
  int32_t count = 0;
  for (int pass = 0; pass < 2; pass++) /* count, then clear the marks */
    for (int32_t m = 0; m < s->num_members; m++) {
      const dlop__function_node *node = &s->function->nodes[s->members[m]];
      for (int32_t j = 0; j < node->num_inputs; j++) {
        int32_t slot = node->input_slots[j], p = s->producer[slot];
        if (pass == 1) {
          s->mark[slot] = 0;
          continue;
        }
        if (s->mark[slot] || dlop__fusion_is_literal_slot(s->function, slot) || (p >= 0 && s->in_stage[p]))
          continue;
        s->mark[slot] = 1;
        count++;
      }
    }
  return count;
}

/* Whether node n writes a slot a member reads. */
static int feeds_stage(const stage_state *s, int32_t n) {
  const dlop__function_node *node = &s->function->nodes[n];
  for (int32_t o = 0; o < node->num_outputs; o++)
    if (s->member_reads[node->output_slots[o]]) return 1;
  return 0;
}

/* Whether a node other than the stage's members and the reduction reads an output of node n,
 * or the function returns one. */
static int read_elsewhere(const stage_state *s, int32_t n) {
  const dlop__function_node *node = &s->function->nodes[n];
  for (int32_t o = 0; o < node->num_outputs; o++)
    if (s->outside_reads[node->output_slots[o]] > 0) return 1;
  return 0;
}

/* Whether node n may join the stage as far as the cost of computing it twice goes. */
static int worth_computing_twice(const stage_state *s, const dlop__fusion_member *bodies,
                                 int32_t n) {
  if (s->function->device.type == DLOP_DEVICE_CUDA) return 1;
  return (bodies[n].body_flags & DLOP_SCALAR_BODY_EXACT) || !read_elsewhere(s, n);
}

/* "axes (0, 2)" for explain's reasons. */
static void format_axes(uint32_t axes, char *text, size_t size) {
  size_t used = 0;
  int first = 1;
  used += (size_t)snprintf(text, size, "(");
  for (int d = 0; d < 32 && used < size; d++) {
    if (!(axes & (1u << d))) continue;
    used += (size_t)snprintf(text + used, size - used, "%s%d", first ? "" : ", ", d);
    first = 0;
  }
  if (used < size) snprintf(text + used, size - used, ")");
}

int dlop__fusion_reduction_stage(const dlop_function *function, const char *fusable,
                                 const dlop__fusion_member *bodies, int32_t r,
                                 const dlop__fusion_reduction *reduction, char *in_stage, char *why,
                                 size_t why_size) {
  const dlop__function_node *node = &function->nodes[r];
  int32_t slot = node->input_slots[0], ndim = node->input_types[0].ndim;
  stage_state s;
  why[0] = '\0';
  if (stage_init(&s, function, r, in_stage) != DLOP_OK) {
    stage_free(&s);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory choosing a reduction's input stage");
  }
  int32_t p = s.producer[slot];
  int reduced = popcount(reduction->axes);
  uint32_t all = ndim >= 32 ? 0xFFFFFFFFu : (uint32_t)((1ull << ndim) - 1);
  uint32_t trailing = all & ~(uint32_t)((1ull << (ndim - reduced)) - 1);
  int returned = 0;
  for (int32_t o = 0; o < function->num_outputs; o++) returned |= function->output_slots[o] == slot;
  if (p < 0 || !fusable[p]) {
    /* nothing computed elementwise feeds it: nothing to say */
  } else if (returned) {
    dlop__format(why, why_size,
                 "its input %s is a function output, written anyway: the reduction reads it",
                 function->slot_names[slot]);
  } else if (reduction->axes != trailing) {
    char axes[160];
    format_axes(reduction->axes, axes, sizeof axes);
    dlop__format(why, why_size,
                 "it reduces axes %s of a rank-%d input, and a fused reduction covers every "
                 "axis or the last ones: it reads its input %s from memory",
                 axes, (int)ndim, function->slot_names[slot]);
  } else if (!worth_computing_twice(&s, bodies, p)) {
    dlop__format(why, why_size,
                 "its input %s is also read elsewhere and %s calls math functions, which on the "
                 "CPU cost more computed twice than read back: the reduction reads it from memory",
                 function->slot_names[slot], function->nodes[p].op->name);
  } else {
    join(&s, p);
    if (count_inputs(&s) > DLOP__FUSION_MAX_OPERANDS - 1) {
      leave(&s, p);
      dlop__format(why, why_size,
                   "the node computing its input reads more than the %d tensors a fused kernel "
                   "takes",
                   DLOP__FUSION_MAX_OPERANDS - 1);
    }
    /* the cone above p: each fusable producer of a member joins while the kernel's operands
     * and members stay within the limits (a producer left out is read as a tensor) */
    for (int32_t n = p - 1; n >= 0 && s.num_members > 0 && s.num_members < DLOP__FUSION_MAX_MEMBERS;
         n--) {
      if (!fusable[n] || !feeds_stage(&s, n) || !worth_computing_twice(&s, bodies, n)) continue;
      join(&s, n);
      if (count_inputs(&s) > DLOP__FUSION_MAX_OPERANDS - 1) leave(&s, n);
    }
  }
  stage_free(&s);
  return DLOP_OK;
}

/* ---- the group ------------------------------------------------------------------------------ */

/* A deep copy of a compiled node's description (op, params, slots, static types); no thunk. */
int dlop__fusion_copy_node(const dlop__function_node *from, dlop__function_node *to) {
  memset(to, 0, sizeof *to);
  to->op = from->op;
  to->index = from->index;
  to->num_inputs = from->num_inputs;
  to->num_outputs = from->num_outputs;
  to->input_slots = malloc(sizeof(int32_t) * ((size_t)from->num_inputs + 1));
  to->output_slots = malloc(sizeof(int32_t) * ((size_t)from->num_outputs + 1));
  to->input_types = malloc(sizeof(dlop_type) * ((size_t)from->num_inputs + 1));
  to->output_types = malloc(sizeof(dlop_type) * ((size_t)from->num_outputs + 1));
  int status = dlop__params_pack(from->params, from->num_params, &to->params);
  if (status == DLOP_OK) to->num_params = from->num_params;
  if (status != DLOP_OK || !to->input_slots || !to->output_slots || !to->input_types ||
      !to->output_types)
    return DLOP_OUT_OF_MEMORY;
  memcpy(to->input_slots, from->input_slots, sizeof(int32_t) * (size_t)from->num_inputs);
  memcpy(to->output_slots, from->output_slots, sizeof(int32_t) * (size_t)from->num_outputs);
  memcpy(to->input_types, from->input_types, sizeof(dlop_type) * (size_t)from->num_inputs);
  memcpy(to->output_types, from->output_types, sizeof(dlop_type) * (size_t)from->num_outputs);
  return DLOP_OK;
}

/* A copy of a member's body (its code and compute dtypes; sources and values are the group's). */
int dlop__fusion_copy_body(const dlop__fusion_member *from, const dlop__function_node *node,
                           dlop__fusion_member *to) {
  to->code = strdup(from->code);
  to->prelude = from->prelude;
  to->prelude_name = from->prelude_name;
  to->body_flags = from->body_flags;
  to->runtime_params = from->runtime_params;
  to->param_base = -1; /* the values are written into the code */
  to->input_compute = malloc(sizeof(int32_t) * ((size_t)node->num_inputs + 1));
  to->output_compute = malloc(sizeof(int32_t) * ((size_t)node->num_outputs + 1));
  to->sources = calloc((size_t)node->num_inputs + 1, sizeof(dlop__fusion_source));
  to->values = calloc((size_t)node->num_outputs + 1, sizeof(int32_t));
  if (!to->code || !to->input_compute || !to->output_compute || !to->sources || !to->values)
    return DLOP_OUT_OF_MEMORY;
  memcpy(to->input_compute, from->input_compute, sizeof(int32_t) * (size_t)node->num_inputs);
  memcpy(to->output_compute, from->output_compute, sizeof(int32_t) * (size_t)node->num_outputs);
  return DLOP_OK;
}

int dlop__fusion_reduction_group_build(const dlop_function *function, const char *in_stage,
                                       const dlop__fusion_member *bodies, int32_t r,
                                       dlop__fusion_reduction *reduction, int32_t number,
                                       dlop__fusion_group **result) {
  int32_t n, members = 0, reads = 0, writes = 1;
  int status = DLOP_OK;
  *result = NULL;
  for (n = 0; n < function->num_nodes; n++) {
    if (!in_stage[n]) continue;
    members++;
    reads += function->nodes[n].num_inputs;
    writes += function->nodes[n].num_outputs;
  }
  dlop__fusion_group *group = dlop__fusion_group_alloc(members, reads, writes);
  int32_t *value_of_slot = malloc(sizeof(int32_t) * ((size_t)function->num_slots + 1));
  if (group != NULL) group->reduction = calloc(1, sizeof *group->reduction);
  if (group == NULL || value_of_slot == NULL || group->reduction == NULL) {
    free(value_of_slot);
    dlop__fusion_group_free(group);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory building a fused reduction");
  }
  group->number = number;
  for (n = 0; n < function->num_nodes && status == DLOP_OK; n++) {
    if (!in_stage[n]) continue;
    dlop__fusion_member *member = &group->members[group->num_members++];
    status = dlop__fusion_copy_node(&function->nodes[n], &member->node);
    if (status == DLOP_OK) status = dlop__fusion_copy_body(&bodies[n], &function->nodes[n], member);
  }
  if (status != DLOP_OK) {
    free(value_of_slot);
    dlop__fusion_group_free(group);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory building a fused reduction");
  }
  for (n = 0; n < function->num_slots; n++) value_of_slot[n] = -1;
  status = dlop__fusion_connect_sources(function, group, value_of_slot);
  const dlop__function_node *node = &function->nodes[r];
  int32_t value = value_of_slot[node->input_slots[0]];
  free(value_of_slot);
  if (status == DLOP_OK && value < 0)
    status =
        dlop__error(DLOP_INTERNAL, "fusion: the stage of node #%d %s does not compute its input",
                    (int)node->index, node->op->name);
  if (status == DLOP_OK && group->num_inputs > DLOP__FUSION_MAX_OPERANDS - 1)
    status = dlop__error(DLOP_INTERNAL,
                         "fusion: reduction group %d has %d inputs, more than the %d planned",
                         (int)number, (int)group->num_inputs, DLOP__FUSION_MAX_OPERANDS - 1);
  if (status != DLOP_OK) {
    dlop__fusion_group_free(group);
    return status;
  }
  *group->reduction = *reduction;
  memset(reduction, 0, sizeof *reduction);
  group->reduction->node = *node; /* moved: the fused node replaces it in the schedule */
  group->reduction->value = value;
  group->num_outputs = 1;
  group->output_slots[0] = node->output_slots[0];
  group->output_types[0] = node->output_types[0];
  group->output_values[0] = -1;
  *result = group;
  return DLOP_OK;
}
